package hang

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/hang/flightrec"
	"github.com/ncclwiz/ncclwiz/hang/ras"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/procnet"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// Schema is the version of the JSON report (docs/hang.schema.json).
const Schema = 2

// Options of an inspection.
type Options struct {
	Interval time.Duration
	// RASAddr overrides the job's NCCL_RAS_ADDR; NoRAS skips RAS.
	RASAddr    string
	NoRAS      bool
	RASText    bool
	RASTimeout time.Duration
	// DumpPrefix overrides the job's dump prefix (e.g. a directory where
	// the dumps of every node were copied, plus the file prefix).
	DumpPrefix string
	// Unreadable are the processes of the table whose environment could
	// not be read (Unreadable), for the report.
	Unreadable []proctab.Process
}

// JobInfo describes the job inspected.
type JobInfo struct {
	ID          int `json:"id"`
	LauncherPID int `json:"launcher_pid,omitempty"`
	// LauncherPIDs are every launcher of the job here (two torchrun
	// launchers of one job, say).
	LauncherPIDs []int   `json:"launcher_pids"`
	Command      string  `json:"command"`
	AgeSeconds   float64 `json:"age_seconds"`
	WorldSize    string  `json:"world_size,omitempty"`
	LocalRanks   int     `json:"local_ranks"`
	PIDNS        string  `json:"pid_namespace,omitempty"`
	// SlurmStep is the ranks' Slurm "JOBID.STEPID" (their launcher is
	// that step's slurmstepd).
	SlurmStep string `json:"slurm_step,omitempty"`
	// Orphaned says the launcher is gone, and how that is known.
	Orphaned string `json:"orphaned,omitempty"`
	// Unreadable names the processes whose environment could not be read.
	Unreadable      string `json:"unreadable,omitempty"`
	UnreadableCount int    `json:"unreadable_count"`
}

// RASResult is what the job's RAS port said, or why it was not asked.
type RASResult struct {
	Addr string `json:"addr,omitempty"`
	// Namespace is the network namespace the port was asked in.
	Namespace string     `json:"namespace,omitempty"`
	Skipped   string     `json:"skipped,omitempty"`
	Error     string     `json:"error,omitempty"`
	Reply     *ras.Reply `json:"reply,omitempty"`
	Raw       string     `json:"raw,omitempty"`
}

// FRResult is what the flight-recorder dumps said.
type FRResult struct {
	Prefix  string                  `json:"prefix"`
	From    string                  `json:"prefix_from"`
	Dumps   []DumpInfo              `json:"dumps"`
	Skipped []string                `json:"skipped,omitempty"`
	Groups  []flightrec.GroupReport `json:"groups,omitempty"`
	// HowTo says how to get dumps next time when there are none.
	HowTo []string `json:"how_to,omitempty"`
	// Note says why no dump is expected (a gloo job, an older torch).
	Note string `json:"note,omitempty"`
}

// KernelResult is what the kernel log said since the job started.
type KernelResult struct {
	Events []KernelEvent `json:"events"`
	Note   string        `json:"note,omitempty"`
}

// DumpInfo names one dump read.
type DumpInfo struct {
	Rank    int    `json:"rank"`
	Path    string `json:"path"`
	Version string `json:"version"`
	Entries int    `json:"entries"`
}

// Report is the result of `ncclwiz hang`.
type Report struct {
	Schema int `json:"schema"`
	// Simulated names the practice scenario the report is about; nothing
	// real was sampled or asked.
	Simulated string       `json:"simulated,omitempty"`
	Job       JobInfo      `json:"job"`
	Runtime   Runtime      `json:"runtime"`
	Interval  float64      `json:"interval_seconds"`
	Samples   []RankSample `json:"ranks"`
	RAS       *RASResult   `json:"ras,omitempty"`
	// FlightRecorder, Kernel: see their types.
	FlightRecorder *FRResult     `json:"flight_recorder,omitempty"`
	Kernel         *KernelResult `json:"kernel,omitempty"`
	// Stacks are py-spy's answers for the suspects (--py-spy, with consent).
	Stacks   []Stack    `json:"stacks,omitempty"`
	Evidence []Evidence `json:"evidence"`
	Suspects []int      `json:"suspects"`
	// Verdict is "no_hang", "ended", "busy", "suspect" or "stuck".
	Verdict string `json:"verdict"`
	// Confidence is "high", "medium" or "low"; Surer says what would make
	// the verdict surer.
	Confidence string   `json:"confidence"`
	Surer      []string `json:"surer"`
	Summary    string   `json:"summary"`
	NextSteps  []string `json:"next_steps"`
	ExitCode   int      `json:"exit_code"`
}

// Inspect watches the job's ranks, asks RAS (in the job's network
// namespace), reads the dumps and the kernel log, and judges.
func Inspect(ctx context.Context, h *host.Host, j Job, o Options) (*Report, error) {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	r := &Report{Schema: Schema, Interval: o.Interval.Seconds()}
	if h.Simulated {
		r.Simulated = h.Name
	}
	r.Job = JobInfo{ID: j.ID(), Command: j.Command(), AgeSeconds: j.Age.Round(time.Second).Seconds(),
		WorldSize: j.WorldSize(), LocalRanks: len(j.Ranks), Orphaned: j.Orphaned, LauncherPIDs: []int{}, SlurmStep: j.SlurmStep(),
		Unreadable: UnreadableNote(o.Unreadable, h.IsRoot()), UnreadableCount: len(o.Unreadable)}
	if len(j.Ranks) > 0 {
		r.Job.PIDNS = j.Ranks[0].PIDNS
	}
	if j.Launcher != nil {
		r.Job.LauncherPID = j.Launcher.PID
	}
	for _, l := range j.Launchers {
		r.Job.LauncherPIDs = append(r.Job.LauncherPIDs, l.PID)
	}
	r.Runtime = readRuntime(h, j)
	if len(j.Ranks) == 0 {
		r.noRanks(ctx, h, j)
		r.fill()
		return r, nil
	}
	// RAS runs while the ranks are sampled: both take seconds.
	rasDone := make(chan *RASResult, 1)
	go func() { rasDone <- askRAS(ctx, h, j, r.Runtime, o) }()
	ss, err := Sample(ctx, h, j, o.Interval)
	if err != nil {
		return nil, err
	}
	settleExits(ctx, h, j, ss, o.Interval)
	r.Samples = ss
	storeGone := storeSockets(h, j, ss)
	hidden := false
	for _, s := range ss {
		hidden = hidden || (!s.Gone && (!s.IOKnown || (s.Wchan == "" && !s.Running() && !s.Stopped())))
	}
	ws, _ := strconv.Atoi(r.Job.WorldSize)
	orphan := j.Orphaned
	if storeGone != "" {
		orphan = strings.TrimPrefix(strings.Join([]string{orphan, storeGone}, "; "), "; ")
	}
	jd := Judge(ss, Facts{Backend: r.Runtime.Backend, Orphaned: orphan, WorldSize: ws, Hidden: hidden, Interval: o.Interval.String(), SlurmJob: textsafe.Clean(j.SlurmJobID())})
	ev := jd.Evidence
	if r.Job.Unreadable != "" {
		ev = append(ev, Evidence{Rank: -1, Source: "job", Text: r.Job.Unreadable})
	}
	r.RAS = <-rasDone
	ev = append(ev, rasEvidence(r.RAS, ss)...)
	r.FlightRecorder = findDumps(ctx, h, j, r.Runtime, o)
	ev = append(ev, frEvidence(r.FlightRecorder)...)
	r.Kernel = &KernelResult{Events: []KernelEvent{}}
	if h.Simulated {
		r.Kernel.Note = "a practice scenario has no kernel log"
	} else if evs, note := KernelEvents(ctx, h, h.Now().Add(-j.Age)); note != "" {
		r.Kernel.Note = note
	} else if evs != nil {
		r.Kernel.Events = evs
	}
	ev = append(ev, kernelEvidence(r.Kernel.Events, ss)...)
	r.Evidence = ev
	r.Verdict, r.Confidence, r.Surer = jd.Verdict, jd.Confidence, jd.Surer
	r.Suspects = Suspects(ev)
	if len(r.Suspects) > 0 && (r.Verdict == VerdictStuck || r.Verdict == VerdictBusy) {
		r.Verdict = VerdictSuspect // RAS, the dumps or the kernel log name one
	}
	r.conclude(h, j, jd.Why)
	r.fill()
	return r, nil
}

// settleExits: when some ranks exited during the sample and the others
// still run, watch the others up to one more interval — ranks of a job
// that ends leave within moments of each other, and a job that ends is
// not a hang.
func settleExits(ctx context.Context, h *host.Host, j Job, ss []RankSample, interval time.Duration) {
	anyGone, anyLive := false, false
	for _, s := range ss {
		anyGone, anyLive = anyGone || s.Gone, anyLive || !s.Gone
	}
	if !anyGone || !anyLive {
		return
	}
	start := time.Now()
	for time.Since(start) < interval && ctx.Err() == nil {
		live := 0
		for i, r := range j.Ranks {
			if ss[i].Gone {
				continue
			}
			p, err := proctab.ReadStat(h, r.PID)
			if err != nil || p.StartTicks != r.StartTicks || p.Exited() {
				ss[i].Gone, ss[i].GoneAfter = true, interval.Seconds()+time.Since(start).Seconds()
				continue
			}
			live++
		}
		if live == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// noRanks judges a launcher that has started no rank.
func (r *Report) noRanks(ctx context.Context, h *host.Host, j Job) {
	r.Samples = []RankSample{}
	r.RAS = &RASResult{Skipped: "not asked: no rank runs yet"}
	l := j.Launchers[0]
	p, err := proctab.ReadStat(h, l.PID)
	if err != nil || p.StartTicks != l.StartTicks || p.Exited() {
		r.Verdict, r.Confidence = VerdictEnded, High
		r.Summary = fmt.Sprintf("The launcher (pid %d) exited before starting any rank.", l.PID)
		return
	}
	r.Verdict, r.Confidence, r.ExitCode = VerdictStuck, Medium, 1
	r.Evidence = []Evidence{{Rank: -1, PID: l.PID, Source: "job", Text: fmt.Sprintf("%s (pid %d) has run for %s and started no rank", l.Comm, l.PID, j.Age.Round(time.Second))}}
	r.Summary = fmt.Sprintf("The launcher (pid %d) runs but has started no rank: it waits in the rendezvous — for the other nodes its --nnodes asks for, or for a rendezvous endpoint that does not answer. Run `ncclwiz hang` on the other nodes, and check the endpoint with `ncclwiz check --only net.rendezvous`.", l.PID)
	r.Surer = []string{"the launcher's log: torchrun prints the rendezvous it waits for"}
	r.NextSteps = []string{"The guide: `ncclwiz guides hang`."}
}

// askRAS asks the job's RAS port, inside the job's network namespace, when
// the job can have one: NCCL loaded, NCCL ≥ 2.24 (or its version unknown),
// or an address the user or the job gave.
func askRAS(ctx context.Context, h *host.Host, j Job, rt Runtime, o Options) *RASResult {
	addr := o.RASAddr
	if addr == "" {
		addr = ras.Addr(j.Env("NCCL_RAS_ADDR"))
	}
	explicit := o.RASAddr != "" || j.Env("NCCL_RAS_ADDR") != ""
	res := &RASResult{Addr: addr}
	switch {
	case h.Simulated:
		res.Skipped = "not asked: a practice scenario has no RAS port (the real machine's is never asked)"
		return res
	case o.NoRAS:
		res.Skipped = "not asked (--no-ras)"
		return res
	case !explicit && rt.Backend == "gloo":
		res.Skipped = "not asked: no rank has NCCL loaded — the job's collectives go through gloo, and RAS is NCCL's (2.24 and later)"
		return res
	case !explicit && rt.NCCL != "" && rt.NCCL != "loaded" && older(rt.NCCL, "2.24"):
		res.Skipped = fmt.Sprintf("not asked: the ranks load NCCL %s, and RAS arrived in NCCL 2.24", rt.NCCL)
		return res
	}
	ro := ras.Options{Timeout: o.RASTimeout, Text: o.RASText}
	pid := j.Ranks[0].PID
	ours, err1 := h.Readlink("/proc/self/ns/net")
	theirs, err2 := h.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	switch {
	case err2 != nil:
		// Another user's rank: its ns/net link is hidden, but whether it
		// shares ncclwiz's namespace shows in files anyone may read.
		switch same, known := procnet.SameNamespace(h, pid); {
		case known && same:
			res.Namespace = "ncclwiz's own, which the job shares (the same kernel netlink sockets)"
		case known:
			// Its localhost is not ours: asking ours would ask another
			// program, or nothing, and pass for the job's answer.
			res.Namespace = "the job's, another network namespace than ncclwiz's (its link could not be read)"
			res.Error = enterNote(h, pid, addr, "its /proc/"+strconv.Itoa(pid)+"/ns/net cannot be read and setns needs root (CAP_SYS_ADMIN)")
			return res
		default:
			res.Namespace = "ncclwiz's own — the job's could not be read, so it may be another (run as root to be sure)"
		}
	case err1 == nil && ours == theirs:
		res.Namespace = theirs + " (the job's, which ncclwiz shares)"
	case h.Root != "" && h.Root != "/":
		res.Namespace = theirs + " (a fixture: asked from ncclwiz's own)"
	default:
		res.Namespace = fmt.Sprintf("%s (the job's, entered through pid %d)", theirs, pid)
		ro.Dial = dialIn("/proc/" + strconv.Itoa(pid) + "/ns/net")
	}
	rep, err := ras.Query(ctx, addr, ro)
	if rep != nil {
		res.Raw = rep.Raw
	}
	switch {
	case err != nil && errors.Is(err, unix.EPERM) && ro.Dial != nil:
		res.Error = enterNote(h, pid, addr, theirs+": setns needs root (CAP_SYS_ADMIN)")
	case errors.Is(err, ras.ErrClosed):
		res.Error = fmt.Sprintf("nothing listens on %s: RAS is off (NCCL_RAS_ENABLE=0), the job's NCCL is older than 2.24 (RAS arrived in 2.24), NCCL_RAS_ADDR points elsewhere, or NCCL is not initialised yet", addr)
	case errors.Is(err, ras.ErrNotRAS):
		res.Error = fmt.Sprintf("%s is open but does not answer like NCCL's RAS service (%v); another program may use that port — set NCCL_RAS_ADDR for the job, or pass --ras-addr", addr, err)
	case err != nil:
		res.Error = err.Error()
	default:
		res.Reply = rep
	}
	return res
}

// enterNote says that RAS was not asked because the job's network
// namespace, which ncclwiz cannot enter (why), is not ncclwiz's own, and
// how to ask it as root. The namespace may be a container's or not, and
// sudo's secure_path leaves out ~/.local/bin (pipx) and ~/go/bin.
func enterNote(h *host.Host, pid int, addr, why string) string {
	return fmt.Sprintf("not asked: the job runs in another network namespace (a container's, or one made with unshare or ip netns), whose localhost is not ncclwiz's, and ncclwiz cannot enter it as this user (%s); %s. As root, ask it from inside: `sudo nsenter -t %d -n \"$(command -v ncclwiz)\" hang --pid %d` (sudo's PATH may lack the directory ncclwiz is in)", why, listenNote(h, pid, addr), pid, pid)
}

// listenNote says, from /proc/PID/net/tcp (readable by anyone), whether
// something listens on addr's port in the rank's network namespace.
func listenNote(h *host.Host, pid int, addr string) string {
	_, p, err := net.SplitHostPort(addr)
	port, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		return "its sockets were not read"
	}
	all, err := procnet.TCP(h, pid)
	if err != nil {
		return "its sockets could not be read"
	}
	for _, s := range all {
		if s.State == "LISTEN" && int(s.Local.Port()) == port {
			return fmt.Sprintf("something listens on port %d there (/proc/%d/net/tcp)", port, pid)
		}
	}
	return fmt.Sprintf("nothing listens on port %d there (/proc/%d/net/tcp)", port, pid)
}

// rankByPID maps a PID as RAS reports it (getpid() inside the rank's
// namespace) to the global rank, for ranks on this machine.
func rankByPID(ss []RankSample) map[int]int {
	m := map[int]int{}
	for _, s := range ss {
		m[s.NSPID] = s.Rank
		m[s.PID] = s.Rank
	}
	return m
}

func rasEvidence(res *RASResult, ss []RankSample) []Evidence {
	if res == nil || res.Reply == nil {
		return nil
	}
	byPID := rankByPID(ss)
	rankOf := func(pid, commRank int) (int, string) {
		if g, ok := byPID[pid]; ok && pid > 0 {
			return g, ""
		}
		return commRank, " (its rank in that communicator; the process is not on this machine)"
	}
	var ev []Evidence
	rep := res.Reply
	for _, p := range rep.Dead {
		rank, note := rankOf(p.PID, p.Rank)
		ev = append(ev, Evidence{Rank: rank, PID: p.PID, Source: "ras", Suspect: true,
			Text: fmt.Sprintf("RAS considers process %d on %s dead (unreachable)%s", p.PID, textsafe.Clean(p.Node), note)})
	}
	for _, p := range rep.Missing {
		if p.Dead || p.Rank < 0 {
			continue
		}
		rank, note := rankOf(p.PID, p.Rank)
		ev = append(ev, Evidence{Rank: rank, PID: p.PID, Source: "ras", Suspect: true,
			Text: fmt.Sprintf("RAS got no data from rank %d of communicator %s (process %d on %s)%s", p.Rank, textsafe.Clean(p.Comm), p.PID, textsafe.Clean(p.Node), note)})
	}
	for _, m := range rep.Mismatches {
		for _, rc := range m.Behind {
			rank, note := rankOf(rc.PID, rc.Rank)
			if m.What == "status" {
				ev = append(ev, Evidence{Rank: rank, PID: rc.PID, Source: "ras", Suspect: true,
					Text: fmt.Sprintf("its communicator %s status differs from the other ranks'%s", textsafe.Clean(m.Comm), note)})
				continue
			}
			ev = append(ev, Evidence{Rank: rank, PID: rc.PID, Source: "ras", Suspect: true,
				Text: fmt.Sprintf("launched %d %s operations in communicator %s while others launched %d: it is behind%s", rc.Count, textsafe.Clean(m.What), textsafe.Clean(m.Comm), m.Majority, note)})
		}
	}
	return ev
}

// findDumps reads the job's dumps through the first live rank's root, so
// a container's /tmp is the one read. A gloo job, or a torch older than
// 2.2, writes none: that is said instead of how to turn them on.
func findDumps(ctx context.Context, h *host.Host, j Job, rt Runtime, o Options) *FRResult {
	prefix, from := flightrec.Prefix(j.Ranks[0].Env)
	if o.DumpPrefix == "" {
		note := ""
		switch {
		case rt.Backend == "gloo":
			note = "none expected: PyTorch's flight recorder records NCCL collectives, and this job's go through gloo"
		case rt.Torch != "" && older(rt.Torch, "2.2"):
			note = fmt.Sprintf("none expected: the ranks run torch %s, and the flight recorder arrived in torch 2.2", rt.Torch)
		}
		if note != "" {
			return &FRResult{Prefix: prefix, From: from, Dumps: []DumpInfo{}, Note: note}
		}
	}
	root := "/proc/" + strconv.Itoa(j.Ranks[0].PID) + "/root"
	if o.DumpPrefix != "" {
		prefix, from, root = o.DumpPrefix, "--dumps", ""
	}
	if !path.IsAbs(prefix) && root != "" {
		root = "" // a relative prefix is relative to the rank's cwd; read it from ours
	}
	// The job's start is known to about a second (boot time in whole
	// seconds, start in ticks); a dump of an earlier run is minutes older.
	start := h.Now().Add(-j.Age - startSlack)
	if o.DumpPrefix != "" {
		start = time.Time{} // dumps the user collected may predate this job's restart
	}
	f := flightrec.Find(ctx, h, root, prefix, start)
	res := &FRResult{Prefix: prefix, From: from, Skipped: f.Skipped, Dumps: []DumpInfo{}}
	for _, d := range f.Dumps {
		res.Dumps = append(res.Dumps, DumpInfo{Rank: d.Rank, Path: d.Path, Version: d.Version, Entries: len(d.Entries)})
	}
	if len(f.Dumps) > 0 {
		res.Groups = flightrec.Analyze(f.Dumps)
	} else {
		res.HowTo = dumpHowTo(j, prefix)
	}
	return res
}

func dumpHowTo(j Job, prefix string) []string {
	var out []string
	if pipe := j.Env("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"); pipe != "" && j.Env("TORCH_NCCL_TRACE_BUFFER_SIZE") != "" {
		out = append(out, fmt.Sprintf("This job can dump now: writing to %s<rank>.pipe makes that rank write its dump (PyTorch ProcessGroupNCCL DumpPipe), e.g. `echo 1 > %s0.pipe` — ncclwiz does not do it for you.", textsafe.Clean(pipe), textsafe.Clean(pipe)))
	}
	if j.Env("TORCH_NCCL_TRACE_BUFFER_SIZE") == "" && j.Env("TORCH_FR_BUFFER_SIZE") == "" {
		out = append(out, "The flight recorder is off for this job. Next time start it with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 (PyTorch: keeps the last 2000 collectives) and TORCH_NCCL_DUMP_ON_TIMEOUT=1 (PyTorch: each rank writes its dump when the watchdog fires).")
	}
	out = append(out, fmt.Sprintf("Dumps are written to %s<rank> (TORCH_NCCL_DEBUG_INFO_TEMP_FILE, or TORCH_FR_DUMP_TEMP_FILE in newer PyTorch); copy every node's dumps into one directory and run `ncclwiz hang --dumps DIR/nccl_trace_rank_` to compare them all.", textsafe.Clean(prefix)))
	out = append(out, "To also get a dump on demand, set TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/nccl_trace_pipe_ (PyTorch): `echo 1 > /tmp/nccl_trace_pipe_<rank>.pipe` then dumps that rank.")
	return out
}

func frEvidence(fr *FRResult) []Evidence {
	if fr == nil {
		return nil
	}
	var ev []Evidence
	for _, g := range fr.Groups {
		for _, s := range g.Suspects {
			ev = append(ev, Evidence{Rank: s, Source: "flight_recorder", Suspect: true,
				Text: fmt.Sprintf("process group %s (%s): %s", textsafe.Clean(g.Name), textsafe.Clean(g.Desc), g.Verdict)})
		}
		if len(g.Suspects) == 0 && g.Verdict != "" {
			ev = append(ev, Evidence{Rank: -1, Source: "flight_recorder", Text: fmt.Sprintf("process group %s (%s): %s", textsafe.Clean(g.Name), textsafe.Clean(g.Desc), g.Verdict)})
		}
	}
	return ev
}

func (r *Report) conclude(h *host.Host, j Job, why string) {
	switch r.Verdict {
	case VerdictNoHang:
		r.Summary = "No hang: " + why + "."
	case VerdictEnded:
		r.Summary = "The job ended: " + why + ". `ncclwiz explain <its log>` reads why it ended if it failed."
	case VerdictBusy:
		r.Summary = "No hang proven: " + why + "."
	case VerdictSuspect:
		r.ExitCode = 1
		r.Summary = fmt.Sprintf("Suspect rank(s): %s — %s.", joinRanks(r.Suspects), why)
	default:
		r.ExitCode = 1
		r.Summary = "Stuck: " + why + " — a rank on another machine, a rank that never started, the rendezvous or storage."
		if r.Job.Orphaned != "" {
			r.Summary = "Stuck, and its launcher is gone: " + why + ". Nothing will restart or end these ranks: end them (`ncclwiz fix` offers proc.stale once they are 2 minutes old) and start the job again."
		}
	}
	if r.Simulated != "" {
		r.Summary = "SIMULATED (practice scenario " + r.Simulated + "): " + r.Summary
	}
	byRank := map[int]RankSample{}
	for _, s := range r.Samples {
		byRank[s.Rank] = s
	}
	for _, rank := range r.Suspects {
		s, local := byRank[rank]
		switch {
		case !local:
			r.NextSteps = append(r.NextSteps, fmt.Sprintf("Rank %d is not on this machine: run `ncclwiz hang` on the node that runs it, and read its log.", rank))
		case s.Gone:
			r.NextSteps = append(r.NextSteps, fmt.Sprintf("Rank %d (pid %d) exited: its log's last lines say why; `ncclwiz explain <its log>` decodes them.", rank, s.PID))
		case s.Stopped():
			r.NextSteps = append(r.NextSteps, fmt.Sprintf("Rank %d (pid %d) is stopped: if you stopped it (Ctrl-Z, a debugger), resume it (`kill -CONT %d`, or detach the debugger); ncclwiz does not signal it.", rank, s.PID, s.PID))
		case class(s) == "blocked":
			r.NextSteps = append(r.NextSteps, fmt.Sprintf("Rank %d (pid %d) is in uninterruptible sleep (D): %s; %s. Find what it waits for: Xid, I/O, NFS or hung-task lines in `dmesg` (or `journalctl -k`), and `cat /proc/%d/stack` (root).", rank, s.PID, procs.KernelWait(textsafe.Clean(s.Wchan)), procs.Unkillable, s.PID))
		default:
			r.NextSteps = append(r.NextSteps, fmt.Sprintf("Look at where rank %d (pid %d) is: %s", rank, s.PID, pySpyAdvice(h, s.PID)))
		}
		for _, o := range s.Outputs {
			r.NextSteps = append(r.NextSteps, fmt.Sprintf("Its %s goes to %s: `ncclwiz explain %s` reads it.", fdName(o.FD), textsafe.Clean(o.Path), textsafe.Clean(o.Path)))
			break
		}
	}
	if id := j.SlurmJobID(); r.ExitCode != 0 && id != "" {
		// Slurm started the ranks: it ends them on every node, and
		// restarts nothing behind the user's back.
		r.NextSteps = append(r.NextSteps, fmt.Sprintf("The ranks are Slurm job %s's step %s: `scancel %s` ends the job on every node (ncclwiz signals nothing); `squeue -j %s` and `sacct -j %s` show its state.", textsafe.Clean(id), textsafe.Clean(r.Job.SlurmStep), textsafe.Clean(id), textsafe.Clean(id), textsafe.Clean(id)))
	}
	if r.ExitCode != 0 {
		switch r.Runtime.Backend {
		case "gloo":
			r.NextSteps = append(r.NextSteps, "This job's collectives go through gloo: pass a timeout to init_process_group (PyTorch; gloo's default is 30 minutes) so a rank that waits too long fails with gloo's \"Timed out waiting … for recv\" instead of hanging, and run once with TORCH_DISTRIBUTED_DEBUG=DETAIL (PyTorch) to catch ranks that call different collectives.")
		case "nccl":
			if r.Runtime.Torch != "" && older(r.Runtime.Torch, "2.2") {
				r.NextSteps = append(r.NextSteps, fmt.Sprintf("torch %s has no flight recorder (it arrived in torch 2.2): with a newer torch, TORCH_NCCL_TRACE_BUFFER_SIZE and TORCH_NCCL_DUMP_ON_TIMEOUT record which collective each rank was in.", r.Runtime.Torch))
			}
		}
		r.NextSteps = append(r.NextSteps, "The guide: `ncclwiz guides hang` (how to read each source, and what each verdict means).")
	}
	if r.RAS != nil && r.RAS.Error != "" {
		r.NextSteps = append(r.NextSteps, "RAS: "+r.RAS.Error+".")
	}
	if r.ExitCode != 0 && r.FlightRecorder != nil && len(r.FlightRecorder.Dumps) == 0 && len(r.FlightRecorder.HowTo) > 0 {
		r.NextSteps = append(r.NextSteps, r.FlightRecorder.HowTo[0])
	}
}

// pySpyAdvice says how to see the rank's Python stack. ncclwiz never
// attaches to a process itself: py-spy uses ptrace.
func pySpyAdvice(h *host.Host, pid int) string {
	if res, err := h.Run(context.Background(), 5*time.Second, "py-spy", "--version"); err == nil && res.ExitCode == 0 {
		return fmt.Sprintf("`py-spy dump --pid %d` prints its Python stack (it attaches with ptrace), or `ncclwiz hang --py-spy` runs it after asking you.", pid)
	}
	return fmt.Sprintf("install py-spy (`pip install py-spy`), then `py-spy dump --pid %d` (or `ncclwiz hang --py-spy`, which asks first) prints its Python stack; it attaches with ptrace.", pid)
}

// Discover reads the process table and finds the jobs on it, and the
// processes whose environment this user cannot read.
func Discover(ctx context.Context, h *host.Host) ([]Job, []proctab.Process, error) {
	t, err := ReadTable(ctx, h)
	if err != nil {
		return nil, nil, err
	}
	return FindJobs(t), Unreadable(t), nil
}

// Run is `ncclwiz hang` and the wizard's "My job is hanging": discover,
// pick the job pid names (0: the only one), inspect it. A failure to find
// one says which processes could not be read.
func Run(ctx context.Context, h *host.Host, pid int, o Options) (*Report, []Job, error) {
	jobs, unread, err := Discover(ctx, h)
	if err != nil {
		return nil, nil, err
	}
	j, err := Pick(jobs, pid)
	if err != nil {
		var pe PickError
		if note := UnreadableNote(unread, h.IsRoot()); note != "" && errors.As(err, &pe) {
			err = PickError{pe.Msg + "; " + note}
		}
		return nil, jobs, err
	}
	o.Unreadable = unread
	r, err := Inspect(ctx, h, j, o)
	return r, jobs, err
}

// ReadTable reads the process table with the variables hang needs.
func ReadTable(ctx context.Context, h *host.Host) (*proctab.Table, error) {
	return proctab.Read(ctx, h, proctab.Options{EnvKeys: EnvKeys})
}

// startSlack is how much earlier than the job's computed start a file may
// be written and still belong to the job.
const startSlack = 5 * time.Second

// InspectDumps analyses flight-recorder dumps alone, for a job that is no
// longer running (or runs elsewhere): prefix is DIR/nccl_trace_rank_.
func InspectDumps(ctx context.Context, h *host.Host, prefix string) *Report {
	r := &Report{Schema: Schema, Samples: []RankSample{}}
	f := flightrec.Find(ctx, h, "", prefix, time.Time{})
	fr := &FRResult{Prefix: prefix, From: "--dumps", Skipped: f.Skipped, Dumps: []DumpInfo{}}
	for _, d := range f.Dumps {
		fr.Dumps = append(fr.Dumps, DumpInfo{Rank: d.Rank, Path: d.Path, Version: d.Version, Entries: len(d.Entries)})
	}
	if len(f.Dumps) > 0 {
		fr.Groups = flightrec.Analyze(f.Dumps)
	}
	r.FlightRecorder = fr
	r.Evidence = frEvidence(fr)
	if r.Evidence == nil {
		r.Evidence = []Evidence{}
	}
	r.Suspects = Suspects(r.Evidence)
	if r.Suspects == nil {
		r.Suspects = []int{}
	}
	switch {
	case len(f.Dumps) == 0 && len(f.Skipped) > 0:
		// Files were there: say why none was read, not that none exists.
		r.Verdict, r.ExitCode = "no_hang_found", 2
		shown := f.Skipped[:min(len(f.Skipped), 3)]
		r.Summary = fmt.Sprintf("No job runs on this machine, and none of the %s at %s<rank> could be read as a dump: %s%s.",
			units.Count(len(f.Skipped), "file"), textsafe.Clean(prefix), textsafe.Clean(strings.Join(shown, "; ")), more(len(f.Skipped)-len(shown)))
	case len(f.Dumps) == 0:
		r.Verdict, r.ExitCode, r.Confidence = VerdictNoDumps, 2, Low
		r.Summary = fmt.Sprintf("No job runs on this machine and no dump was found at %s<rank>.", textsafe.Clean(prefix))
	case len(r.Suspects) > 0:
		r.Verdict, r.ExitCode, r.Confidence = VerdictSuspect, 1, Medium
		r.Summary = fmt.Sprintf("Suspect rank(s) from the dumps: %s.", joinRanks(r.Suspects))
		r.Surer = []string{"the dumps of every rank of every node, copied into one directory"}
		r.NextSteps = []string{"Read the suspect rank's log around the time of its last collective: `ncclwiz explain <log>`.", "The guide: `ncclwiz guides hang`."}
	default:
		r.Verdict, r.Confidence = VerdictDumpsAgree, Low
		r.Summary = "The dumps agree: no rank is behind or desynchronised. That does not prove the job runs: every rank may wait in the same collective for something else."
		r.Surer = []string{"`ncclwiz hang` on each node while the job runs"}
	}
	r.fill()
	return r
}

// fill makes the lists the schema requires empty rather than null, and
// sanitises what came from the machine.
func (r *Report) fill() {
	r.sanitize()
	if r.Evidence == nil {
		r.Evidence = []Evidence{}
	}
	if r.Suspects == nil {
		r.Suspects = []int{}
	}
	if r.Surer == nil {
		r.Surer = []string{}
	}
	if r.Job.LauncherPIDs == nil {
		r.Job.LauncherPIDs = []int{}
	}
	if r.NextSteps == nil {
		r.NextSteps = []string{}
	}
	if r.Samples == nil {
		r.Samples = []RankSample{}
	}
}

// sanitize cleans every string read from the machine or a peer (paths,
// wait channels, RAS node names, dump contents) of terminal escapes and
// secrets, for the JSON report as for the plain one.
func (r *Report) sanitize() {
	c := textsafe.Clean
	r.Job.Command, r.Job.WorldSize = c(r.Job.Command), c(r.Job.WorldSize)
	r.Job.Orphaned, r.Job.Unreadable, r.Job.SlurmStep = c(r.Job.Orphaned), c(r.Job.Unreadable), c(r.Job.SlurmStep)
	r.Runtime.Torch, r.Runtime.NCCL = c(r.Runtime.Torch), c(r.Runtime.NCCL)
	for i := range r.Evidence {
		r.Evidence[i].Text = c(r.Evidence[i].Text)
	}
	for i := range r.Samples {
		s := &r.Samples[i]
		s.Wchan, s.LocalRank, s.Command = c(s.Wchan), c(s.LocalRank), c(s.Command)
		counts := map[string]int{}
		for k, v := range s.WchanCounts {
			counts[c(k)] += v
		}
		s.WchanCounts = counts
		for k := range s.Busy {
			s.Busy[k].Name = c(s.Busy[k].Name)
		}
		for k := range s.StoreSockets {
			s.StoreSockets[k] = c(s.StoreSockets[k])
		}
		for k := range s.Outputs {
			s.Outputs[k].Path = c(s.Outputs[k].Path)
		}
		if s.GPU != nil {
			s.GPU.UUID = c(s.GPU.UUID)
		}
	}
	if r.RAS != nil && r.RAS.Reply != nil {
		rep := r.RAS.Reply
		rep.NCCLVersion = c(rep.NCCLVersion)
		for _, ps := range [][]ras.Peer{rep.Missing, rep.Dead} {
			for i := range ps {
				ps[i].Comm, ps[i].Node, ps[i].GPU = c(ps[i].Comm), c(ps[i].Node), c(ps[i].GPU)
			}
		}
		for i := range rep.Mismatches {
			rep.Mismatches[i].Comm, rep.Mismatches[i].What = c(rep.Mismatches[i].Comm), c(rep.Mismatches[i].What)
		}
		for i := range rep.Errors {
			rep.Errors[i] = c(rep.Errors[i])
		}
	}
	if fr := r.FlightRecorder; fr != nil {
		fr.Prefix = c(fr.Prefix)
		for i := range fr.Dumps {
			fr.Dumps[i].Path, fr.Dumps[i].Version = c(fr.Dumps[i].Path), c(fr.Dumps[i].Version)
		}
		for i := range fr.Skipped {
			fr.Skipped[i] = c(fr.Skipped[i])
		}
		for i := range fr.Groups {
			g := &fr.Groups[i]
			g.Name, g.Desc, g.Verdict = c(g.Name), c(g.Desc), c(g.Verdict)
			for k := range g.Ranks {
				g.Ranks[k].LastOp = c(g.Ranks[k].LastOp)
			}
			if g.First != nil {
				for k, v := range g.First.ByRank {
					g.First.ByRank[k] = c(v)
				}
			}
		}
	}
}

// more is " (and N more)" for the reasons not quoted, or "".
func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n)
}
