// Package flow is the wizard's route from symptom to verified fix, without
// any UI: which stage follows which, given what has been found and done.
// The TUI renders whatever stage this package says is current, so the
// skipping rules are testable on their own.
package flow

import (
	"github.com/ncclwiz/ncclwiz/checks"
)

// Stage is one screen of the wizard.
type Stage string

// Stages in the order of the diagnose path. Log, Learn, Guides and Hang are
// side entries from Start; Nodes is a side trip from Findings.
const (
	Start    Stage = "start"
	Detect   Stage = "detect"
	Findings Stage = "findings"
	Explain  Stage = "explain"
	Fix      Stage = "fix"
	Apply    Stage = "apply"
	Validate Stage = "validate"
	Summary  Stage = "summary"
	Log      Stage = "log"
	Learn    Stage = "learn"
	Guides   Stage = "guides"
	// Hang inspects a running job that hangs (a side entry from Start).
	Hang Stage = "hang"
	// Nodes checks every node of a multi-node job (a side trip from Findings).
	Nodes Stage = "nodes"
)

// Title is the short name shown in the header's progress trail.
func (s Stage) Title() string {
	switch s {
	case Start:
		return "Start"
	case Detect:
		return "Detect"
	case Findings:
		return "Findings"
	case Explain:
		return "Explain"
	case Fix:
		return "Fix"
	case Apply:
		return "Apply"
	case Validate:
		return "Validate"
	case Summary:
		return "Summary"
	case Log:
		return "Explain a log"
	case Learn:
		return "Learn"
	case Guides:
		return "Guides"
	case Hang:
		return "My job is hanging"
	case Nodes:
		return "Check all nodes"
	}
	return string(s)
}

// Path is the diagnose path in order.
var path = []Stage{Start, Detect, Findings, Explain, Fix, Apply, Validate, Summary}

// Path returns the stages of the diagnose path (for the progress trail).
func Path() []Stage { return append([]Stage(nil), path...) }

// State is what the flow needs to know to route.
type State struct {
	// Detected is true once a check run has finished.
	Detected bool
	Results  []checks.Result
	// GuideCount is how many guides explain the current problems.
	GuideCount int
	// FixCount is how many fixes apply to the current problems;
	// FixesPending is set while they are being planned (the Fix step then
	// shows that it is planning).
	FixCount     int
	FixesPending bool
	// Applied is true once confirmed fixes ran. Choosing fixes does not
	// route anywhere: Apply is entered only by the confirm step's y.
	Applied bool
	// CanValidate is false when no collective test can run here (no GPU,
	// no torch/nccl-tests); the Validate stage still shows once to say why,
	// unless SkipValidate is set.
	CanValidate  bool
	SkipValidate bool
}

// Problems returns the warnings and errors found.
func (s State) Problems() []checks.Finding {
	var out []checks.Finding
	for _, r := range s.Results {
		for _, f := range r.Findings {
			if f.Severity.IsProblem() {
				out = append(out, f)
			}
		}
	}
	return out
}

// applies reports whether stage st has anything to show in state s.
func (s State) applies(st Stage) bool {
	switch st {
	case Explain:
		return s.Detected && s.GuideCount > 0
	case Fix:
		return s.Detected && (s.FixCount > 0 || s.FixesPending)
	case Apply:
		return s.Applied
	case Validate:
		return s.Detected && !s.SkipValidate
	case Findings, Summary:
		return s.Detected
	default:
		return true
	}
}

// Next returns the stage after cur on the diagnose path, skipping stages
// that do not apply; side entries go back to Start.
func (s State) Next(cur Stage) Stage {
	i := index(cur)
	if i < 0 {
		return Start
	}
	if cur == Start {
		return Detect
	}
	if cur == Detect && !s.Detected {
		return Detect
	}
	for j := i + 1; j < len(path); j++ {
		if s.applies(path[j]) {
			return path[j]
		}
	}
	return Summary
}

// Prev returns the stage before cur, skipping stages that do not apply and
// never going back into Detect (re-running checks is explicit) or Apply
// (fixes are not re-applied by navigation).
func (s State) Prev(cur Stage) Stage {
	i := index(cur)
	if i <= 0 {
		return Start
	}
	for j := i - 1; j >= 0; j-- {
		st := path[j]
		if st == Detect || st == Apply {
			continue
		}
		if st == Start || s.applies(st) {
			return st
		}
	}
	return Start
}

func index(st Stage) int {
	for i, p := range path {
		if p == st {
			return i
		}
	}
	return -1
}
