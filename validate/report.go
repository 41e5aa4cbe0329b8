package validate

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// clean makes text from the machine safe for a terminal.
func clean(s string) string { return textsafe.Sanitize(s) }

// bwColumn renders the bandwidth verdict for the rung table.
func bwColumn(r RungResult) string {
	switch r.Bandwidth.State {
	case BWOK:
		return fmt.Sprintf("ok (>=%s)", trimFloat(round1(r.Bandwidth.Threshold)))
	case BWBelow:
		return fmt.Sprintf("below typical (>=%s)", trimFloat(round1(r.Bandwidth.Threshold)))
	case BWLow:
		return fmt.Sprintf("LOW (<%s)", trimFloat(round1(r.Bandwidth.Threshold)))
	case BWMissing:
		return "MISSING"
	case BWNotJudged:
		return "not judged"
	case BWNA:
		return "n/a"
	}
	return "-"
}

func statusColumn(s Status) string {
	if s == Fail {
		return "FAIL"
	}
	return string(s)
}

// WriteReport writes the plain-text report of a run: what ran, one line per
// rung, the reasons and notes, the A/B table, the ranges used with their
// sources, and the verdict. Every string from the machine is sanitised.
func WriteReport(w io.Writer, res *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Backend: %s — %s", res.Backend, clean(res.Launcher))
	var vers []string
	if res.Torch != "" {
		vers = append(vers, "torch "+clean(res.Torch))
	}
	if v := ncclVersionOf(res); v != "" {
		vers = append(vers, "NCCL "+clean(v))
	}
	if len(vers) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(vers, ", "))
	}
	fmt.Fprintf(&b, "\nGPUs: %d — %s\n\n", res.GPUs, clean(res.System))

	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNG\tRANKS\tRESULT\tTRANSPORTS\tBUSBW (LARGEST)\tBANDWIDTH\tENV")
	for _, r := range res.Rungs {
		ranks, bw, env := "-", "-", "-"
		if r.Status != Skipped {
			ranks = fmt.Sprint(r.Rung.Ranks)
			if r.HasLarge && r.Rung.Ranks > 1 {
				bw = fmt.Sprintf("%s @ %s", formatBW(r.LargeBusBW, true), FormatBytes(r.LargeBytes))
			}
		}
		if len(r.Rung.Env) > 0 {
			env = clean(strings.Join(r.Rung.Env, " "))
		}
		tr := "-"
		if r.Status != Skipped {
			tr = clean(transportList(r.Transports))
		}
		col := bwColumn(r)
		if r.Status == Skipped {
			col = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Rung.ID, ranks, statusColumn(r.Status), tr, bw, col, env)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	// A reason shared by every unjudged rung is said once.
	shared, n := "", 0
	for _, r := range res.Rungs {
		if r.Bandwidth.State == BWNotJudged {
			if n > 0 && r.Bandwidth.Detail != shared {
				shared = ""
				break
			}
			shared, n = r.Bandwidth.Detail, n+1
		}
	}
	if n < 2 {
		shared = ""
	}
	if shared != "" {
		fmt.Fprintf(&b, "\nBandwidth not judged: %s.\n", clean(shared))
	}
	for _, r := range res.Rungs {
		ownBW := r.Bandwidth.State == BWLow || (r.Bandwidth.State == BWNotJudged && shared == "")
		if len(r.Reasons) == 0 && len(r.Notes) == 0 && r.Diagnosis == nil && !ownBW {
			continue
		}
		fmt.Fprintf(&b, "\n%s (%s): %s\n", r.Rung.ID, clean(r.Rung.Title), statusColumn(r.Status))
		for _, s := range r.Reasons {
			fmt.Fprintf(&b, "  - %s\n", clean(s))
		}
		if r.Diagnosis != nil {
			fmt.Fprintf(&b, "  cause: %s — read `ncclwiz guides %s`\n", clean(r.Diagnosis.Title), clean(r.Diagnosis.Guide))
		}
		if ownBW && r.Bandwidth.State != BWLow { // a low bandwidth is already a reason
			fmt.Fprintf(&b, "  bandwidth not judged: %s\n", clean(r.Bandwidth.Detail))
		}
		for _, s := range r.Notes {
			fmt.Fprintf(&b, "  note: %s\n", clean(s))
		}
		if r.Status == Fail && len(r.LogTail) > 0 {
			tail := r.LogTail
			if len(tail) > 8 {
				tail = tail[len(tail)-8:]
			}
			b.WriteString("  last output:\n")
			for _, l := range tail {
				fmt.Fprintf(&b, "    | %s\n", clip(clean(l), 160))
			}
		}
		if r.LogFile != "" {
			fmt.Fprintf(&b, "  full log: %s\n", clean(r.LogFile))
		}
	}

	if res.AB != nil {
		b.WriteString("\n")
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
		b.Reset()
		if err := WriteABTable(w, res.AB); err != nil {
			return err
		}
	}

	seen := map[string]bool{}
	var exps []Expectation
	for _, r := range res.Rungs {
		if r.Expected != nil && !seen[r.Expected.ID] {
			seen[r.Expected.ID] = true
			exps = append(exps, *r.Expected)
		}
	}
	if len(exps) > 0 {
		b.WriteString("\nExpected all_reduce bus bandwidth (large messages):\n")
		for _, e := range exps {
			fmt.Fprintf(&b, "  - %s: typically %s; a rung passes at >= %s GB/s. Source: %s\n",
				e.System, e.Range(), trimFloat(round1(tolOf(res, e)*e.Low)), e.Source)
		}
	}
	if len(res.Notes) > 0 {
		b.WriteString("\nNotes:\n")
		for _, n := range res.Notes {
			fmt.Fprintf(&b, "  - %s\n", clean(n))
		}
	}
	mark := "PASS"
	if !res.Pass {
		mark = "FAIL"
	}
	fmt.Fprintf(&b, "\nVerdict: %s — %s\n", mark, clean(res.Verdict))
	_, err := io.WriteString(w, b.String())
	return err
}

// tolOf recovers the tolerance a rung was judged with.
func tolOf(res *Result, e Expectation) float64 {
	for _, r := range res.Rungs {
		if r.Expected != nil && r.Expected.ID == e.ID && e.Low > 0 && r.Bandwidth.Threshold > 0 {
			return r.Bandwidth.Threshold / e.Low
		}
	}
	return DefaultTolerance
}

func ncclVersionOf(res *Result) string {
	if res.NCCL != "" {
		return res.NCCL
	}
	for _, r := range res.Rungs {
		if r.NCCLVersion != "" {
			return r.NCCLVersion
		}
	}
	return ""
}

// WriteABTable writes the candidate rung beside its baseline.
func WriteABTable(w io.Writer, ab *ABComparison) error {
	if ab == nil {
		return nil
	}
	env := clean(strings.Join(ab.Env, " "))
	if _, err := fmt.Fprintf(w, "A/B: rung %q without and with %s\n", ab.Base, env); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  \twithout\twith %s\n", env)
	for _, r := range ab.Rows {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.Metric, clean(r.Without), clean(r.With))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "  %s\n", clean(ab.Verdict))
	return err
}

// WriteCannotRun says why no test can run and what to install or do.
func WriteCannotRun(w io.Writer, e *CannotRunError) error {
	var b strings.Builder
	b.WriteString("A collective test cannot run here:\n")
	for _, r := range e.Reasons {
		fmt.Fprintf(&b, "  - %s\n", clean(r))
	}
	if len(e.Hints) > 0 {
		b.WriteString("What to do:\n")
		for _, h := range e.Hints {
			fmt.Fprintf(&b, "  - %s\n", clean(h))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
