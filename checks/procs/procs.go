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
// mpirun and relatives.
func IsLauncher(p proctab.Process) bool {
	cmd := " " + strings.Join(p.Cmdline, " ") + " "
	for _, l := range []string{"torchrun", "torch.distributed.run", "torch.distributed.launch", "accelerate launch", "accelerate-launch",
		"deepspeed", "mpirun", "mpiexec", "orterun", "prterun", "hydra_pmi_proxy", "orted", "prted"} {
		if strings.Contains(cmd, l) {
			return true
		}
	}
	switch p.Comm {
	case "torchrun", "accelerate", "deepspeed", "mpirun", "mpiexec", "orterun", "prterun", "orted", "prted":
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

// Judge assesses every rank in the table. It samples CPU progress, through
// sample, only for ranks whose launcher is gone and that are old enough.
func Judge(t *proctab.Table, o Options, sample Sampler) ([]Assessment, error) {
	o = o.withDefaults()
	var out []Assessment
	var suspects []int
	for _, p := range t.All() {
		if !IsRank(p) || (p.PID == t.Self && t.Self > 0) {
			continue
		}
		if parent, ok := t.Lookup(p.PPID); ok && IsRank(parent) && !parent.Exited() {
			continue // a rank's own child (a data-loader worker) lives and dies with it
		}
		a := assess(t, p, o)
		if a.Verdict == Stale {
			suspects = append(suspects, p.PID)
		}
		out = append(out, a)
	}
	if len(suspects) > 0 {
		prog, err := sample(suspects)
		if err != nil {
			return nil, err
		}
		kept := out[:0]
		for _, a := range out {
			if a.Verdict == Stale {
				pr, ok := prog[a.PID]
				switch {
				case !ok || pr.Gone:
					continue // ended meanwhile: nothing to judge
				case pr.Live == 0 && pr.Threads > 0:
					a.Verdict = Zombie
					a.why("it has exited; only its parent (pid %d) can reap it", a.PPID)
				case pr.Progressed():
					a.Verdict = Busy
					a.why("but it is working: %s, so it is not offered for ending", pr)
				default:
					a.why("%s", pr)
				}
				a.Progress = &pr
			}
			kept = append(kept, a)
		}
		out = kept
	}
	return out, nil
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
	return Judge(t, o, func(pids []int) (map[int]proctab.Progress, error) {
		return proctab.Sample(ctx, h, pids, o.Interval)
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
