package hang

import (
	"fmt"
	"io"
	"sort"
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
	if r.Simulated != "" {
		fmt.Fprintf(&b, "SIMULATED — practice scenario %s: no real process was sampled and nothing real was asked.\n\n", textsafe.Clean(r.Simulated))
	}
	fmt.Fprintf(&b, "Job %d: %s\n", r.Job.ID, textsafe.Clean(r.Job.Command))
	fmt.Fprintf(&b, "  running for %s, %s on this machine", time.Duration(r.Job.AgeSeconds)*time.Second, units.Count(r.Job.LocalRanks, "rank"))
	if r.Job.WorldSize != "" {
		fmt.Fprintf(&b, " of WORLD_SIZE %s", textsafe.Clean(r.Job.WorldSize))
	}
	b.WriteString("\n")
	if r.Job.SlurmStep != "" {
		fmt.Fprintf(&b, "  Slurm step %s\n", textsafe.Clean(r.Job.SlurmStep))
	}
	if n := len(r.Job.LauncherPIDs); n > 1 {
		fmt.Fprintf(&b, "  %d launchers of this job run here (pids %s)\n", n, joinRanks(r.Job.LauncherPIDs))
	}
	if rt := r.Runtime; rt.Backend != "" || rt.Torch != "" {
		line := "  backend: " + map[string]string{"": "unknown", "nccl": "NCCL", "gloo": "gloo"}[rt.Backend]
		if rt.Torch != "" {
			line += ", torch " + textsafe.Clean(rt.Torch)
		}
		if rt.NCCL != "" {
			line += ", NCCL " + textsafe.Clean(rt.NCCL)
		}
		b.WriteString(line + " (" + rt.From + ")\n")
	}
	if r.Job.Orphaned != "" {
		para("! " + r.Job.Orphaned)
	}
	if r.Job.Unreadable != "" {
		para("! " + r.Job.Unreadable)
	}
	b.WriteString("\n")
	if len(r.Samples) > 0 {
		fmt.Fprintf(&b, "Ranks, watched for %s (%d reads of each main thread):\n", time.Duration(r.Interval*float64(time.Second)), reads)
	}
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	if len(r.Samples) > 0 {
		fmt.Fprintln(tw, "  RANK\tPID\tMAIN THREAD\tCPU (MAIN)\tTHREADS\tWCHAN\tWROTE\tGPU")
	}
	for _, s := range r.Samples {
		state := stateMix(s)
		if s.Gone {
			state = fmt.Sprintf("exited at +%.1fs", s.GoneAfter)
		}
		out := "?"
		if s.IOKnown {
			out = units.Bytes(s.MainWrote)
		}
		for _, o := range s.Outputs {
			if o.Grew && !o.Shared {
				out = fmt.Sprintf("%s, log +%s", out, units.Bytes(uint64(o.Bytes)))
				break
			}
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
		rank := fmt.Sprint(s.Rank)
		if s.RankFrom == "start order" {
			rank += "*"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%.0f%% (%.0f%%)\t%d/%d\t%s\t%s\t%s\n", rank, pid, state, s.CPUPct, s.MainCPUPct, s.RanThreads, s.Threads, textsafe.Clean(wchan), out, gpu)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range r.Samples {
		if s.RankFrom == "start order" {
			b.WriteString("  * rank by start order: the rank is an argument (torch.multiprocessing.spawn) or the environment is unreadable\n")
			break
		}
	}
	b.WriteString("\nNCCL RAS:\n")
	switch {
	case r.RAS == nil:
		b.WriteString("  not asked\n")
	case r.RAS.Skipped != "":
		para(r.RAS.Skipped)
	case r.RAS.Error != "":
		para(r.RAS.Error)
		if r.RAS.Namespace != "" {
			para("asked in network namespace " + textsafe.Clean(r.RAS.Namespace))
		}
	default:
		rep := r.RAS.Reply
		fmt.Fprintf(&b, "  %s answered (NCCL %s, %s): %d communicator(s), %d missing, %d dead, %d mismatch(es)\n",
			textsafe.Clean(r.RAS.Addr), textsafe.Clean(rep.NCCLVersion), rep.Format, rep.Comms, len(rep.Missing), len(rep.Dead), len(rep.Mismatches))
		if r.RAS.Namespace != "" {
			para("asked in network namespace " + textsafe.Clean(r.RAS.Namespace))
		}
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
		if fr.Note != "" {
			para(fr.Note)
		} else if len(fr.Dumps) == 0 {
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
	fmt.Fprintf(&b, "\nVerdict: %s", r.Verdict)
	if r.Confidence != "" {
		fmt.Fprintf(&b, " (%s confidence)", r.Confidence)
	}
	b.WriteString("\n")
	para(r.Summary)
	if len(r.Surer) > 0 {
		b.WriteString("\nSurer with:\n")
		for _, s := range r.Surer {
			para("- " + s)
		}
	}
	if len(r.NextSteps) > 0 {
		b.WriteString("\nNext:\n")
		for _, s := range r.NextSteps {
			para("- " + s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// stateMix is the main thread's states over the reads, most frequent
// first: "S 20/20", "R 14/20 S 6/20".
func stateMix(s RankSample) string {
	if s.Reads == 0 {
		return s.States[0] + "→" + s.States[1]
	}
	type kv struct {
		k string
		v int
	}
	var kvs []kv
	for k, v := range s.StateCounts {
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(a, b int) bool {
		if kvs[a].v != kvs[b].v {
			return kvs[a].v > kvs[b].v
		}
		return kvs[a].k < kvs[b].k
	})
	var parts []string
	for _, e := range kvs {
		parts = append(parts, fmt.Sprintf("%s %d/%d", e.k, e.v, s.Reads))
	}
	return strings.Join(parts, " ")
}
