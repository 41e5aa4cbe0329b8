package hang

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// Verdicts.
const (
	// VerdictNoHang: the job made progress during the sample (exit 0).
	VerdictNoHang = "no_hang"
	// VerdictEnded: every rank exited during the sample (exit 0).
	VerdictEnded = "ended"
	// VerdictSuspect: the job makes no progress and some rank stands out
	// (exit 1).
	VerdictSuspect = "suspect"
	// VerdictStuck: no progress, and every rank here waits the same way:
	// the cause is outside them (exit 1).
	VerdictStuck = "stuck"
	// VerdictBusy: every rank computes but none wrote anything: a step
	// longer than the sample, or ranks spinning in a collective (exit 0,
	// low confidence).
	VerdictBusy = "busy"
	// VerdictDumpsAgree: --dumps alone, and no rank is behind (exit 0).
	VerdictDumpsAgree = "dumps_agree"
	// VerdictNoDumps: --dumps alone found nothing to read (exit 2).
	VerdictNoDumps = "no_dumps"
)

// Confidence of a verdict.
const (
	High   = "high"
	Medium = "medium"
	Low    = "low"
)

// Evidence is one finding about one rank (or the job, Rank -1) from one source.
type Evidence struct {
	Rank int `json:"rank"`
	PID  int `json:"pid,omitempty"`
	// Source is "process", "job", "gpu", "ras", "flight_recorder" or "kernel".
	Source string `json:"source"`
	Text   string `json:"text"`
	// Suspect is true when this evidence points at the rank as the cause.
	Suspect bool `json:"suspect"`
}

// Facts are what the judgement knows about the job besides its samples.
type Facts struct {
	// Backend is "nccl", "gloo" or "" (unknown): which way waiting ranks
	// look (NCCL ranks may spin while they wait, gloo ranks sleep).
	Backend string
	// Orphaned says the launcher is gone (Job.Orphaned).
	Orphaned string
	// WorldSize from the environment (0: unknown); Local is the number of
	// ranks on this machine.
	WorldSize, Local int
	// Hidden says some rank's wait channel or I/O could not be read
	// (another user's process): the comparison sees less.
	Hidden bool
	// Interval is the sample's length, for the text.
	Interval string
	// SlurmJob is the ranks' SLURM_JOB_ID: srun reaches the job's other
	// nodes.
	SlurmJob string
}

// Judgement is the verdict drawn from the samples and the facts.
type Judgement struct {
	Verdict    string
	Suspects   []int
	Evidence   []Evidence
	Confidence string
	// Why is the verdict in one sentence: how it knows.
	Why string
	// Surer lists what would make the verdict surer.
	Surer []string
}

// progress says what a rank did that proves it alive: its own output grew,
// or its main thread wrote (a log line, a collective's sends). CPU alone
// is not progress: a rank can spin without getting anywhere.
func progress(s RankSample) string {
	var parts []string
	for _, o := range s.Outputs {
		if o.Grew && !o.Shared {
			parts = append(parts, fmt.Sprintf("wrote %s to its %s", units.Bytes(uint64(o.Bytes)), fdName(o.FD)))
		}
	}
	if s.IOKnown && s.MainWrote > 0 {
		parts = append(parts, fmt.Sprintf("its main thread wrote %s (log lines, a collective's sends)", units.Bytes(s.MainWrote)))
	}
	return strings.Join(parts, "; ")
}

// nearIdlePowerShare: a GPU at full utilisation drawing less than this
// share of its power limit runs an NCCL kernel that spins waiting for a
// peer; above it, kernels compute.
const nearIdlePowerShare = 0.35

// gpuState tells an NCCL kernel that spins waiting for a peer (full
// utilisation, little power) from kernels that compute.
func gpuState(g GPUUse) string {
	switch {
	case g.UtilPercent >= 90 && g.PowerLimitW > 0 && float64(g.PowerWatts) < nearIdlePowerShare*float64(g.PowerLimitW):
		return "gpu-waits"
	case g.UtilPercent >= 50:
		return "gpu-computes"
	}
	return "gpu-idle"
}

// gpuNote is what NVML said about the rank's GPU, for the evidence.
func gpuNote(s RankSample) string {
	g := s.GPU
	if g == nil {
		return ""
	}
	if g.UtilPercent >= 90 && g.PowerLimitW > 0 && float64(g.PowerWatts) < nearIdlePowerShare*float64(g.PowerLimitW) {
		return fmt.Sprintf("; GPU %d at %d%% utilisation but %d W of %d W: an NCCL kernel spinning while it waits for a peer", g.Index, g.UtilPercent, g.PowerWatts, g.PowerLimitW)
	}
	return fmt.Sprintf("; GPU %d: %d%% utilisation, %d W, SM clock %d MHz", g.Index, g.UtilPercent, g.PowerWatts, g.SMClockMHz)
}

// class is how a rank's main thread spent the sample.
func class(s RankSample) string {
	switch {
	case s.Gone:
		return "gone"
	case s.Stopped():
		return "stopped"
	case s.Reads > 0 && 2*s.StateCounts["D"] >= s.Reads:
		return "blocked"
	case s.Running():
		return "running"
	}
	return "sleeping"
}

// signature groups ranks that wait alike: the class, and for sleepers the
// wait channel of their main thread and whether it polls (wakes several
// times a second: a store host waiting for its clients, a barrier loop).
func signature(s RankSample) string {
	if c := class(s); c == "running" && s.GPU != nil {
		return c + ":" + gpuState(*s.GPU) // NCCL: spinning on a peer, or computing
	} else if c != "sleeping" {
		return c
	}
	if polls(s) {
		return "sleeping:" + s.Wchan + ":polls"
	}
	return "sleeping:" + s.Wchan
}

// polls: the main thread woke at least 5 times a second.
func polls(s RankSample) bool {
	return s.Wakeups >= 0 && s.interval > 0 && float64(s.Wakeups) >= 5*s.interval.Seconds()
}

func describe(s RankSample) string {
	switch class(s) {
	case "running":
		return fmt.Sprintf("its main thread runs (R in %d of %d reads, %.0f%% CPU)", s.StateCounts["R"], s.Reads, s.MainCPUPct)
	case "stopped":
		return "it is stopped (state T: SIGSTOP, Ctrl-Z or a debugger)"
	case "blocked":
		return fmt.Sprintf("its main thread is in uninterruptible sleep (D in %d of %d reads): %s", s.StateCounts["D"], s.Reads, procs.KernelWait(s.Wchan))
	case "gone":
		return "it exited"
	}
	how := ""
	if s.Wakeups >= 0 {
		how = fmt.Sprintf(", woken %d times", s.Wakeups)
	}
	if s.Wchan == "" {
		return fmt.Sprintf("its main thread sleeps (S in %d of %d reads%s; wait channel not readable)", s.StateCounts["S"], s.Reads, how)
	}
	return fmt.Sprintf("its main thread sleeps in %s (%d of %d reads%s)", s.Wchan, s.WchanCounts[s.Wchan], s.Reads, how)
}

// waiting is how a rank that waits in a collective looks with this
// backend: gloo (and CPU jobs) sleep on a futex while the transport's
// threads poll; NCCL ranks may spin in a stream synchronisation or sleep.
func waiting(backend, sig string) bool {
	if strings.HasPrefix(sig, "sleeping:") && strings.Contains(sig, "futex") {
		return true
	}
	return backend == "nccl" && (sig == "running" || sig == "running:gpu-waits")
}

// Judge compares the ranks with each other. Progress is proof of life: a
// rank whose output grew or whose main thread wrote is working, and a job
// where every rank did is not hung whatever its CPU says. Without
// progress, the rank that differs from the others — in whichever
// direction: asleep among spinners or spinning among sleepers, another
// wait channel, stopped, blocked in the kernel, gone — is the suspect.
func Judge(ss []RankSample, f Facts) Judgement {
	var jd Judgement
	add := func(s RankSample, suspect bool, format string, args ...any) {
		jd.Evidence = append(jd.Evidence, Evidence{Rank: s.Rank, PID: s.PID, Source: "process", Text: fmt.Sprintf(format, args...), Suspect: suspect})
	}
	job := func(format string, args ...any) {
		jd.Evidence = append(jd.Evidence, Evidence{Rank: -1, Source: "job", Text: fmt.Sprintf(format, args...)})
	}
	var live, gone, progressed, absolute []RankSample
	for _, s := range ss {
		switch class(s) {
		case "gone":
			gone = append(gone, s)
			continue
		case "stopped", "blocked":
			absolute = append(absolute, s)
		}
		live = append(live, s)
		if progress(s) != "" {
			progressed = append(progressed, s)
		}
	}
	if f.Orphaned != "" {
		job("%s", f.Orphaned)
	}
	f.Local = len(ss)
	if f.WorldSize > len(ss) && len(ss) > 0 {
		job("WORLD_SIZE is %d and %s here: the others run on other machines, or never started", f.WorldSize, plural(len(ss), "rank runs", "ranks run"))
	}
	suspect := map[int]bool{}
	switch {
	case len(ss) == 0:
		jd.Verdict, jd.Confidence = VerdictStuck, Low
		jd.Why = "no rank runs here"
	case len(live) == 0:
		jd.Verdict, jd.Confidence = VerdictEnded, High
		for _, s := range ss {
			add(s, false, "exited %.1f s into the sample", s.GoneAfter)
		}
		jd.Why = "every rank here exited during the sample (its log says whether it succeeded)"
	case len(progressed) > 0 && len(absolute) == 0:
		jd.Verdict = VerdictNoHang
		for _, s := range progressed {
			add(s, false, "progressed: %s", progress(s))
		}
		quiet := 0
		for _, s := range live {
			if progress(s) == "" {
				quiet++
				add(s, false, "wrote nothing during the sample; %s%s — a collective the others completed needed it too", describe(s), gpuNote(s))
			}
		}
		for _, s := range gone {
			add(s, false, "exited %.1f s into the sample while the others kept working", s.GoneAfter)
		}
		switch {
		case quiet == 0 && len(gone) == 0:
			jd.Confidence = High
			jd.Why = "every rank progressed during the sample (its output grew or its main thread wrote)"
		default:
			jd.Confidence = Medium
			jd.Why = fmt.Sprintf("%s progressed during the sample; the job's collectives complete, so the quiet ones take part", units.Count(len(progressed), "rank"))
		}
	default:
		for _, s := range gone {
			suspect[s.Rank] = true
			add(s, true, "exited %.1f s into the sample while the others still run and make no progress", s.GoneAfter)
		}
		for _, s := range absolute {
			suspect[s.Rank] = true
			add(s, true, "%s — a rank that cannot run blocks every collective", describe(s))
		}
		for _, s := range absent(live) {
			if !suspect[s.Rank] {
				suspect[s.Rank] = true
				add(s, true, "it has no connection to the job's store while the other ranks have: it never reached the rendezvous (init_process_group); %s", describe(s))
			}
		}
		majority, how := oddOneOut(live, f.Backend)
		var sleepers []RankSample
		for _, s := range live {
			if suspect[s.Rank] {
				continue
			}
			if p := progress(s); p != "" {
				add(s, false, "progressed: %s", p) // a rank that progressed is never the suspect
				continue
			}
			sig := signature(s)
			if majority != "" && sig != majority && hostWaits(s) {
				add(s, false, "made no progress: %s — it hosts the job's store, so it waits differently from the others", describe(s))
				sleepers = append(sleepers, s)
				continue
			}
			if majority != "" && sig != majority {
				suspect[s.Rank] = true
				add(s, true, "%s, while %s: it is not where the others wait%s%s", describe(s), others(live, majority), how, gpuNote(s))
				continue
			}
			add(s, false, "made no progress: %s%s%s", describe(s), spinNote(s), gpuNote(s))
			sleepers = append(sleepers, s)
		}
		switch {
		case len(suspect) > 0:
			jd.Verdict = VerdictSuspect
			jd.Confidence = High
			if how != "" || f.Hidden {
				jd.Confidence = Medium
			}
			jd.Why = "no rank made progress during the sample"
			for _, e := range jd.Evidence {
				if e.Suspect {
					jd.Why += fmt.Sprintf("; rank %d: %s", e.Rank, e.Text)
					break
				}
			}
		case len(sleepers) > 0 && !allRunning(sleepers):
			jd.Verdict = VerdictStuck
			jd.Confidence = Medium
			if f.Hidden {
				jd.Confidence = Low
			}
			w := sleepers[0]
			for _, s := range sleepers {
				if !hostWaits(s) {
					w = s
					break
				}
			}
			jd.Why = fmt.Sprintf("no rank made progress during the sample and every rank here waits the same way (%s): what they wait for is outside them", strings.TrimPrefix(describe(w), "its main thread "))
		default:
			jd.Verdict, jd.Confidence = VerdictBusy, Low
			jd.Why = "every rank computes (its main thread runs) but none wrote anything during the sample: a step longer than the sample, or every rank spinning in a collective that waits for a rank elsewhere"
		}
	}
	for r := range suspect {
		jd.Suspects = append(jd.Suspects, r)
	}
	sort.Ints(jd.Suspects)
	jd.Surer = surer(jd, f)
	return jd
}

// oddOneOut returns the signature most ranks share, or "" when none does.
// A tie is broken by how a waiting rank looks with this backend; how then
// says so.
func oddOneOut(live []RankSample, backend string) (majority, how string) {
	groups := map[string]int{}
	for _, s := range live {
		if c := class(s); c != "stopped" && c != "blocked" && progress(s) == "" {
			groups[signature(s)]++
		}
	}
	if len(groups) < 2 {
		return "", ""
	}
	best := 0
	for _, n := range groups {
		best = max(best, n)
	}
	var top []string
	for sig, n := range groups {
		if n == best {
			top = append(top, sig)
		}
	}
	if len(top) == 1 {
		return top[0], ""
	}
	var wait []string
	for _, sig := range top {
		if waiting(backend, sig) {
			wait = append(wait, sig)
		}
	}
	if len(wait) == 1 {
		b := backend
		if b == "" {
			b = "this (CPU)"
		}
		return wait[0], fmt.Sprintf(" (as many ranks wait each way; with the %s backend a rank waiting in a collective looks like the others)", b)
	}
	return "", ""
}

// hostWaits: the rank hosts the job's store (rank 0 under mp.spawn, mpirun
// and custom launchers) and polls it: while the others block in the
// store's client, the host's main thread waits by polling, which looks
// different by role. A store host that sleeps without waking is judged
// like any rank.
func hostWaits(s RankSample) bool {
	return s.StoreHost && class(s) == "sleeping" && polls(s)
}

// absent returns the ranks without any connection to the job's store
// while others have one: they never reached init_process_group. Only when
// every rank's sockets could be read.
func absent(live []RankSample) []RankSample {
	var none []RankSample
	some := false
	for _, s := range live {
		if !s.StoreKnown {
			return nil
		}
		if s.StoreConns > 0 || s.StoreHost {
			some = true
		} else {
			none = append(none, s)
		}
	}
	if !some {
		return nil
	}
	return none
}

func others(live []RankSample, sig string) string {
	var rs []int
	var s0 RankSample
	for _, s := range live {
		if signature(s) == sig {
			rs = append(rs, s.Rank)
			s0 = s
		}
	}
	who := "rank " + joinRanks(rs)
	if len(rs) > 1 {
		who = "ranks " + joinRanks(rs)
	}
	switch class(s0) {
	case "running":
		return who + " run (spin or compute)"
	}
	if s0.Wchan == "" {
		return who + " sleep"
	}
	return who + " wait in " + s0.Wchan
}

func allRunning(ss []RankSample) bool {
	for _, s := range ss {
		if class(s) != "running" {
			return false
		}
	}
	return true
}

// spinNote names background threads that burn CPU without the rank
// getting anywhere (a store thread polling a closed socket).
func spinNote(s RankSample) string {
	if len(s.Busy) == 0 {
		return ""
	}
	t := s.Busy[0]
	note := fmt.Sprintf("; a background thread (tid %d", t.TID)
	if t.Name != "" {
		note += " " + t.Name
	}
	note += fmt.Sprintf(") uses %.0f%% CPU, which is not progress", t.CPUPct)
	for _, c := range s.StoreSockets {
		if strings.Contains(c, "CLOSE-WAIT") {
			note += ": its connection to the store is closed at the other end (" + c + ")"
			break
		}
	}
	return note
}

// surer lists what would make the verdict surer.
func surer(jd Judgement, f Facts) []string {
	if jd.Confidence == High && (jd.Verdict == VerdictNoHang || jd.Verdict == VerdictEnded) {
		return nil
	}
	var out []string
	if jd.Verdict != VerdictEnded {
		iv := f.Interval
		if iv == "" {
			iv = DefaultInterval.String()
		}
		out = append(out, fmt.Sprintf("a longer --interval (this sample was %s): a step longer than the sample looks like no progress", iv))
	}
	if f.Hidden {
		out = append(out, "run as root or as the job's user: another user's wait channels and I/O are hidden")
	}
	if jd.Verdict == VerdictSuspect || jd.Verdict == VerdictStuck || jd.Verdict == VerdictBusy {
		out = append(out, "the Python stacks: `ncclwiz hang --py-spy` (asks first; py-spy attaches with ptrace) shows where each suspect waits")
		switch f.Backend {
		case "nccl":
			out = append(out, "NCCL's RAS (NCCL ≥ 2.24) and PyTorch's flight recorder (torch ≥ 2.2) name the rank that is behind across all nodes")
		case "gloo":
			out = append(out, "TORCH_DISTRIBUTED_DEBUG=DETAIL (PyTorch) on the next run makes gloo ranks that call different collectives fail with both calls named")
		}
	}
	if f.WorldSize > f.Local && jd.Verdict != VerdictNoHang && jd.Verdict != VerdictEnded {
		if f.SlurmJob != "" {
			out = append(out, fmt.Sprintf("`ncclwiz hang` on the job's other nodes: `srun --jobid %s --overlap --ntasks-per-node 1 ncclwiz hang` runs it beside the ranks on each", f.SlurmJob))
		} else {
			out = append(out, "`ncclwiz hang` on the job's other machines, if it has any")
		}
	}
	return out
}

func fdName(fd int) string {
	if fd == 2 {
		return "stderr"
	}
	return "stdout"
}

// Suspects returns the ranks named by suspect evidence, by rank.
func Suspects(ev []Evidence) []int {
	seen := map[int]bool{}
	var out []int
	for _, e := range ev {
		if e.Suspect && !seen[e.Rank] {
			seen[e.Rank] = true
			out = append(out, e.Rank)
		}
	}
	sort.Ints(out)
	return out
}

func joinRanks(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, ", ")
}
