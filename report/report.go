// Package report renders check results for people (a doctor-style plain
// report) and for programs (versioned JSON). Every string from the machine is
// sanitised here, at the last step before output.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// SchemaVersion is the "schema" field of the JSON report. Bump it only on
// incompatible changes; adding fields is compatible.
const SchemaVersion = 1

// HostInfo is the "host" object of the JSON report.
type HostInfo struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	ShmDir    string `json:"shm_dir"`
	UID       int    `json:"uid"`
	EUID      int    `json:"euid"`
	Simulated bool   `json:"simulated"`
}

// CheckInfo is one entry of the "checks" array.
type CheckInfo struct {
	ID         string          `json:"id"`
	Title      string          `json:"title"`
	Category   string          `json:"category"`
	Status     checks.Severity `json:"status"`
	DurationMS float64         `json:"duration_ms"`
}

// Summary counts findings by severity.
type Summary struct {
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Skipped  int `json:"skipped"`
	Info     int `json:"info"`
	OK       int `json:"ok"`
	ExitCode int `json:"exit_code"`
}

// JSONReport is the document `ncclwiz check --json` prints.
type JSONReport struct {
	Schema      int              `json:"schema"`
	Tool        string           `json:"tool"`
	Version     string           `json:"version"`
	GeneratedAt string           `json:"generated_at"`
	Host        HostInfo         `json:"host"`
	Summary     Summary          `json:"summary"`
	Checks      []CheckInfo      `json:"checks"`
	Findings    []checks.Finding `json:"findings"`
}

// Build assembles the JSON document (also used by the wizard's export).
func Build(h *host.Host, rs []checks.Result, version string) JSONReport {
	r := JSONReport{
		Schema:      SchemaVersion,
		Tool:        "ncclwiz",
		Version:     version,
		GeneratedAt: h.Now().UTC().Format(time.RFC3339),
		Host: HostInfo{Name: textsafe.Sanitize(h.Name), Kind: h.Kind, ShmDir: textsafe.Sanitize(h.ShmLogical()),
			UID: h.UID, EUID: h.EUID, Simulated: h.Simulated},
		Checks:   []CheckInfo{},
		Findings: []checks.Finding{},
	}
	for _, res := range rs {
		r.Checks = append(r.Checks, CheckInfo{ID: res.ID, Title: res.Title, Category: res.Category,
			Status: res.Worst(), DurationMS: float64(res.Duration.Microseconds()) / 1000})
		for _, f := range res.Findings {
			r.Findings = append(r.Findings, SanitizeFinding(f))
			r.Summary.add(f.Severity)
		}
	}
	r.Summary.ExitCode = checks.ExitCode(rs)
	return r
}

func (s *Summary) add(sev checks.Severity) {
	switch sev {
	case checks.Error:
		s.Errors++
	case checks.Warn:
		s.Warnings++
	case checks.Skipped:
		s.Skipped++
	case checks.Info:
		s.Info++
	default:
		s.OK++
	}
}

// WriteJSON writes the JSON report, indented, with a trailing newline.
func WriteJSON(w io.Writer, h *host.Host, rs []checks.Result, version string) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(Build(h, rs, version)); err != nil {
		return fmt.Errorf("write json report: %w", err)
	}
	return nil
}

// SanitizeFinding returns a copy of f with every string made terminal-safe
// and secrets redacted, including strings inside evidence.
func SanitizeFinding(f checks.Finding) checks.Finding {
	f.Title = textsafe.Clean(f.Title)
	f.Detail = textsafe.SanitizeMultiline(textsafe.RedactText(f.Detail))
	if f.Evidence != nil {
		f.Evidence = sanitizeValue(f.Evidence).(map[string]any)
	}
	return f
}

// sanitizeMap cleans a record. The key names a string value's meaning: an
// environment map {"HF_TOKEN": "…"} or a {"name": "HF_TOKEN", "value": "…"}
// pair hides the whole value when the name says it is secret.
func sanitizeMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	name, _ := m["name"].(string)
	for k, v := range m {
		switch s, isStr := v.(string); {
		case isStr && k == "value" && name != "":
			out[textsafe.Sanitize(k)] = textsafe.Sanitize(textsafe.RedactEnv(name, s))
		case isStr:
			out[textsafe.Sanitize(k)] = textsafe.Sanitize(textsafe.RedactEnv(k, s))
		default:
			out[textsafe.Sanitize(k)] = sanitizeValue(v)
		}
	}
	return out
}

func sanitizeValue(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return textsafe.Clean(x)
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = textsafe.Clean(s)
		}
		return out
	case map[string]any:
		return sanitizeMap(x)
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, vv := range x {
			m[k] = vv
		}
		return sanitizeMap(m)
	case []map[string]any:
		out := make([]map[string]any, len(x))
		for i, m := range x {
			out[i] = sanitizeValue(m).(map[string]any)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, vv := range x {
			out[i] = sanitizeValue(vv)
		}
		return out
	default:
		// Structs and numbers: round-trip through JSON so nested strings
		// are sanitised too.
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprintf("%v", x)
		}
		var generic any
		if json.Unmarshal(b, &generic) != nil {
			return x
		}
		if _, isNum := generic.(float64); isNum {
			return x
		}
		if _, isBool := generic.(bool); isBool || generic == nil {
			return x
		}
		return sanitizeValue(generic)
	}
}

// PlainOptions tune the plain report.
type PlainOptions struct {
	Verbose bool
	Title   string // e.g. "ncclwiz check"
	// Context is the global flags that chose the machine looked at
	// (--shm-path DIR, --scenario NAME): the fix commands the report
	// suggests repeat them, or they would act on another machine.
	Context string
}

type marks struct{ ok, info, warn, err, skip, arrow string }

func marksFor(o termio.Output) marks {
	if o.Unicode {
		return marks{"✓", "i", "!", "✗", "–", "→"}
	}
	return marks{"ok", "i", "!", "X", "-", "->"}
}

// WritePlain writes the doctor-style report.
func WritePlain(out termio.Output, h *host.Host, rs []checks.Result, opts PlainOptions) error {
	w := out.Writer()
	m := marksFor(out)
	st := newStyles()
	var b strings.Builder

	title := opts.Title
	if title == "" {
		title = "ncclwiz check"
	}
	hostLine := fmt.Sprintf("%s · %s %s", title, h.Kind, textsafe.Sanitize(h.Name))
	if h.Simulated {
		hostLine += " · SIMULATED"
	}
	b.WriteString(st.title.Render(hostLine) + "\n\n")

	idw := 0
	for _, r := range rs {
		idw = max(idw, len(r.ID))
	}
	for _, r := range rs {
		worst := r.Worst()
		fs := append([]checks.Finding(nil), r.Findings...)
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].Severity.Rank() < fs[j].Severity.Rank() })
		head := fs[0]
		dur := formatDuration(r.Duration)
		// Titles wrap under themselves, the timing stays on the first line:
		// an 80-column SSH session must not fold lines mid-word.
		ind := strings.Repeat(" ", idw+4)
		room := out.Width - len(ind)
		if dur != "" {
			room -= len(dur) + 2
		}
		tl := textwrap.Lines(textsafe.Clean(head.Title), room)
		if len(tl) == 0 {
			tl = []string{""}
		}
		line := fmt.Sprintf("%s %-*s  %s", st.mark(worst, m), idw, r.ID, tl[0])
		b.WriteString(padRight(line, dur, out.Width) + "\n")
		for _, l := range tl[1:] {
			b.WriteString(ind + l + "\n")
		}
		shown := fs
		if !opts.Verbose {
			// Without -v: the head finding's hints, plus any other problem.
			shown = nil
			for i, f := range fs {
				if i == 0 || f.Severity.IsProblem() || f.Severity == checks.Skipped {
					shown = append(shown, f)
				}
			}
		}
		for i, f := range shown {
			if i > 0 {
				for j, l := range textwrap.Lines(textsafe.Clean(f.Title), out.Width-len(ind)) {
					lead := ind
					if j == 0 {
						lead = ind[:len(ind)-2] + st.mark(f.Severity, m) + " "
					}
					b.WriteString(lead + l + "\n")
				}
			}
			if opts.Verbose {
				if f.Detail != "" {
					for _, l := range textwrap.Lines(textsafe.SanitizeMultiline(textsafe.RedactText(f.Detail)), max(out.Width-len(ind), 30)) {
						b.WriteString(ind + st.dim.Render(l) + "\n")
					}
				}
				for _, l := range HumanEvidence(f.Evidence) {
					for _, wl := range WrapEvidence(l, max(out.Width-len(ind), 30)) {
						b.WriteString(ind + st.dim.Render(wl) + "\n")
					}
				}
			}
			if f.Severity.IsProblem() || opts.Verbose {
				for _, l := range hints(f, m, out.Width-len(ind), opts.Context) {
					b.WriteString(ind + st.hint.Render(l) + "\n")
				}
			}
		}
	}
	b.WriteString("\n" + summaryLine(rs, opts.Verbose) + "\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// hints are the fix and guide commands, one "·"-separated line, broken
// between commands (never inside one) when it would not fit width. The fix
// command carries context (the flags that chose the machine).
func hints(f checks.Finding, m marks, width int, context string) []string {
	var parts []string
	if len(f.Fixes) > 0 {
		fix := "ncclwiz fix --apply " + strings.Join(f.Fixes, ",")
		if context != "" {
			fix += " " + context
		}
		parts = append(parts, fix)
	}
	if f.Guide != "" {
		parts = append(parts, "ncclwiz guides "+f.Guide)
	}
	if len(parts) == 0 {
		return nil
	}
	lines := []string{m.arrow + " " + parts[0]}
	for _, p := range parts[1:] {
		last := &lines[len(lines)-1]
		if lipgloss.Width(*last)+3+lipgloss.Width(p) <= width {
			*last += " · " + p
		} else {
			lines = append(lines, strings.Repeat(" ", lipgloss.Width(m.arrow)+1)+p)
		}
	}
	return lines
}

func summaryLine(rs []checks.Result, verbose bool) string {
	var s Summary
	for _, r := range rs {
		for _, f := range r.Findings {
			s.add(f.Severity)
		}
	}
	var parts []string
	switch n := s.Errors + s.Warnings; n {
	case 0:
		parts = append(parts, "No problems found in "+units.Count(len(rs), "check"))
	default:
		parts = append(parts, fmt.Sprintf("%s found (%s, %s)", units.Count(n, "problem"),
			units.Count(s.Errors, "error"), units.Count(s.Warnings, "warning")))
	}
	if s.Skipped > 0 {
		parts = append(parts, units.Count(s.Skipped, "check")+" skipped")
	}
	if !verbose {
		parts = append(parts, "run with -v for details")
	}
	return strings.Join(parts, " · ") + "."
}

func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return ""
	case d < time.Millisecond:
		return "<1ms"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
}

func padRight(line, right string, width int) string {
	vis := lipgloss.Width(line)
	if right == "" || vis+2+len(right) > width {
		if right == "" {
			return line
		}
		return line + "  " + right
	}
	return line + strings.Repeat(" ", width-vis-len(right)) + right
}

// EvidenceLines renders evidence as "key: value" lines, keys sorted, with
// lists of records one per line; strings are sanitised.
func EvidenceLines(ev map[string]any) []string { return evidenceLines(ev) }

// evidenceLines renders evidence as "key: value" lines, keys sorted.
func evidenceLines(ev map[string]any) []string {
	if len(ev) == 0 {
		return nil
	}
	keys := make([]string, 0, len(ev))
	for k := range ev {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		v := sanitizeValue(ev[k])
		switch x := v.(type) {
		case []any:
			if len(x) == 0 {
				out = append(out, k+": (none)")
				continue
			}
			if _, isMap := x[0].(map[string]any); isMap {
				out = append(out, k+":")
				for _, item := range x {
					out = append(out, "  - "+inline(item))
				}
				continue
			}
			out = append(out, k+": "+inline(x))
		case []map[string]any:
			out = append(out, k+":")
			for _, item := range x {
				out = append(out, "  - "+inline(item))
			}
		default:
			out = append(out, k+": "+inline(x))
		}
	}
	return out
}

func inline(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []string:
		return strings.Join(x, ", ")
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = inline(e)
		}
		return strings.Join(parts, ", ")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + inline(x[k])
		}
		return strings.Join(parts, " ")
	case nil:
		return "-"
	default:
		return fmt.Sprint(x)
	}
}
