// Package hang looks at a distributed job that is still running but makes
// no progress: it finds the job's ranks on this machine, samples what each
// is doing, asks NCCL's RAS service and reads PyTorch's flight-recorder
// dumps, and names the suspect rank with the evidence from each source.
// Nothing here signals, attaches to or changes a process.
package hang

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// EnvKeys are the variables read from each process: the rank markers of
// checks/procs, the job's identity under MPI, PMIx and Slurm, and where
// the job's RAS service and flight-recorder dumps are.
var EnvKeys = append(append([]string(nil), procs.EnvKeys...),
	"OMPI_COMM_WORLD_SIZE", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_SIZE",
	"SLURM_PROCID", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NTASKS", "SLURM_CLUSTER_NAME",
	"NCCL_RAS_ADDR", "NCCL_RAS_ENABLE",
	"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_FR_DUMP_TEMP_FILE",
	"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT",
	"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "TORCH_DISTRIBUTED_DEBUG")

// Job is one distributed job as this machine shows it: its launchers
// (when any runs here) and its ranks.
type Job struct {
	// Launcher is the first of Launchers, nil when no launcher of the ranks
	// runs here (started by a scheduler, or the launcher is gone).
	Launcher *proctab.Process
	// Launchers are torchrun, mpirun … processes above the ranks, or the
	// Python parent that started them (torch.multiprocessing.spawn, a
	// custom subprocess launcher); two when two launchers of one job run
	// here (torchrun --nnodes 2 on one machine).
	Launchers []proctab.Process
	Ranks     []proctab.Process
	// Numbers maps each rank's PID to its global rank, NumberFrom to how
	// it is known: the variable (RANK, OMPI_COMM_WORLD_RANK …), or "start
	// order" for ranks whose rank is an argument (mp.spawn) or whose
	// environment cannot be read.
	Numbers    map[int]int
	NumberFrom map[int]string
	// Orphaned says why the launcher is known to be gone (the ranks were
	// re-parented to an init), "" otherwise.
	Orphaned string
	// Age is how long ago the oldest process of the job started.
	Age time.Duration
	// StartTicks is the oldest start (ticks after boot), for comparing
	// with the time a dump file was written.
	StartTicks uint64
	// ancestors are every process above a rank; below, the ranks' own
	// children (data-loader workers): --pid may name any of them.
	ancestors, below map[int]bool
}

// ID names the job for the user: the launcher's PID, or the first rank's.
func (j Job) ID() int {
	if j.Launcher != nil {
		return j.Launcher.PID
	}
	if len(j.Ranks) == 0 {
		return 0
	}
	return j.Ranks[0].PID
}

// Command is the launcher's command line, or the first rank's.
func (j Job) Command() string {
	if j.Launcher != nil {
		return j.Launcher.Command()
	}
	if len(j.Ranks) == 0 {
		return ""
	}
	return j.Ranks[0].Command()
}

// Env returns the first value of key set in any rank's environment.
func (j Job) Env(key string) string {
	for _, r := range j.Ranks {
		if v, ok := r.Env[key]; ok && v != "" {
			return v
		}
	}
	return ""
}

// WorldSize is the job's world size from the ranks' environment (torchrun,
// Open MPI, PMI, Slurm), or "".
func (j Job) WorldSize() string {
	for _, k := range []string{"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"} {
		if v := j.Env(k); v != "" {
			return v
		}
	}
	return ""
}

// SlurmStep is the ranks' Slurm job and step ("JOBID.STEPID", from
// SLURM_JOB_ID and SLURM_STEP_ID), or "".
func (j Job) SlurmStep() string {
	id, step := j.Env("SLURM_JOB_ID"), j.Env("SLURM_STEP_ID")
	if id == "" || step == "" {
		return ""
	}
	return id + "." + step
}

// SlurmJobID is the ranks' SLURM_JOB_ID, or "".
func (j Job) SlurmJobID() string { return j.Env("SLURM_JOB_ID") }

// stepDaemon: Slurm's slurmstepd. It is the launcher of an srun step's
// ranks, but one that started no rank runs a batch script or a step of
// other programs: it never waits in a rendezvous.
func stepDaemon(p proctab.Process) bool { return p.Comm == "slurmstepd" }

// Number returns the global rank of p (a rank of j), or -1.
func (j Job) Number(p proctab.Process) int {
	if n, ok := j.Numbers[p.PID]; ok {
		return n
	}
	return RankOf(p)
}

// rankVars are the variables that carry a process's global rank.
var rankVars = []string{"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}

// RankOf returns the global rank in p's environment (RANK or the MPI,
// PMIx or Slurm equivalent), or -1.
func RankOf(p proctab.Process) int {
	n, _ := rankVar(p)
	return n
}

func rankVar(p proctab.Process) (int, string) {
	for _, k := range rankVars {
		if v, ok := p.Env[k]; ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return n, k
			}
		}
	}
	return -1, ""
}

// maxDepth bounds the walk up the process tree (a corrupt table must not loop).
const maxDepth = 64

// launcherOf returns the nearest ancestor of p that is a launcher.
func launcherOf(t *proctab.Table, p proctab.Process) (proctab.Process, bool) {
	seen := map[int]bool{p.PID: true}
	for cur, i := p, 0; i < maxDepth; i++ {
		parent, ok := t.Lookup(cur.PPID)
		if !ok || seen[parent.PID] {
			return proctab.Process{}, false
		}
		seen[parent.PID] = true
		if procs.IsLauncher(parent) && !procs.IsRank(parent) {
			return parent, true
		}
		cur = parent
	}
	return proctab.Process{}, false
}

// isPython reports whether p runs a Python interpreter.
func isPython(p proctab.Process) bool {
	names := []string{p.Comm}
	if len(p.Cmdline) > 0 {
		names = append(names, path.Base(p.Cmdline[0]))
	}
	for _, n := range names {
		if strings.HasPrefix(n, "python") || n == "pt_main_thread" {
			return true
		}
	}
	return false
}

// isSpawnChild: a torch.multiprocessing.spawn (or multiprocessing "spawn")
// child, whose rank is an argument: its command line is the spawn stub and
// its environment carries the rendezvous its parent set.
func isSpawnChild(p proctab.Process) bool {
	cmd := strings.Join(p.Cmdline, " ")
	if !strings.Contains(cmd, "multiprocessing.spawn import spawn_main") {
		return false
	}
	_, port := p.Env["MASTER_PORT"]
	return port
}

// kernelThread: no command line, a child of kthreadd (or kthreadd).
func kernelThread(p proctab.Process) bool {
	return len(p.Cmdline) == 0 && (p.PPID == 2 || p.PID == 2)
}

// rankCandidate says why p is a rank: a rank variable, the mp.spawn stub,
// or (its environment unreadable) a non-launcher child of a launcher.
func rankCandidate(t *proctab.Table, p proctab.Process) bool {
	if (t.Self > 0 && p.PID == t.Self) || p.Exited() || kernelThread(p) || procs.NeverARank(p) != "" {
		return false
	}
	if procs.IsRank(p) || isSpawnChild(p) {
		return true
	}
	if _, n := rankVar(p); n != "" {
		return true
	}
	if p.EnvReadable || procs.IsLauncher(p) {
		return false
	}
	parent, ok := t.Lookup(p.PPID)
	return ok && procs.IsLauncher(parent)
}

// loopback addresses are local to a network namespace: two containers may
// both use 127.0.0.1:29500 for different jobs.
func loopback(addr string) bool {
	return addr == "" || addr == "localhost" || strings.HasPrefix(addr, "127.") || addr == "::1"
}

// scope is what makes an address unique: its PID namespace (a proxy for
// the network namespace) when it is a loopback address.
func scope(addr string, p proctab.Process) string {
	if loopback(addr) {
		return p.PIDNS
	}
	return ""
}

// rdzvFlag returns the value of torchrun's --rdzv_NAME / --rdzv-NAME flag
// (as "--flag value" or "--flag=value"), "" when absent; torchrun's
// default rendezvous id is "none".
func rdzvFlag(argv []string, name string) string {
	for i, a := range argv {
		for _, f := range []string{"--rdzv_" + name, "--rdzv-" + name} {
			if a == f && i+1 < len(argv) {
				return argv[i+1]
			}
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				return v
			}
		}
	}
	if name == "id" {
		return "none"
	}
	return ""
}

// jobKeys are the identities that put ranks in one job: the launcher above
// them, the rendezvous (MASTER_ADDR:MASTER_PORT), the MPI, PMIx or Slurm
// job, and — for ranks that carry none of these — their common parent.
//
// Two jobs may share a rendezvous address over time: the orphans of a job
// whose launcher died and a new run on the default port. So ranks under
// a live launcher join others by their address only with an explicit run
// id (TORCHELASTIC_RUN_ID other than torchrun's default "none"), and
// launchers join by the --rdzv_endpoint and --rdzv_id of their command
// lines (two launchers of one job on one machine).
func jobKeys(t *proctab.Table, p proctab.Process, launcher *proctab.Process) []string {
	var keys []string
	if launcher != nil {
		keys = append(keys, "L"+strconv.Itoa(launcher.PID))
		if ep := rdzvFlag(launcher.Cmdline, "endpoint"); ep != "" {
			host, _, _ := strings.Cut(ep, ":")
			keys = append(keys, "E"+ep+"/"+rdzvFlag(launcher.Cmdline, "id")+"/"+scope(host, p))
		}
	}
	runID := p.Env["TORCHELASTIC_RUN_ID"]
	if port := p.Env["MASTER_PORT"]; port != "" && (launcher == nil || (runID != "" && runID != "none")) {
		addr := p.Env["MASTER_ADDR"]
		keys = append(keys, "R"+addr+":"+port+"/"+runID+"/"+scope(addr, p))
	}
	if id := p.Env["OMPI_MCA_ess_base_jobid"]; id != "" {
		keys = append(keys, "M"+id+"/"+p.PIDNS)
	}
	if ns := p.Env["PMIX_NAMESPACE"]; ns != "" {
		keys = append(keys, "X"+ns+"/"+p.PIDNS)
	}
	if id := p.Env["SLURM_JOB_ID"]; id != "" && p.Env["SLURM_STEP_ID"] != "" {
		// Job ids are unique within a cluster only: two clusters' job 1
		// may run on one machine.
		keys = append(keys, "S"+p.Env["SLURM_CLUSTER_NAME"]+"/"+id+"."+p.Env["SLURM_STEP_ID"])
	}
	if parent, ok := t.Lookup(p.PPID); ok && p.PPID > 1 && !procs.IsReaper(t, parent) && (len(keys) == 0 || RankOf(p) < 0) {
		keys = append(keys, "P"+strconv.Itoa(p.PPID))
	}
	return keys
}

// FindJobs groups the ranks of the table into jobs: ranks under the same
// launcher, at the same rendezvous, in the same MPI/PMIx/Slurm job, or
// (without any of these) children of one parent form a job. A rank's own
// child (a data-loader worker carries RANK too) belongs to its rank. A
// launcher that has started no rank yet (torchrun waiting in the
// rendezvous for other nodes) is a job without ranks. Jobs come oldest
// first.
func FindJobs(t *proctab.Table) []Job {
	cand := map[int]bool{}
	for _, p := range t.All() {
		if rankCandidate(t, p) {
			cand[p.PID] = true
		}
	}
	// Union-find over the ranks by their identities.
	up := map[int]int{}
	find := func(x int) int {
		for up[x] != x {
			up[x] = up[up[x]]
			x = up[x]
		}
		return x
	}
	first := map[string]int{}
	launchers := map[int][]proctab.Process{}
	var ranks []proctab.Process
	below := map[int]int{} // a rank's child → the rank
	for _, p := range t.All() {
		if !cand[p.PID] {
			continue
		}
		if cand[p.PPID] {
			below[p.PID] = p.PPID
			continue
		}
		ranks = append(ranks, p)
		up[p.PID] = p.PID
		var lp *proctab.Process
		if l, ok := launcherOf(t, p); ok {
			lp = &l
			launchers[p.PID] = append(launchers[p.PID], l)
		} else if parent, ok := t.Lookup(p.PPID); ok && isPython(parent) && !procs.IsReaper(t, parent) && !cand[parent.PID] {
			// The Python parent that started it: mp.spawn, a custom launcher.
			lp = &parent
			launchers[p.PID] = append(launchers[p.PID], parent)
		}
		for _, k := range jobKeys(t, p, lp) {
			if f, ok := first[k]; ok {
				up[find(p.PID)] = find(f)
			} else {
				first[k] = p.PID
			}
		}
	}
	byRoot := map[int]*Job{}
	var roots []int
	for _, p := range ranks {
		r := find(p.PID)
		j, ok := byRoot[r]
		if !ok {
			j = &Job{Numbers: map[int]int{}, NumberFrom: map[int]string{}, ancestors: map[int]bool{}, below: map[int]bool{}}
			byRoot[r] = j
			roots = append(roots, r)
		}
		j.Ranks = append(j.Ranks, p)
		for _, l := range launchers[p.PID] {
			dup := false
			for _, have := range j.Launchers {
				dup = dup || have.PID == l.PID
			}
			if !dup {
				j.Launchers = append(j.Launchers, l)
			}
		}
		seen := map[int]bool{p.PID: true}
		for cur, i := p, 0; i < maxDepth; i++ {
			parent, ok := t.Lookup(cur.PPID)
			if !ok || seen[parent.PID] {
				break
			}
			seen[parent.PID] = true
			j.ancestors[parent.PID] = true
			cur = parent
		}
	}
	for child, parent := range below {
		rank := parent
		for i := 0; i < maxDepth && below[rank] != 0; i++ {
			rank = below[rank] // a worker's own child
		}
		if j := byRoot[find(rank)]; j != nil && up[rank] != 0 {
			j.below[child] = true
		}
	}
	jobs := make([]Job, 0, len(roots)+1)
	inJob := map[int]bool{}
	for _, r := range roots {
		j := byRoot[r]
		number(t, j)
		for _, l := range j.Launchers {
			inJob[l.PID] = true
		}
		for a := range j.ancestors {
			inJob[a] = true
		}
		j.Orphaned = orphaned(t, *j)
		finish(t, j)
		jobs = append(jobs, *j)
	}
	// Launchers that have started no rank for a minute: waiting in the
	// rendezvous (a younger one is still starting: importing torch takes
	// seconds on a loaded machine).
	for _, p := range t.All() {
		if inJob[p.PID] || cand[p.PID] || p.Exited() || !procs.IsLauncher(p) || stepDaemon(p) || (t.Self > 0 && p.PID == t.Self) || t.Age(p) < launcherGrace {
			continue
		}
		if l, ok := launcherOf(t, p); ok && (inJob[l.PID] || procs.IsLauncher(l)) {
			continue // a launcher's helper (orted under mpirun), counted with it
		}
		j := &Job{Launchers: []proctab.Process{p}, Numbers: map[int]int{}, NumberFrom: map[int]string{}, ancestors: map[int]bool{}, below: map[int]bool{}}
		for _, d := range t.Descendants(p.PID) {
			inJob[d.PID] = true
		}
		finish(t, j)
		jobs = append(jobs, *j)
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].StartTicks < jobs[b].StartTicks })
	return jobs
}

// number gives each rank its global rank: from its environment, else by
// start order among the ranks of the same parent (mp.spawn starts rank 0
// first; torchrun its local ranks in order).
func number(t *proctab.Table, j *Job) {
	byParent := map[int][]proctab.Process{}
	for _, p := range j.Ranks {
		if n, from := rankVar(p); from != "" {
			j.Numbers[p.PID], j.NumberFrom[p.PID] = n, from
			continue
		}
		byParent[p.PPID] = append(byParent[p.PPID], p)
	}
	for _, sib := range byParent {
		sort.Slice(sib, func(a, b int) bool {
			if sib[a].StartTicks != sib[b].StartTicks {
				return sib[a].StartTicks < sib[b].StartTicks
			}
			return sib[a].PID < sib[b].PID
		})
		for i, p := range sib {
			j.Numbers[p.PID], j.NumberFrom[p.PID] = i, "start order"
		}
	}
	sort.SliceStable(j.Ranks, func(a, b int) bool {
		ra, rb := j.Numbers[j.Ranks[a].PID], j.Numbers[j.Ranks[b].PID]
		if ra != rb {
			return ra < rb
		}
		return j.Ranks[a].PID < j.Ranks[b].PID
	})
}

// orphaned says why the job's launcher is known to be gone: no launcher
// runs above any rank, and a rank's parent is now an init or subreaper
// while its environment names the launcher that started it.
func orphaned(t *proctab.Table, j Job) string {
	if len(j.Launchers) > 0 {
		return ""
	}
	for _, p := range j.Ranks {
		parent, ok := t.Lookup(p.PPID)
		if !ok || !procs.IsReaper(t, parent) || p.IsNamespaceInit() {
			continue
		}
		if marker, launcher, ok := procs.LaunchedBy(p); ok {
			return fmt.Sprintf("the launcher is gone: %s started the ranks (%s is set) but their parent is now %s (pid %d)", launcher, marker, parent.Comm, parent.PID)
		}
	}
	return ""
}

func finish(t *proctab.Table, j *Job) {
	if len(j.Launchers) > 0 {
		sort.SliceStable(j.Launchers, func(a, b int) bool { return j.Launchers[a].StartTicks < j.Launchers[b].StartTicks })
		l := j.Launchers[0]
		j.Launcher = &l
	}
	var oldest *proctab.Process
	for i := range j.Ranks {
		if oldest == nil || j.Ranks[i].StartTicks < oldest.StartTicks {
			oldest = &j.Ranks[i]
		}
	}
	for i := range j.Launchers {
		if oldest == nil || j.Launchers[i].StartTicks < oldest.StartTicks {
			oldest = &j.Launchers[i]
		}
	}
	if oldest != nil {
		j.StartTicks = oldest.StartTicks
		j.Age = t.Age(*oldest)
	}
}

// PickError says that no job matches: none runs, or the PID names none.
type PickError struct{ Msg string }

func (e PickError) Error() string { return e.Msg }

// launcherGrace is how long a launcher may run without ranks before it is
// reported as a job that waits in its rendezvous.
const launcherGrace = time.Minute

// ErrSeveralJobs is returned by Pick when the user must choose.
type ErrSeveralJobs struct{ Jobs []Job }

func (e ErrSeveralJobs) Error() string {
	return fmt.Sprintf("%d distributed jobs run on this machine; choose one with --pid (a launcher's or any rank's PID, or a parent of the ranks)", len(e.Jobs))
}

// Pick returns the job that pid names — a launcher, a rank, any ancestor
// of the ranks (a custom launcher, a shell script, the container's init)
// or a rank's child — or the only job when pid is 0. An ancestor of
// several jobs asks the user to choose among those.
func Pick(jobs []Job, pid int) (Job, error) {
	if pid == 0 {
		switch len(jobs) {
		case 0:
			return Job{}, PickError{"no distributed job found: no process on this machine has RANK, LOCAL_RANK, an MPI or Slurm rank in its environment, or runs under a launcher (torchrun, mpirun …) or torch.multiprocessing.spawn"}
		case 1:
			return jobs[0], nil
		}
		return Job{}, ErrSeveralJobs{Jobs: jobs}
	}
	for _, j := range jobs {
		for _, l := range j.Launchers {
			if l.PID == pid {
				return j, nil
			}
		}
		for _, r := range j.Ranks {
			if r.PID == pid {
				return j, nil
			}
		}
	}
	var under []Job
	for _, j := range jobs {
		if j.ancestors[pid] || j.below[pid] {
			under = append(under, j)
		}
	}
	switch len(under) {
	case 0:
		return Job{}, PickError{fmt.Sprintf("pid %d is neither a launcher, a rank, a parent of the ranks nor a rank's child of a distributed job on this machine", pid)}
	case 1:
		return under[0], nil
	}
	return Job{}, ErrSeveralJobs{Jobs: under}
}

// Unreadable lists the processes whose environment this user cannot read
// (other users' processes, without root): ranks among them can only be
// found through their launcher. Kernel threads are left out.
func Unreadable(t *proctab.Table) []proctab.Process {
	var out []proctab.Process
	for _, p := range t.All() {
		if !p.EnvReadable && !kernelThread(p) && !p.Exited() && (t.Self == 0 || p.PID != t.Self) && !t.IsMachineInit(p) && !procs.IsReaper(t, p) {
			out = append(out, p)
		}
	}
	return out
}

// UnreadableNote says how many processes could not be read and names a
// few (Python and launchers first), or "" when every one could.
func UnreadableNote(ps []proctab.Process, root bool) string {
	if len(ps) == 0 {
		return ""
	}
	sorted := append([]proctab.Process(nil), ps...)
	score := func(p proctab.Process) int {
		switch {
		case procs.IsLauncher(p):
			return 0
		case isPython(p):
			return 1
		}
		return 2
	}
	sort.SliceStable(sorted, func(a, b int) bool { return score(sorted[a]) < score(sorted[b]) })
	var names []string
	for i, p := range sorted {
		if i == 5 {
			names = append(names, fmt.Sprintf("%d more", len(sorted)-5))
			break
		}
		names = append(names, fmt.Sprintf("pid %d %s", p.PID, p.Comm))
	}
	if root {
		return fmt.Sprintf("%s could not be read (%s): a rank among them is found only through its launcher",
			units.Count(len(ps), "process", "processes"), strings.Join(names, ", "))
	}
	return fmt.Sprintf("%s of other users could not be read (%s): run as root or as the job's user to see every rank's environment, wait channel and I/O",
		units.Count(len(ps), "process", "processes"), strings.Join(names, ", "))
}
