// Package checks holds the check engine: what a check is, what it finds, and
// how a set of checks runs concurrently with timeouts and panic isolation.
// Checks read the machine only through host.Host and never change it.
package checks

import (
	"encoding/json"
	"fmt"
)

// Severity orders findings from fine to broken; Skipped means not checked.
type Severity int

// Severities, in the order reports sort them (worst first uses Rank).
const (
	OK Severity = iota
	Info
	Warn
	Error
	Skipped
)

var severityNames = [...]string{"ok", "info", "warn", "error", "skipped"}

func (s Severity) String() string {
	if s < 0 || int(s) >= len(severityNames) {
		return fmt.Sprintf("severity(%d)", int(s))
	}
	return severityNames[s]
}

// ParseSeverity is the inverse of String.
func ParseSeverity(s string) (Severity, error) {
	for i, n := range severityNames {
		if n == s {
			return Severity(i), nil
		}
	}
	return OK, fmt.Errorf("unknown severity %q", s)
}

// MarshalJSON writes the severity as its name.
func (s Severity) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a severity name.
func (s *Severity) UnmarshalJSON(b []byte) error {
	var n string
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	v, err := ParseSeverity(n)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// IsProblem reports whether the severity counts towards exit code 1.
func (s Severity) IsProblem() bool { return s == Warn || s == Error }

// Rank orders severities for display: errors first, ok last.
func (s Severity) Rank() int {
	switch s {
	case Error:
		return 0
	case Warn:
		return 1
	case Skipped:
		return 2
	case Info:
		return 3
	default:
		return 4
	}
}

// Finding is one observation of a check, with the evidence that supports it.
type Finding struct {
	// Check is the dotted ID of the check that made the finding.
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	// Title is one line, e.g. "/dev/shm is 64 MiB (docker default)".
	Title string `json:"title"`
	// Detail explains why it matters and what to do, in a few sentences.
	Detail string `json:"detail,omitempty"`
	// Evidence holds what was seen: paths, numbers, PIDs. Values must be
	// JSON-encodable; keys are snake_case.
	Evidence map[string]any `json:"evidence,omitempty"`
	// Guide is the ID of the guide that explains this finding.
	Guide string `json:"guide,omitempty"`
	// Fixes are IDs of fixes (steps package) that answer this finding.
	Fixes []string `json:"fixes,omitempty"`
	// Incomplete marks the finding Run makes for a check that crashed,
	// failed or timed out: whatever it would have found or recommended is
	// missing, and commands that collect recommendations (env) say so.
	Incomplete bool `json:"-"`
}

// Problems counts the findings that are warnings or errors.
func Problems(fs []Finding) (errors, warnings int) {
	for _, f := range fs {
		switch f.Severity {
		case Error:
			errors++
		case Warn:
			warnings++
		}
	}
	return errors, warnings
}
