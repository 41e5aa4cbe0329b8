package hang

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// WritePlain prints the report for people: the job, one line per rank,
// RAS, the flight recorder, the evidence and the verdict. raw adds RAS's
// reply as NCCL wrote it.
func WritePlain(w io.Writer, r *Report, raw bool, width int) error {
	if width <= 0 {
		width = 100
	}
	var b strings.Builder
	para := func(s string) { b.WriteString("  " + textwrap.String(s, width-4, "    ") + "\n") }
	fmt.Fprintf(&b, "Job %d: %s\n", r.Job.ID, textsafe.Clean(r.Job.Command))
	fmt.Fprintf(&b, "  running for %s, %s on this machine", time.Duration(r.Job.AgeSeconds)*time.Second, units.Count(r.Job.LocalRanks, "rank"))
	if r.Job.WorldSize != "" {
		fmt.Fprintf(&b, " of WORLD_SIZE %s", textsafe.Clean(r.Job.WorldSize))
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "Ranks, sampled twice %s apart:\n", time.Duration(r.Interval*float64(time.Second)))
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  RANK\tPID\tSTATE\tCPU\tTHREADS\tWCHAN\tOUTPUT\tGPU")
	for _, s := range r.Samples {
		state := s.States[0] + "→" + s.States[1]
		if s.Gone {
			state = "gone"
		}
		out := "-"
		for _, o := range s.Outputs {
			if o.Grew {
				out = fmt.Sprintf("+%dB", o.Bytes)
				break
			}
			out = "silent"
		}
		gpu := "-"
		if g := s.GPU; g != nil {
			gpu = fmt.Sprintf("%d: %d%% %dW %dMHz", g.Index, g.UtilPercent, g.PowerWatts, g.SMClockMHz)
		}
		pid := fmt.Sprint(s.PID)
		if s.NSPID != s.PID {
			pid += fmt.Sprintf(" (%d inside)", s.NSPID)
		}
		wchan := s.Wchan
		if wchan == "" {
			wchan = "-"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%.0f%%\t%d/%d\t%s\t%s\t%s\n", s.Rank, pid, state, s.CPUPct, s.RanThreads, s.Threads, textsafe.Clean(wchan), out, gpu)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\nNCCL RAS:\n")
	switch {
	case r.RAS == nil:
		b.WriteString("  not asked (--no-ras)\n")
	case r.RAS.Error != "":
		para(r.RAS.Error)
	default:
		rep := r.RAS.Reply
		fmt.Fprintf(&b, "  %s answered (NCCL %s, %s): %d communicator(s), %d missing, %d dead, %d mismatch(es)\n",
			textsafe.Clean(r.RAS.Addr), textsafe.Clean(rep.NCCLVersion), rep.Format, rep.Comms, len(rep.Missing), len(rep.Dead), len(rep.Mismatches))
		for _, e := range rep.Errors {
			para("error: " + textsafe.Clean(e))
		}
		if rep.Timeouts > 0 {
			para(fmt.Sprintf("RAS hit %d communication timeout(s) while gathering: some process did not answer in time", rep.Timeouts))
		}
	}
	if raw && r.RAS != nil && r.RAS.Raw != "" {
		b.WriteString("  --- raw reply ---\n")
		for _, l := range strings.Split(strings.TrimRight(textsafe.SanitizeMultiline(r.RAS.Raw), "\n"), "\n") {
			b.WriteString("  " + l + "\n")
		}
		b.WriteString("  ---\n")
	}
	b.WriteString("\nFlight recorder:\n")
	if fr := r.FlightRecorder; fr != nil {
		if len(fr.Dumps) == 0 {
			para(fmt.Sprintf("no dumps at %s<rank> (%s)", textsafe.Clean(fr.Prefix), fr.From))
			for _, h := range fr.HowTo {
				para("- " + h)
			}
		} else {
			fmt.Fprintf(&b, "  %d dump(s) at %s<rank> (version %s)\n", len(fr.Dumps), textsafe.Clean(fr.Prefix), textsafe.Clean(fr.Dumps[0].Version))
		}
		for _, s := range fr.Skipped {
			para("skipped " + textsafe.Clean(s))
		}
		for _, g := range fr.Groups {
			fmt.Fprintf(&b, "  process group %s (%s):\n", textsafe.Clean(g.Name), textsafe.Clean(g.Desc))
			for _, st := range g.Ranks {
				if !st.HasDump {
					fmt.Fprintf(&b, "    rank %d: no dump\n", st.Rank)
					continue
				}
				fmt.Fprintf(&b, "    rank %d: last enqueued #%d %s, last completed #%d\n", st.Rank, st.LastEnqueued, textsafe.Clean(st.LastOp), st.LastCompleted)
			}
			if d := g.First; d != nil {
				fmt.Fprintf(&b, "    first disagreement at #%d (%s):\n", d.Seq, d.Kind)
				for _, st := range g.Ranks {
					if sig, ok := d.ByRank[st.Rank]; ok {
						if sig == "" {
							sig = "(nothing)"
						}
						fmt.Fprintf(&b, "      rank %d: %s\n", st.Rank, textsafe.Clean(sig))
					}
				}
			}
			para("  " + g.Verdict)
		}
	}
	if k := r.Kernel; k != nil {
		b.WriteString("\nKernel log since the job started:\n")
		switch {
		case k.Note != "":
			para(k.Note)
		case len(k.Events) == 0:
			b.WriteString("  no Xid, OOM-killer or hung-task lines\n")
		}
		for _, e := range k.Events {
			para(fmt.Sprintf("%s %s: %s", e.Time.Format(time.RFC3339), e.Kind, textsafe.Clean(e.Text)))
		}
	}
	if len(r.Stacks) > 0 {
		b.WriteString("\nPython stacks (py-spy):\n")
		for _, st := range r.Stacks {
			fmt.Fprintf(&b, "  rank %d (pid %d):\n", st.Rank, st.PID)
			if st.Error != "" {
				para("  " + textsafe.Clean(st.Error))
				continue
			}
			for _, l := range strings.Split(strings.TrimRight(textsafe.SanitizeMultiline(st.Output), "\n"), "\n") {
				b.WriteString("    " + l + "\n")
			}
		}
	}
	b.WriteString("\nEvidence:\n")
	for _, e := range r.Evidence {
		mark := " "
		if e.Suspect {
			mark = "!"
		}
		who := fmt.Sprintf("rank %d", e.Rank)
		if e.Rank < 0 {
			who = "job"
		}
		para(fmt.Sprintf("%s %s [%s] %s", mark, who, e.Source, textsafe.Clean(e.Text)))
	}
	fmt.Fprintf(&b, "\nVerdict: %s\n", r.Verdict)
	para(r.Summary)
	if len(r.NextSteps) > 0 {
		b.WriteString("\nNext:\n")
		for _, s := range r.NextSteps {
			para("- " + s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
