// Package procs finds leftover training ranks on the process model of
// internal/proctab: processes of a distributed job whose launcher is gone,
// that are old enough not to belong to a job still starting, and that made
// no CPU progress over a sampled interval. It holds the proc.ranks check;
// the proc.stale fix ends what it finds, by PID, after judging again.
package procs

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/procnet"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// Checks returns proc.ranks.
func Checks() []checks.Check {
	// The CPU sample takes Options.Interval when there are suspects.
	return []checks.Check{{ID: "proc.ranks", Title: "Leftover training processes", Category: "proc", Tier: checks.Quick, Run: run}}
}

// DefaultMinAge is the youngest a leftover rank can be. A rank younger than
// this may belong to a job that is starting or being restarted (torchrun's
// agent restarts workers and re-runs rendezvous; a launcher that exec()s
// or a container that is still coming up leaves ranks briefly under an
// init), and a leftover costs nothing by waiting two more minutes while
// ending a live rank loses the run. Ranks of dead jobs are found minutes
// to hours later, when the next job fails.
const DefaultMinAge = 2 * time.Minute

// DefaultInterval is how far apart the two CPU samples of a suspect are: a
// second is 100 clock ticks, so a thread doing any work shows up, and it is
// short enough to run on every check.
const DefaultInterval = time.Second

// Options tune the judgement; the zero value means the defaults.
type Options struct {
	MinAge   time.Duration
	Interval time.Duration
}

func (o Options) withDefaults() Options {
	if o.MinAge <= 0 {
		o.MinAge = DefaultMinAge
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	return o
}

// EnvKeys are the variables the process table keeps: what marks a rank,
// which job it belongs to, and which launcher started it.
var EnvKeys = []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
	"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "GROUP_RANK", "ROLE_RANK",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMIX_RANK",
	"ACCELERATE_MIXED_PRECISION", "CUDA_VISIBLE_DEVICES"}

// launcherMarkers are variables only a launcher sets in its workers, with
// the launcher they name. RANK alone is not one: a Kubernetes operator or a
// systemd unit sets RANK for a process it starts directly.
var launcherMarkers = []struct{ key, launcher string }{
	{"TORCHELASTIC_RUN_ID", "torchrun"}, {"TORCHELASTIC_RESTART_COUNT", "torchrun"}, {"GROUP_RANK", "torchrun"},
	{"ROLE_RANK", "torchrun"}, {"OMPI_COMM_WORLD_RANK", "mpirun"}, {"PMI_RANK", "an MPI launcher"}, {"PMIX_RANK", "an MPI launcher"},
}

// IsRank reports whether p is a rank of a distributed job (not a launcher).
func IsRank(p proctab.Process) bool {
	for _, k := range []string{"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"} {
		if _, ok := p.Env[k]; ok {
			return true
		}
	}
	return false
}

// IsLauncher reports whether p is a launcher of distributed ranks:
// torchrun (also as python -m torch.distributed.run), accelerate, deepspeed,
// mpirun and relatives, and Slurm's slurmstepd (the parent of an srun
// step's tasks on each node).
func IsLauncher(p proctab.Process) bool {
	cmd := " " + strings.Join(p.Cmdline, " ") + " "
	for _, l := range []string{"torchrun", "torch.distributed.run", "torch.distributed.launch", "accelerate launch", "accelerate-launch",
		"deepspeed", "mpirun", "mpiexec", "orterun", "prterun", "hydra_pmi_proxy", "orted", "prted"} {
		if strings.Contains(cmd, l) {
			return true
		}
	}
	switch p.Comm {
	case "torchrun", "accelerate", "deepspeed", "mpirun", "mpiexec", "orterun", "prterun", "orted", "prted", "slurmstepd":
		return true
	}
	return false
}

// reaperName says whether p adopts orphans rather than starting ranks: an
// init (as PID 1 of a machine or container) or a subreaper.
func reaperName(t *proctab.Table, p proctab.Process) (string, bool) {
	c := p.Comm
	switch c {
	// pause is PID 1 of a Kubernetes pod that shares its process namespace.
	case "systemd", "init", "tini", "tini-static", "dumb-init", "docker-init", "catatonit", "s6-svscan", "runit", "runsvdir", "openrc-init", "pause":
		return c, true
	}
	if strings.HasPrefix(c, "containerd-shim") {
		return c, true
	}
	// The initial namespace's PID 1 adopts orphans whatever it is called
	// (a microVM's agent, a custom init); no launcher runs as the machine's init.
	return c, t.IsMachineInit(p)
}

// IsReaper reports whether p adopts orphans rather than starting ranks:
// an init (of the machine or of a container) or a subreaper such as tini.
func IsReaper(t *proctab.Table, p proctab.Process) bool {
	_, ok := reaperName(t, p)
	return ok
}

// LaunchedBy returns the launcher p's environment names (a variable only a
// launcher sets in its workers), if any.
func LaunchedBy(p proctab.Process) (marker, launcher string, ok bool) { return launchedBy(p) }

// launchedBy returns the launcher p's environment names, if any.
func launchedBy(p proctab.Process) (marker, launcher string, ok bool) {
	for _, m := range launcherMarkers {
		if _, set := p.Env[m.key]; set {
			return m.key, m.launcher, true
		}
	}
	return "", "", false
}

// Verdicts of Assessment.
const (
	// Live: nothing says the rank's job is gone.
	Live = "live"
	// Stale: launcher gone, old enough, no progress: ncclwiz offers to end it.
	Stale = "stale"
	// Busy: its launcher is gone, but it made progress in the sample; it is
	// reported and never offered for ending.
	Busy = "busy"
	// Young: its launcher is gone but it is younger than MinAge.
	Young = "young"
	// Zombie: it has exited; only its parent can reap it.
	Zombie = "zombie"
	// Unknown: ncclwiz cannot see enough to judge it.
	Unknown = "unknown"
)

// Assessment is the judgement of one rank, with the evidence for it.
type Assessment struct {
	proctab.Process
	Age     time.Duration
	Verdict string
	// Why lists the evidence, in the order it was weighed.
	Why []string
	// Parent says what the parent is now, e.g. "tini (pid 1, PID 1 of its namespace)".
	Parent string
	// Progress is the CPU sample, for ranks whose launcher is gone.
	Progress *proctab.Progress
	// PeersGone is true when the job's other local ranks are all gone.
	PeersGone bool
}

// Rank returns the RANK variable (or the MPI equivalent), or "".
func (a Assessment) Rank() string {
	for _, k := range []string{"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"} {
		if v, ok := a.Env[k]; ok {
			return v
		}
	}
	return ""
}

// Reason is the evidence in one line.
func (a Assessment) Reason() string { return strings.Join(a.Why, "; ") }

func (a *Assessment) why(format string, args ...any) {
	a.Why = append(a.Why, fmt.Sprintf(format, args...))
}

// Sampler takes a CPU sample of the given processes (proctab.Sample on
// the real machine; tests give a canned one).
type Sampler func(pids []int) (map[int]proctab.Progress, error)

// Probe reads what the judgement needs beyond the process table. Nil
// functions mean "not known": a rank is then judged on less evidence
// (and, without Maps, is a rank only if it runs Python).
type Probe struct {
	Sample Sampler
	// SampleFor samples again for a given interval (nil: no second look).
	SampleFor func(pids []int, interval time.Duration) (map[int]proctab.Progress, error)
	// Maps returns the files pid maps (libraries, /dev/shm segments).
	Maps func(pid int) ([]string, error)
	// Held returns the TCP sockets pid holds; Listening the listening
	// sockets of pid's network namespace; Inodes the socket inodes pid
	// holds (to find who holds a listener).
	Held      func(pid int) ([]procnet.Socket, error)
	Listening func(pid int) ([]procnet.Socket, error)
	Inodes    func(pid int) (map[uint64]int, error)
}

// Judge assesses every rank in the table. It samples CPU progress, through
// sample, only for ranks whose launcher is gone and that are old enough.
func Judge(t *proctab.Table, o Options, sample Sampler) ([]Assessment, error) {
	return JudgeWith(t, o, Probe{Sample: sample})
}

// Thresholds of progress over the sample, far enough from a clock tick
// (10 ms) that an idle rank's timer wake-ups never decide: the main thread
// computing (MainCPUShare of the interval), or another thread doing so
// (OtherCPUShare) unless it spins on a socket whose other end is gone.
// On a loaded machine a thread that wants the CPU may get little of it in a
// second, and a thread that wakes on a timer for a moment (gloo's and Open
// MPI's pollers do) may be caught runnable while it waits for a core: a
// sample that saw some CPU or a runnable thread but not enough to decide
// is taken again, ExtendFactor times longer, and the longer one decides —
// a working thread accumulates CPU over seconds, a poller does not.
const (
	MainCPUShare  = 0.05
	OtherCPUShare = 0.05
	ExtendFactor  = 3
)

// JudgeWith is Judge with every probe: positive evidence that a process is
// a rank (Python, torch/NCCL/CUDA/MPI libraries or NCCL segments mapped),
// a live launcher or peer found by process group, rendezvous and store
// socket, and a store thread spinning on a closed socket told from work.
func JudgeWith(t *proctab.Table, o Options, pr Probe) ([]Assessment, error) {
	o = o.withDefaults()
	var out []Assessment
	var suspects []int
	for _, p := range t.All() {
		if !IsRank(p) || (p.PID == t.Self && t.Self > 0) || NeverARank(p) != "" {
			continue // a shell or tmux that inherited RANK is not a rank
		}
		if parent, ok := t.Lookup(p.PPID); ok && IsRank(parent) && NeverARank(parent) == "" && !parent.Exited() {
			continue // a rank's own child (a data-loader worker) lives and dies with it
		}
		a := assess(t, p, o)
		if a.Verdict == Stale {
			liveLauncher(t, &a, pr)
		}
		if a.Verdict == Stale {
			if why, ok := isRankProcess(p, pr); ok {
				a.why("%s", why)
			} else {
				a.Verdict = Unknown
				a.why("but nothing shows it is a rank: %s — its environment alone may have been inherited", why)
			}
		}
		if a.Verdict == Stale {
			suspects = append(suspects, p.PID)
		}
		out = append(out, a)
	}
	if len(suspects) > 0 && pr.Sample != nil {
		prog, err := pr.Sample(suspects)
		if err != nil {
			return nil, err
		}
		// Undecided samples are taken again, longer (see ExtendFactor).
		var again []int
		for _, a := range out {
			if pg, ok := prog[a.PID]; ok && a.Verdict == Stale && !pg.Gone && undecided(a.Process, pg, pr) {
				again = append(again, a.PID)
			}
		}
		if len(again) > 0 && pr.SampleFor != nil {
			longer, err := pr.SampleFor(again, ExtendFactor*o.Interval)
			if err != nil {
				return nil, err
			}
			for pid, pg := range longer {
				prog[pid] = pg
			}
		}
		kept := out[:0]
		for _, a := range out {
			if a.Verdict == Stale {
				pg, ok := prog[a.PID]
				switch {
				case !ok || pg.Gone:
					continue // ended meanwhile: nothing to judge
				case pg.Live == 0 && pg.Threads > 0:
					a.Verdict = Zombie
					a.why("it has exited; only its parent (pid %d) can reap it", a.PPID)
				default:
					if len(pg.Blocked) > 0 {
						// Not work, but not something a signal ends: a D
						// thread holds the process until the kernel wait returns.
						a.Verdict = Busy
						a.why("but it is in uninterruptible sleep (D, %s during the sample): %s; %s — so it is not offered for ending (`dmesg` and /proc/%d/stack say what it waits for)", units.Count(len(pg.Blocked), "thread"), KernelWait(""), Unkillable, a.PID)
					} else if busy, why := working(a.Process, pg, pr); busy {
						a.Verdict = Busy
						a.why("but it is working: %s, so it is not offered for ending", why)
					} else {
						a.why("%s", why)
					}
				}
				a.Progress = &pg
			}
			kept = append(kept, a)
		}
		out = kept
	}
	return out, nil
}

// working decides from the sample whether a rank whose launcher is gone
// still does something: I/O in the kernel (D; the caller says so apart), writes, new threads, its
// main thread computing, or another thread computing — but not a thread
// that spins on a connection the other end closed (torch 1.13's store
// thread polls its socket to a dead launcher's store forever).
func working(p proctab.Process, pg proctab.Progress, pr Probe) (bool, string) {
	secs := pg.Interval.Seconds()
	if secs <= 0 {
		secs = DefaultInterval.Seconds()
	}
	share := func(ticks uint64) float64 { return float64(ticks) / proctab.UserHZ / secs }
	switch {
	case len(pg.Blocked) > 0:
		return true, pg.String()
	case pg.IOKnown && pg.Wrote > 0:
		return true, fmt.Sprintf("it wrote %s during the %s sample", units.Bytes(pg.Wrote), pg.Interval)
	case pg.NewThreads > 0:
		return true, fmt.Sprintf("it started %s during the sample", units.Count(pg.NewThreads, "thread"))
	case share(pg.MainCPUTicks) >= MainCPUShare:
		return true, fmt.Sprintf("its main thread used %s of CPU over %s", time.Duration(pg.MainCPUTicks)*time.Second/proctab.UserHZ, pg.Interval)
	}
	other := pg.CPUTicks - min(pg.MainCPUTicks, pg.CPUTicks)
	if share(other) < OtherCPUShare {
		if pg.CPUTicks == 0 {
			return false, pg.String()
		}
		return false, fmt.Sprintf("it used only %s of CPU over %s, no writes (timer wake-ups, not work)", pg.CPU(), pg.Interval)
	}
	if dead := deadStore(p, pr); dead != "" {
		return false, fmt.Sprintf("a background thread spins (%s of CPU over %s, runnable in %d of %d reads) but writes nothing: %s — that is not progress", pg.CPU(), pg.Interval, pg.RunnableReads, pg.Reads, dead)
	}
	return true, pg.String()
}

// undecided: the sample saw some CPU or a runnable thread, but neither
// enough to call the rank working nor nothing at all.
func undecided(p proctab.Process, pg proctab.Progress, pr Probe) bool {
	busy, _ := working(p, pg, pr)
	return !busy && (pg.CPUTicks > 0 || pg.RunnableReads > 0)
}

// deadStore names a connection of p to its store port that the other end
// closed (CLOSE-WAIT) while nothing listens on that port any more.
func deadStore(p proctab.Process, pr Probe) string {
	port, err := strconv.Atoi(p.Env["MASTER_PORT"])
	if err != nil || pr.Held == nil || pr.Listening == nil {
		return ""
	}
	held, err := pr.Held(p.PID)
	if err != nil {
		return ""
	}
	ls, err := pr.Listening(p.PID)
	if err != nil {
		return ""
	}
	for _, l := range ls {
		if int(l.Local.Port()) == port {
			return ""
		}
	}
	for _, s := range held {
		if s.State == "CLOSE-WAIT" && int(s.Remote.Port()) == port {
			return fmt.Sprintf("its connection %s → %s to the job's store is closed at the other end (CLOSE-WAIT) and nothing listens on port %d", s.Local, s.Remote, port)
		}
	}
	return ""
}

// rankLibs are libraries only a training rank maps.
var rankLibs = []string{"libtorch", "libc10", "libnccl", "libcuda.so", "libcudart", "libmpi", "libgloo", "/torch/_C."}

// isRankProcess is the positive evidence that p is a rank and not a
// program that merely inherited a rank's environment: it runs Python, or
// maps torch, NCCL, CUDA or MPI libraries, or maps an NCCL segment.
func isRankProcess(p proctab.Process, pr Probe) (string, bool) {
	if what := NeverARank(p); what != "" {
		return "it is " + what, false
	}
	if pr.Maps != nil {
		if files, err := pr.Maps(p.PID); err == nil {
			for _, f := range files {
				for _, lib := range rankLibs {
					if strings.Contains(f, lib) {
						return "it maps " + f, true
					}
				}
				if strings.HasPrefix(f, "/dev/shm/nccl-") {
					return "it maps the NCCL segment " + f, true
				}
			}
		}
	}
	for _, n := range append([]string{p.Comm}, firstArg(p)) {
		if strings.HasPrefix(n, "python") || n == "pt_main_thread" {
			return "it runs Python (" + n + ")", true
		}
	}
	return "it does not run Python and maps no torch, NCCL, CUDA or MPI library nor an NCCL segment", false
}

func firstArg(p proctab.Process) string {
	if len(p.Cmdline) == 0 {
		return ""
	}
	a := p.Cmdline[0]
	if i := strings.LastIndexByte(a, '/'); i >= 0 {
		a = a[i+1:]
	}
	return a
}

// liveLauncher looks, before a rank is called a leftover, for a launcher
// that is alive but is not its parent: its process group leader, a peer
// of the same run (rendezvous) still under its launcher, or a non-rank
// process holding the store's listening socket. Any of them makes the
// rank live.
func liveLauncher(t *proctab.Table, a *Assessment, pr Probe) {
	p := a.Process
	if p.PGID > 0 && p.PGID != p.PID {
		// The leader must share the rank's PID namespace: unshare or a
		// container runtime outside it leads the group of what it started.
		// A zombie leader is dying, whatever its thread count says: the
		// rank was re-parented while its last threads exit. ncclwiz itself
		// is never the job's launcher, even when it leads the group (a
		// shell that started the job and then exec'd ncclwiz).
		if l, ok := t.Lookup(p.PGID); ok && l.PID != t.Self && !l.Zombie() && !IsRank(l) && !IsReaper(t, l) && l.PIDNS != "" && l.PIDNS == p.PIDNS {
			a.Verdict = Live
			a.why("but its process group leader %s still runs: the launcher that started it need not be its parent (`sh -c 'rank &'` re-parents a rank while its launcher lives)", describe(t, l))
			return
		}
	}
	key := func(q proctab.Process) string {
		return q.Env["MASTER_ADDR"] + "|" + q.Env["MASTER_PORT"] + "|" + q.Env["TORCHELASTIC_RUN_ID"] + "|" + q.PIDNS
	}
	if p.Env["MASTER_PORT"] != "" || p.Env["TORCHELASTIC_RUN_ID"] != "" {
		for _, q := range t.All() {
			if q.PID == p.PID || !IsRank(q) || q.Exited() || key(q) != key(p) {
				continue
			}
			if l, ok := nearestLauncher(t, q); ok {
				a.Verdict = Live
				a.why("but rank pid %d of the same run (%s) still runs under its launcher %s", q.PID, runName(p), describe(t, l))
				return
			}
		}
	}
	if holder, ok := storeHolder(t, p, pr); ok {
		a.Verdict = Live
		a.why("but %s still listens on the job's store port %s: its launcher is alive", describe(t, holder), p.Env["MASTER_PORT"])
	}
}

func runName(p proctab.Process) string {
	s := "MASTER_ADDR:MASTER_PORT " + p.Env["MASTER_ADDR"] + ":" + p.Env["MASTER_PORT"]
	if id := p.Env["TORCHELASTIC_RUN_ID"]; id != "" {
		s += ", run id " + id
	}
	return s
}

// nearestLauncher returns q's nearest ancestor that is a launcher.
func nearestLauncher(t *proctab.Table, q proctab.Process) (proctab.Process, bool) {
	seen := map[int]bool{q.PID: true}
	for cur, i := q, 0; i < 64; i++ {
		parent, ok := t.Lookup(cur.PPID)
		if !ok || seen[parent.PID] {
			return proctab.Process{}, false
		}
		seen[parent.PID] = true
		if IsLauncher(parent) && !IsRank(parent) {
			return parent, true
		}
		cur = parent
	}
	return proctab.Process{}, false
}

// storeHolder finds the process that listens on p's MASTER_PORT in p's
// network namespace, when it is not a rank (torchrun's agent hosts the
// store of its ranks).
func storeHolder(t *proctab.Table, p proctab.Process, pr Probe) (proctab.Process, bool) {
	port, err := strconv.Atoi(p.Env["MASTER_PORT"])
	if err != nil || pr.Listening == nil || pr.Inodes == nil {
		return proctab.Process{}, false
	}
	ls, err := pr.Listening(p.PID)
	if err != nil {
		return proctab.Process{}, false
	}
	want := map[uint64]bool{}
	for _, l := range ls {
		if int(l.Local.Port()) == port && l.Inode != 0 {
			want[l.Inode] = true
		}
	}
	if len(want) == 0 {
		return proctab.Process{}, false
	}
	for _, q := range t.All() {
		if q.PIDNS != p.PIDNS || IsRank(q) || q.Zombie() || !(IsLauncher(q) || isPythonName(q)) {
			continue
		}
		inodes, err := pr.Inodes(q.PID)
		if err != nil {
			continue
		}
		for ino := range inodes {
			if want[ino] {
				return q, true
			}
		}
	}
	return proctab.Process{}, false
}

func isPythonName(p proctab.Process) bool {
	return strings.HasPrefix(p.Comm, "python") || strings.HasPrefix(firstArg(p), "python")
}

// assess weighs everything but the CPU sample. A rank comes out Stale here
// only as a suspect, for Judge to sample.
func assess(t *proctab.Table, p proctab.Process, o Options) Assessment {
	a := Assessment{Process: p, Age: t.Age(p), Verdict: Live}
	if p.Exited() {
		a.Verdict = Zombie
		a.why("it has exited; only its parent (pid %d) can reap it", p.PPID)
		return a
	}
	if p.IsNamespaceInit() {
		a.why("it is PID 1 of its own PID namespace (a container's or pod's main process): it has no launcher to lose")
		return a
	}
	if p.PPID == 0 {
		a.why("its parent is outside its PID namespace (PPID 0: entered with nsenter or docker exec), which is not re-parenting")
		return a
	}
	parent, ok := t.Lookup(p.PPID)
	if !ok {
		a.Verdict = Unknown
		a.why("its parent pid %d is not visible", p.PPID)
		return a
	}
	a.Parent = describe(t, parent)
	if parent.PIDNS != "" && p.PIDNS != "" && parent.PIDNS != p.PIDNS {
		// Seen from the host, a process started by docker exec or nsenter
		// has a parent outside its namespace (containerd-shim, nsenter);
		// seen from inside, PPID 0. Either way: not re-parenting.
		a.why("its parent %s is outside its PID namespace (started with docker exec or nsenter), which is not re-parenting", a.Parent)
		return a
	}
	if IsLauncher(parent) {
		a.why("its launcher %s is running", a.Parent)
		return a
	}
	name, reaper := reaperName(t, parent)
	if !reaper {
		a.why("its parent %s is running and may be its launcher", a.Parent)
		return a
	}
	marker, launcher, ok := launchedBy(p)
	if !ok {
		a.Verdict = Unknown
		a.why("its parent is %s, but nothing in its environment says a launcher started it: %s may have started it directly", a.Parent, name)
		return a
	}
	a.why("launcher gone: %s started it (%s is set) but its parent is now %s", launcher, marker, a.Parent)
	if p.PGID > 0 && p.PGID != p.PID && p.PGID != parent.PID {
		if _, alive := t.Lookup(p.PGID); !alive {
			a.why("its process group leader pid %d is gone", p.PGID)
		}
	}
	if peers, want, ok := localPeers(t, p); ok {
		if len(peers) == 0 {
			a.PeersGone = true
			a.why("none of the job's %d other local ranks runs", want)
		} else {
			a.why("%d of the job's %d other local ranks still run (pid %s)", len(peers), want, joinInts(peers))
		}
	}
	if a.Age < o.MinAge {
		a.Verdict = Young
		a.why("but it is only %s old (< %s): its job may still be starting", round(a.Age), o.MinAge)
		return a
	}
	a.why("%s old", round(a.Age))
	a.Verdict = Stale
	return a
}

// localPeers returns the other ranks of p's job on this machine (same
// master address, port and run id), and how many there should be. ok is
// false when the local world size is unknown or not every environment
// could be read.
func localPeers(t *proctab.Table, p proctab.Process) (peers []int, want int, ok bool) {
	size := p.Env["LOCAL_WORLD_SIZE"]
	if size == "" {
		size = p.Env["OMPI_COMM_WORLD_LOCAL_SIZE"]
	}
	n, err := strconv.Atoi(size)
	if err != nil || n < 2 || t.EnvUnreadable > 0 {
		return nil, 0, false
	}
	key := func(q proctab.Process) string {
		return q.Env["MASTER_ADDR"] + "|" + q.Env["MASTER_PORT"] + "|" + q.Env["TORCHELASTIC_RUN_ID"]
	}
	for _, q := range t.All() {
		if q.PID == p.PID || !IsRank(q) || q.Exited() || key(q) != key(p) {
			continue
		}
		if parent, ok := t.Lookup(q.PPID); ok && IsRank(parent) {
			continue
		}
		peers = append(peers, q.PID)
	}
	return peers, n - 1, true
}

func describe(t *proctab.Table, p proctab.Process) string {
	s := fmt.Sprintf("%s (pid %d", p.Comm, p.PID)
	switch {
	case t.IsMachineInit(p):
		s += ", the machine's init"
	case p.IsNamespaceInit() && p.PID != 1:
		s += ", PID 1 of its namespace"
	}
	return s + ")"
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

func round(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// Assess reads the process table of h and judges every rank on it.
func Assess(ctx context.Context, h *host.Host, o Options) ([]Assessment, error) {
	o = o.withDefaults()
	t, err := proctab.Read(ctx, h, proctab.Options{EnvKeys: EnvKeys})
	if err != nil {
		return nil, err
	}
	return JudgeWith(t, o, Probe{
		Sample: func(pids []int) (map[int]proctab.Progress, error) {
			return proctab.Sample(ctx, h, pids, o.Interval)
		},
		SampleFor: func(pids []int, d time.Duration) (map[int]proctab.Progress, error) {
			return proctab.Sample(ctx, h, pids, d)
		},
		Maps: func(pid int) ([]string, error) { return proctab.MappedFiles(h, pid) },
		Held: func(pid int) ([]procnet.Socket, error) { return procnet.Held(h, pid) },
		Listening: func(pid int) ([]procnet.Socket, error) {
			all, err := procnet.TCP(h, pid)
			var ls []procnet.Socket
			for _, s := range all {
				if s.State == "LISTEN" {
					ls = append(ls, s)
				}
			}
			return ls, err
		},
		Inodes: func(pid int) (map[uint64]int, error) { return procnet.Inodes(h, pid) },
	})
}

// StaleRank is a rank left over from a job that is no longer running.
type StaleRank struct {
	Assessment
	Segments []string // shared-memory segments it holds
	// GPUMemory is what NVML says it holds (filled by gpu.FindStaleRanks).
	GPUMemory uint64
}

// FindStaleRanks returns the ranks ncclwiz may offer to end: launcher gone,
// at least DefaultMinAge old, no progress over a DefaultInterval sample.
func FindStaleRanks(ctx context.Context, h *host.Host) ([]StaleRank, error) {
	as, err := Assess(ctx, h, Options{})
	if err != nil {
		return nil, err
	}
	return staleOf(ctx, h, as), nil
}

func staleOf(ctx context.Context, h *host.Host, as []Assessment) []StaleRank {
	var out []StaleRank
	for _, a := range as {
		if a.Verdict == Stale {
			out = append(out, StaleRank{Assessment: a})
		}
	}
	if len(out) == 0 {
		return nil
	}
	if inv, err := shm.Scan(ctx, h); err == nil {
		for i := range out {
			for _, s := range inv.Segments {
				for _, hd := range s.Holders {
					if hd.PID == out[i].PID {
						out[i].Segments = append(out[i].Segments, s.Name)
					}
				}
			}
		}
	}
	return out
}

func evidence(a Assessment) map[string]any {
	e := map[string]any{"pid": a.PID, "ppid": a.PPID, "uid": a.UID(), "state": a.State, "command": a.Command(),
		"age_seconds": int64(a.Age.Seconds()), "verdict": a.Verdict, "why": a.Why}
	if r := a.Rank(); r != "" {
		e["rank"] = r
	}
	if a.Parent != "" {
		e["parent"] = a.Parent
	}
	if len(a.NSpid) > 1 {
		e["nspid"] = a.NSpid
	}
	if a.Progress != nil {
		e["cpu_ms_in_sample"] = a.Progress.CPU().Milliseconds()
		e["sample_ms"] = a.Progress.Interval.Milliseconds()
	}
	return e
}

func run(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	as, err := Assess(ctx, h, Options{})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(as, func(i, j int) bool { return as[i].PID < as[j].PID })
	stale := staleOf(ctx, h, as)
	var all []map[string]any
	var busy, zombies []Assessment
	for _, a := range as {
		all = append(all, evidence(a))
		switch a.Verdict {
		case Busy:
			busy = append(busy, a)
		case Zombie:
			zombies = append(zombies, a)
		}
	}
	var fs []checks.Finding
	if len(stale) == 0 {
		f := checks.Finding{Severity: checks.OK, Title: "No leftover training processes"}
		if len(as) > 0 {
			f.Title = "No leftover training processes (" + units.Count(len(as), "rank") + " judged live or not provably left over)"
			f.Evidence = map[string]any{"ranks": all}
		}
		fs = append(fs, f)
	} else {
		var list []map[string]any
		mine := 0
		for _, s := range stale {
			if s.UID() == h.EUID || h.IsRoot() {
				mine++
			}
			e := evidence(s.Assessment)
			e["reason"] = s.Reason()
			if len(s.Segments) > 0 {
				e["shm_segments"] = s.Segments
			}
			list = append(list, e)
		}
		f := checks.Finding{Severity: checks.Warn,
			Title: units.Count(len(stale), "leftover rank") + " from a job that is no longer running",
			Detail: "These processes were started as ranks of a distributed job by a launcher that is gone (they now belong to an init), " +
				"they are older than " + DefaultMinAge.String() + " and used no CPU over a " + DefaultInterval.String() + " sample. " +
				"They can keep GPU memory, shared-memory segments and the master port busy, so the next run fails or hangs. " +
				"ncclwiz can end them by PID (SIGTERM first; SIGKILL only if you agree), judging each again right before.",
			Evidence: map[string]any{"stale_ranks": list, "ranks": all}, Guide: "stale-ranks"}
		if mine > 0 {
			f.Fixes = []string{"proc.stale"}
		}
		fs = append(fs, f)
	}
	for _, a := range busy {
		fs = append(fs, checks.Finding{Severity: checks.Info,
			Title: fmt.Sprintf("Rank pid %d lost its launcher but is still working", a.PID),
			Detail: "Its launcher is gone, yet it made progress while ncclwiz watched (CPU time, new threads or I/O wait), so ncclwiz will not offer to end it. " +
				"A rank whose peers are gone can also spin in NCCL without getting anywhere: read its log before deciding anything yourself.",
			Evidence: map[string]any{"rank": evidence(a)}, Guide: "stale-ranks"})
	}
	if len(zombies) > 0 {
		var list []map[string]any
		for _, a := range zombies {
			list = append(list, evidence(a))
		}
		fs = append(fs, checks.Finding{Severity: checks.Info,
			Title:    units.Count(len(zombies), "exited rank") + " not yet reaped by its parent",
			Detail:   "A zombie holds no memory and cannot be ended; its parent must collect it (or exit, so that init does).",
			Evidence: map[string]any{"zombie_ranks": list}, Guide: "stale-ranks"})
	}
	return fs, nil
}

// notRanks are programs that inherit a rank's environment when a user
// starts them from a rank (a shell, tmux or an editor opened from a
// training script, a debugger's shell) but are never ranks themselves:
// they are never judged leftovers and never signalled.
var notRanks = map[string]string{
	"sh": "a shell", "bash": "a shell", "dash": "a shell", "zsh": "a shell", "fish": "a shell", "ksh": "a shell",
	"mksh": "a shell", "tcsh": "a shell", "csh": "a shell", "ash": "a shell", "busybox": "a shell", "nu": "a shell",
	"tmux": "a terminal multiplexer", "tmux: server": "a terminal multiplexer", "tmux: client": "a terminal multiplexer",
	"screen": "a terminal multiplexer", "SCREEN": "a terminal multiplexer", "zellij": "a terminal multiplexer",
	"byobu": "a terminal multiplexer", "abduco": "a terminal multiplexer", "dtach": "a terminal multiplexer",
	"vi": "an editor", "vim": "an editor", "nvim": "an editor", "view": "an editor", "emacs": "an editor",
	"nano": "an editor", "micro": "an editor", "hx": "an editor", "helix": "an editor", "kak": "an editor",
	"joe": "an editor", "mg": "an editor", "ed": "an editor", "code": "an editor", "less": "a pager", "more": "a pager",
	"ssh": "an ssh client", "sshd": "an ssh server", "mosh-server": "a terminal server", "sudo": "sudo", "su": "su",
}

// NeverARank says what p is when it is a shell, multiplexer, editor or
// pager (by its name or its program's), else "".
func NeverARank(p proctab.Process) string {
	names := []string{p.Comm}
	if len(p.Cmdline) > 0 {
		arg0 := p.Cmdline[0]
		if i := strings.LastIndexByte(arg0, '/'); i >= 0 {
			arg0 = arg0[i+1:]
		}
		names = append(names, strings.TrimPrefix(arg0, "-")) // a login shell's argv[0] is "-bash"
	}
	for _, n := range names {
		if what, ok := notRanks[n]; ok {
			return what
		}
		if strings.HasPrefix(n, "tmux") {
			return "a terminal multiplexer"
		}
	}
	return ""
}
