package render

import (
	"encoding/json"
	"fmt"
	"github.com/ncclwiz/ncclwiz/explain/internal/phrase"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"charm.land/lipgloss/v2"

	"github.com/ncclwiz/ncclwiz/explain"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// PlainOptions tune the plain rendering.
type PlainOptions struct {
	// Unicode allows marks such as ✗ and •.
	Unicode bool
	// Verbose shows every evidence line kept and the full digest.
	Verbose bool
	// Width is the terminal width used to wrap text (0: 100).
	Width int
	// CutLines shortens evidence lines to the width (for terminals; a
	// pipe or file gets whole lines).
	CutLines bool
}

// WriteJSON writes the versioned JSON report.
func WriteJSON(w io.Writer, r *explain.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

type plainStyles struct {
	title, head, dim, err, warn, ok, id lipgloss.Style
}

func newPlainStyles() plainStyles {
	return plainStyles{
		title: lipgloss.NewStyle().Bold(true),
		head:  lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("6")),
		dim:   lipgloss.NewStyle().Foreground(lipgloss.Color("245")),
		err:   lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("1")),
		warn:  lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("3")),
		ok:    lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		id:    lipgloss.NewStyle().Foreground(lipgloss.Color("4")),
	}
}

// WritePlain writes the human report. Styles are ANSI; pass a writer that
// downsamples them to the terminal (termio.Output.Writer) — or strips them.
func WritePlain(w io.Writer, r *explain.Report, o PlainOptions) error {
	if o.Width <= 0 {
		o.Width = 100
	}
	st := newPlainStyles()
	mk := func(u, a string) string {
		if o.Unicode {
			return u
		}
		return a
	}
	bullet, cross, dot := mk("•", "*"), mk("✗", "X"), mk(" · ", " | ")
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	// Header.
	var lines, bytes int64
	for _, in := range r.Inputs {
		lines, bytes = lines+in.Lines, bytes+in.Bytes
	}
	head := fmt.Sprintf("ncclwiz explain: %s, %s, %s", units.Count(len(r.Inputs), "input"), units.Count(lines, "line"), phrase.Bytes(bytes))
	if r.NCCLVersion != "" {
		head += dot + "NCCL " + r.NCCLVersion
	}
	p("%s\n\n", st.title.Render(head))

	// Diagnoses.
	allEmpty := len(r.Inputs) > 0
	for _, in := range r.Inputs {
		// A binary input is not a log in which nothing failed either.
		allEmpty = allEmpty && (in.Empty || in.Binary)
	}
	if len(r.Diagnoses) == 0 && !allEmpty {
		p("%s %s\n", st.ok.Render(mk("✓", "OK")), "No NCCL failure found.")
	}
	shownOthers := false
	for i, d := range r.Diagnoses {
		switch {
		case d.RootCause:
			label := " Root cause:"
			if d.NotNCCL {
				label = " Root cause (not NCCL):"
			}
			p("%s %s  %s  %s\n", st.err.Render(cross+label), st.title.Render(d.Title), st.id.Render("["+d.ID+"]"), confWord(d))
		default:
			if !shownOthers {
				head := "Also found"
				if notNCCLRoot(r) {
					head = "Also found (knock-on of the root cause)"
				}
				p("%s\n", st.head.Render(head))
				shownOthers = true
			}
			tag := roleWord(d)
			p("%s %s %s  %s  %s", bullet, st.warn.Render(tag), d.Title, st.id.Render("["+d.ID+"]"), confWord(d))
			if d.Count > 1 {
				p("  ×%d", d.Count)
			}
			p("\n")
		}
		ind := "    "
		if d.RootCause {
			ind = "  "
		}
		if d.Explanation != "" && (d.RootCause || d.Inferred || o.Verbose) {
			p("%s%s\n", ind, wrap(d.Explanation, o.Width-len(ind), ind))
		}
		if len(d.Ranks) > 0 || len(d.Hosts) > 0 {
			var parts []string
			if len(d.Ranks) > 0 {
				parts = append(parts, phrase.RankList(d.Ranks))
			}
			if len(d.Hosts) > 0 {
				parts = append(parts, "host "+strings.Join(phrase.Limit(d.Hosts, 6), ", "))
			}
			p("%s%s %s\n", ind, st.dim.Render("Where:   "), strings.Join(parts, dot))
		}
		evs := d.Evidence
		if !o.Verbose && !d.RootCause && len(evs) > 1 {
			evs = evs[:1]
		} else if !o.Verbose && len(evs) > 3 {
			evs = evs[:3]
		}
		for _, ev := range evs {
			p("%s%s %s\n", ind, st.dim.Render("explain.Evidence:"), evHead(ev, dot))
			p("%s  %s\n", ind, shorten(ev.Text, o.Width-len(ind)-2, !o.CutLines))
		}
		if len(d.Fields) > 0 && (d.Watchdog == nil || o.Verbose) {
			p("%s%s %s\n", ind, st.dim.Render("Fields:  "), fieldsText(d.Fields))
		}
		if w := d.Watchdog; w != nil {
			writeWatchdog(&b, w, ind, st, dot, o)
		}
		if d.RootCause || o.Verbose {
			if len(d.Checks) > 0 {
				p("%s%s ncclwiz check --only %s\n", ind, st.dim.Render("Check:   "), strings.Join(d.Checks, ","))
			}
			if len(d.Fixes) > 0 {
				p("%s%s %s  (preview: ncclwiz fix; apply: ncclwiz fix --apply ID)\n", ind, st.dim.Render("Fixes:   "), strings.Join(d.Fixes, ", "))
			}
		}
		if d.Guide != "" {
			p("%s%s ncclwiz guides %s\n", ind, st.dim.Render("Guide:   "), d.Guide)
		}
		if len(d.AlsoMatched) > 0 {
			p("%s%s %s\n", ind, st.dim.Render("Also:    "), strings.Join(d.AlsoMatched, ", "))
		}
		var advice []string
		for _, a := range d.Advice {
			if d.Watchdog == nil || !slices.Contains(d.Watchdog.Advice, a) {
				advice = append(advice, a)
			}
		}
		writeAdvice(&b, advice, ind, st, o)
		if d.RootCause && i < len(r.Diagnoses)-1 {
			p("\n")
		}
	}

	// A root outside NCCL already shows the first error.
	if e := r.FirstError; e != nil && !notNCCLRoot(r) {
		label := "First error (not NCCL)"
		if len(r.Diagnoses) > 0 {
			label = "First non-NCCL error"
		}
		p("\n%s %s\n", st.head.Render(label+":"), e.Words())
		p("  %s\n  %s\n", evHead(e.Evidence, dot), shorten(e.Text, o.Width-2, !o.CutLines))
		if e.Frame != "" {
			p("  %s %s\n", st.dim.Render("at"), shorten(e.Frame, o.Width-6, !o.CutLines))
		}
	}
	if t := r.TorchrunRootCause; t != nil && (t.Rank >= 0 || t.ExitCode != "") {
		p("\n%s rank %d", st.head.Render("torchrun's first observed failure:"), t.Rank)
		if t.Host != "" {
			p(" on %s", t.Host)
		}
		if t.ExitCode != "" {
			p(", exit code %s", t.ExitCode)
		}
		if t.Signal != "" {
			p(" (%s)", t.Signal)
		}
		p("\n")
	}
	if e := r.EarliestFailure; e != nil && len(r.Diagnoses) > 0 && !rootShows(r, e) && rootTimed(r) {
		p("%s %s at %s:%d [%s]\n", st.head.Render("Earliest timestamped failure:"), phrase.Or(e.Where(), "unknown rank"), e.File, e.Line, e.Signature)
	}

	if len(r.Notes) > 0 {
		p("\n%s\n", st.head.Render("Notes (not failures)"))
		for _, n := range r.Notes {
			p("%s %s  %s", bullet, n.Title, st.id.Render("["+n.ID+"]"))
			if n.Count > 1 {
				p("  ×%d", n.Count)
			}
			p("\n    %s\n", wrap(n.Text, o.Width-4, "    "))
			if o.Verbose {
				for _, ev := range n.Evidence {
					p("    %s\n      %s\n", evHead(ev, dot), shorten(ev.Text, o.Width-6, true))
				}
			}
		}
	}
	if d := r.Digest; d != nil {
		writeDigest(&b, d, st, dot, bullet, o)
	}
	if len(r.Warnings) > 0 {
		p("\n%s\n", st.head.Render("Reading the input"))
		for _, w := range r.Warnings {
			p("%s %s\n", bullet, w)
		}
	}
	p("\n%s %s\n", st.title.Render("Summary:"), wrap(r.Summary, o.Width-9, "  "))
	_, err := io.WriteString(w, strings.ReplaceAll(b.String(), "\n\n\n", "\n\n"))
	return err
}

func writeWatchdog(b *strings.Builder, w *explain.Watchdog, ind string, st plainStyles, dot string, o PlainOptions) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	var work []string
	if w.SeqNum >= 0 {
		work = append(work, fmt.Sprintf("SeqNum %d", w.SeqNum))
	}
	if w.OpType != "" {
		work = append(work, w.OpType)
	}
	if w.NumelIn >= 0 {
		if w.NumelIn == w.NumelOut {
			work = append(work, units.Count(w.NumelIn, "element"))
		} else {
			work = append(work, fmt.Sprintf("%s elements in, %s out", units.Digits(w.NumelIn), units.Digits(w.NumelOut)))
		}
	}
	if w.TimeoutMS > 0 {
		work = append(work, "timeout "+phrase.Millis(w.TimeoutMS))
	}
	if w.RanForMS > 0 {
		work = append(work, "ran for "+phrase.Millis(w.RanForMS))
	}
	p("%s%s %s\n", ind, st.dim.Render("Work:    "), strings.Join(work, dot))
	if len(w.Bytes) > 0 {
		var parts []string
		for _, d := range explain.DTypeSizes {
			parts = append(parts, fmt.Sprintf("%s as %s", phrase.Bytes(w.Bytes[d.Name]), d.Name))
		}
		p("%s%s %s\n", ind, st.dim.Render("Size:    "), strings.Join(parts, dot))
		p("%s%s %s (float32) to finish within the timeout\n", ind, st.dim.Render("Needed:  "), phrase.Rate(w.NeededBytesPerSec["float32"]))
	}
	verdict := strings.ToUpper(w.Verdict)
	if w.Verdict == "hang" {
		verdict = st.err.Render("HANG") + " (not slowness)"
	} else if w.Verdict == "too-slow" {
		verdict = st.warn.Render("TOO SLOW")
	}
	p("%s%s %s\n", ind, st.dim.Render("Verdict: "), verdict)
	for _, r := range w.Reasons {
		p("%s          - %s\n", ind, wrap(r, o.Width-len(ind)-12, ind+"            "))
	}
	var rk []string
	if len(w.TimedOutRanks) > 0 {
		rk = append(rk, "timed out: "+phrase.IntList(w.TimedOutRanks))
	}
	if len(w.Stragglers) > 0 {
		rk = append(rk, st.err.Render("behind: "+phrase.IntList(w.Stragglers)))
	}
	if len(w.SeqByRank) > 0 {
		keys := make([]int, 0, len(w.SeqByRank))
		for k := range w.SeqByRank {
			n, _ := strconv.Atoi(k)
			keys = append(keys, n)
		}
		sort.Ints(keys)
		var parts []string
		for i, k := range keys {
			if i == 8 && !o.Verbose {
				parts = append(parts, "…")
				break
			}
			s := w.SeqByRank[strconv.Itoa(k)]
			parts = append(parts, fmt.Sprintf("%d: enq %d/done %d", k, s.LastEnqueued, s.LastCompleted))
		}
		rk = append(rk, "queue "+strings.Join(parts, ", "))
	}
	if len(rk) > 0 {
		p("%s%s %s\n", ind, st.dim.Render("Ranks:   "), strings.Join(rk, dot))
	}
	writeAdvice(b, w.Advice, ind, st, o)
}

func writeAdvice(b *strings.Builder, advice []string, ind string, st plainStyles, o PlainOptions) {
	for i, a := range advice {
		label := "         "
		if i == 0 {
			label = "Next:    "
		}
		fmt.Fprintf(b, "%s%s - %s\n", ind, st.dim.Render(label), wrap(a, o.Width-len(ind)-12, ind+"            "))
	}
}

func writeDigest(b *strings.Builder, d *explain.Digest, st plainStyles, dot, bullet string, o PlainOptions) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n%s\n", st.head.Render("NCCL_DEBUG digest"))
	row := func(k, v string) { p("  %s %s\n", st.dim.Render(fmt.Sprintf("%-11s", k)), v) }
	if len(d.Versions) > 0 {
		var vs []string
		for _, v := range d.Versions {
			s := v.Version
			if len(d.Versions) > 1 && len(v.Where) > 0 {
				s += " (" + strings.Join(phrase.Limit(v.Where, 4), ", ") + ")"
			}
			vs = append(vs, s)
		}
		row("NCCL", strings.Join(vs, "; "))
	}
	if d.CUDADriver != "" {
		row("CUDA driver", d.CUDADriver)
	}
	if d.NRanks > 0 || d.Comms > 0 {
		var parts []string
		if d.NRanks > 0 {
			parts = append(parts, units.Count(d.NRanks, "rank"))
		}
		if d.NNodes > 0 {
			parts = append(parts, units.Count(d.NNodes, "node"), fmt.Sprintf("%d local", d.LocalRanks))
		}
		if d.Comms > 0 {
			parts = append(parts, units.Count(d.Comms, "communicator init"))
		}
		row("Ranks", strings.Join(parts, dot))
	}
	if d.Network != "" {
		row("Network", d.Network)
	}
	if len(d.Bootstrap) > 0 {
		row("Bootstrap", strings.Join(phrase.Limit(d.Bootstrap, 6), ", "))
	}
	if len(d.SocketIfs) > 0 {
		row("Sockets", strings.Join(phrase.Limit(d.SocketIfs, 6), ", "))
	}
	if len(d.IBDevices) > 0 {
		row("IB devices", strings.Join(phrase.Limit(d.IBDevices, 8), ", "))
	}
	if len(d.Transports) > 0 {
		var parts []string
		for _, c := range append(append([]string{}, explain.TransportClasses...), "other") {
			if n := d.Transports[c]; n > 0 {
				parts = append(parts, c+" "+units.Count(n, "link"))
			}
		}
		row("Transports", strings.Join(parts, dot))
		if o.Verbose || len(d.Peers) <= 16 {
			var pl []string
			for _, l := range d.Peers {
				pl = append(pl, fmt.Sprintf("%d→%d %s", l.From, l.To, strings.Join(l.Via, "+")))
			}
			if len(pl) > 0 {
				s := strings.Join(pl, ", ")
				if d.PeersCapped {
					s += ", …"
				}
				row("Peers", wrap(s, o.Width-14, "              "))
			}
		}
	}
	if len(d.Env) > 0 {
		var parts []string
		for _, k := range phrase.SortedKeys(d.Env) {
			parts = append(parts, k+"="+d.Env[k])
		}
		row("Env", strings.Join(parts, " "))
	}
	if len(d.CuMemFallback) > 0 {
		row("cuMem host", "fell back to /dev/shm on "+strings.Join(phrase.Limit(d.CuMemFallback, 8), ", "))
	}
	if d.ErrorOrigin != "" {
		row("Error from", d.ErrorOrigin)
	}
	for _, r := range d.Readings {
		p("  %s %s\n", bullet, wrap(r, o.Width-4, "    "))
	}
}

// rootShows reports whether the root cause's first evidence is e.
func rootShows(r *explain.Report, e *explain.Evidence) bool {
	for _, d := range r.Diagnoses {
		if d.RootCause && len(d.Evidence) > 0 {
			return d.Evidence[0].File == e.File && d.Evidence[0].Line == e.Line
		}
	}
	return false
}

// rootTimed reports whether the root cause's first line has a timestamp,
// so comparing it with the earliest timestamped line means something.
func rootTimed(r *explain.Report) bool {
	for _, d := range r.Diagnoses {
		if d.RootCause && len(d.Evidence) > 0 {
			return d.Evidence[0].Time != ""
		}
	}
	return false
}

func evHead(ev explain.Evidence, dot string) string {
	s := fmt.Sprintf("%s:%d", ev.File, ev.Line)
	var parts []string
	if ev.Rank >= 0 {
		parts = append(parts, fmt.Sprintf("rank %d", ev.Rank))
	}
	if ev.Host != "" {
		parts = append(parts, ev.Host)
	}
	if ev.Time != "" {
		parts = append(parts, ev.Time)
	}
	if ev.ViaLastError {
		parts = append(parts, "Last error payload")
	}
	if ev.Truncated {
		parts = append(parts, "line cut")
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, dot) + ")"
	}
	return s
}

func confWord(d explain.Diagnosis) string {
	s := "confidence " + d.Confidence
	if d.Inferred {
		s += ", inferred"
	}
	return s
}

func roleWord(d explain.Diagnosis) string {
	switch {
	case d.Inferred:
		return "possible cause:"
	case d.ConsequenceOf != "" && d.Role == explain.RoleWrapper:
		return "wrapper of " + d.ConsequenceOf + ":"
	case d.ConsequenceOf != "":
		return "consequence of " + d.ConsequenceOf + ":"
	case d.Role == explain.RoleConsequence:
		return "consequence:"
	case d.Role == explain.RoleWrapper:
		return "wrapper:"
	}
	return "cause:"
}

func fieldsText(f map[string]string) string {
	var parts []string
	for _, k := range phrase.SortedKeys(f) {
		v := f[k]
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && (strings.Contains(k, "bytes") || strings.HasSuffix(k, "size")) && n >= 1024 {
			v += " (" + phrase.Bytes(n) + ")"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, "  ")
}

// shorten cuts s to about n columns unless full is set.
func shorten(s string, n int, full bool) string {
	if full || n < 20 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// wrap breaks s at spaces to width, indenting continuation lines.
func wrap(s string, width int, indent string) string {
	return textwrap.String(s, max(width, 30), indent)
}

// notNCCLRoot reports whether the root cause is outside NCCL.
func notNCCLRoot(r *explain.Report) bool {
	for _, d := range r.Diagnoses {
		if d.RootCause {
			return d.NotNCCL
		}
	}
	return false
}
