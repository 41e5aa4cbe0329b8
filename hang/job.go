// Package hang looks at a distributed job that is still running but makes
// no progress: it finds the job's ranks on this machine, samples what each
// is doing, asks NCCL's RAS service and reads PyTorch's flight-recorder
// dumps, and names the suspect rank with the evidence from each source.
// Nothing here signals, attaches to or changes a process.
package hang

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// EnvKeys are the variables read from each process: the rank markers of
// checks/procs, and where the job's RAS service and flight-recorder dumps are.
var EnvKeys = append(append([]string(nil), procs.EnvKeys...),
	"NCCL_RAS_ADDR", "NCCL_RAS_ENABLE",
	"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_FR_DUMP_TEMP_FILE",
	"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT",
	"TORCH_NCCL_DEBUG_INFO_PIPE_FILE")

// Job is one distributed job as this machine shows it: the launcher (when
// one is running here) and the ranks below it.
type Job struct {
	// Launcher is nil when the ranks have no launcher on this machine
	// (started by a scheduler, or the launcher is gone).
	Launcher *proctab.Process
	Ranks    []proctab.Process
	// Age is how long ago the oldest process of the job started.
	Age time.Duration
	// StartTicks is the oldest start (ticks after boot), for comparing
	// with the time a dump file was written.
	StartTicks uint64
}

// ID names the job for the user: the launcher's PID, or the first rank's.
func (j Job) ID() int {
	if j.Launcher != nil {
		return j.Launcher.PID
	}
	return j.Ranks[0].PID
}

// Command is the launcher's command line, or the first rank's.
func (j Job) Command() string {
	if j.Launcher != nil {
		return j.Launcher.Command()
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

// RankOf returns the global rank of p (RANK or the MPI equivalent), or -1.
func RankOf(p proctab.Process) int {
	for _, k := range []string{"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"} {
		if v, ok := p.Env[k]; ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return n
			}
		}
	}
	return -1
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

// FindJobs groups the ranks of the table into jobs: ranks under the same
// launcher, or (without one) ranks that share a rendezvous address, run
// ID and PID namespace. A rank's own child (a data-loader worker carries
// RANK too) belongs to its rank, not to the job's list. Jobs come oldest
// first.
func FindJobs(t *proctab.Table) []Job {
	byKey := map[string]*Job{}
	var keys []string
	for _, p := range t.All() {
		if !procs.IsRank(p) || (t.Self > 0 && p.PID == t.Self) || p.Exited() {
			continue
		}
		if parent, ok := t.Lookup(p.PPID); ok && procs.IsRank(parent) && !parent.Exited() {
			continue
		}
		var key string
		l, hasL := launcherOf(t, p)
		if hasL {
			key = "L" + strconv.Itoa(l.PID)
		} else {
			key = fmt.Sprintf("E%s:%s/%s/%s", p.Env["MASTER_ADDR"], p.Env["MASTER_PORT"], p.Env["TORCHELASTIC_RUN_ID"], p.PIDNS)
		}
		j, ok := byKey[key]
		if !ok {
			j = &Job{}
			if hasL {
				lc := l
				j.Launcher = &lc
			}
			byKey[key] = j
			keys = append(keys, key)
		}
		j.Ranks = append(j.Ranks, p)
	}
	jobs := make([]Job, 0, len(keys))
	for _, k := range keys {
		j := byKey[k]
		sort.Slice(j.Ranks, func(a, b int) bool {
			ra, rb := RankOf(j.Ranks[a]), RankOf(j.Ranks[b])
			if ra != rb {
				return ra < rb
			}
			return j.Ranks[a].PID < j.Ranks[b].PID
		})
		oldest := j.Ranks[0]
		for _, r := range j.Ranks {
			if r.StartTicks < oldest.StartTicks {
				oldest = r
			}
		}
		if j.Launcher != nil && j.Launcher.StartTicks < oldest.StartTicks {
			oldest = *j.Launcher
		}
		j.StartTicks = oldest.StartTicks
		j.Age = t.Age(oldest)
		jobs = append(jobs, *j)
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].StartTicks < jobs[b].StartTicks })
	return jobs
}

// ErrSeveralJobs is returned by Pick when the user must choose.
type ErrSeveralJobs struct{ Jobs []Job }

func (e ErrSeveralJobs) Error() string {
	return fmt.Sprintf("%d distributed jobs run on this machine; choose one with --pid (the launcher's or any rank's PID)", len(e.Jobs))
}

// Pick returns the job that pid names (its launcher or any of its ranks),
// or the only job when pid is 0.
func Pick(jobs []Job, pid int) (Job, error) {
	if pid == 0 {
		switch len(jobs) {
		case 0:
			return Job{}, fmt.Errorf("no distributed job found: no process on this machine has RANK, LOCAL_RANK or an MPI rank in its environment")
		case 1:
			return jobs[0], nil
		}
		return Job{}, ErrSeveralJobs{Jobs: jobs}
	}
	for _, j := range jobs {
		if j.Launcher != nil && j.Launcher.PID == pid {
			return j, nil
		}
		for _, r := range j.Ranks {
			if r.PID == pid {
				return j, nil
			}
		}
	}
	return Job{}, fmt.Errorf("pid %d is neither a launcher nor a rank of a distributed job on this machine", pid)
}
