package hang

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// DefaultInterval is how long each rank is watched: long enough that a
// rank making progress writes (a log line, a collective's bytes) and a
// spinning one shows hundreds of CPU ticks, short enough to wait for.
const DefaultInterval = 3 * time.Second

// reads is how many times each rank's main thread is read during the
// interval: a verdict never rests on one read.
const reads = 20

// Output is one of a rank's stdout/stderr when it is a regular file.
type Output struct {
	FD   int    `json:"fd"`
	Path string `json:"path"`
	// Grew is true when the file offset moved between the samples.
	Grew  bool  `json:"grew"`
	Bytes int64 `json:"bytes_written"`
	// Shared is true when other ranks write to the same file (an inherited
	// descriptor, as under mp.spawn or mpirun): its growth is not this
	// rank's alone.
	Shared bool `json:"shared,omitempty"`
}

// GPUUse is what NVML says about the GPU a rank uses.
type GPUUse struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid,omitempty"`
	UtilPercent uint32 `json:"util_percent"`
	PowerWatts  uint32 `json:"power_watts"`
	PowerLimitW uint32 `json:"power_limit_watts,omitempty"`
	SMClockMHz  uint32 `json:"sm_clock_mhz"`
	MemoryBytes uint64 `json:"memory_bytes"`
}

// ThreadUse is one thread that used CPU during the sample.
type ThreadUse struct {
	TID    int     `json:"tid"`
	Name   string  `json:"name,omitempty"`
	CPUPct float64 `json:"cpu_percent"`
}

// RankSample is what one rank was doing over the sample.
type RankSample struct {
	PID int `json:"pid"`
	// NSPID is the PID inside the rank's own PID namespace (a container's).
	NSPID int `json:"ns_pid"`
	Rank  int `json:"rank"`
	// RankFrom says how the rank is known: RANK, OMPI_COMM_WORLD_RANK …,
	// or "start order" (mp.spawn passes the rank as an argument).
	RankFrom  string `json:"rank_from,omitempty"`
	LocalRank string `json:"local_rank,omitempty"`
	// States are the main thread's states in the first and last read;
	// StateCounts over every read (Reads of them).
	States      [2]string      `json:"states"`
	StateCounts map[string]int `json:"state_counts"`
	Reads       int            `json:"reads"`
	// Wchan is the main thread's most frequent wait channel while it
	// slept, WchanCounts all of them ("" when unreadable: another user's).
	Wchan       string         `json:"wchan,omitempty"`
	WchanCounts map[string]int `json:"wchan_counts,omitempty"`
	Gone        bool           `json:"gone"`
	// GoneAfter is when the rank was first seen gone, in seconds after
	// the sample started.
	GoneAfter float64 `json:"gone_after_seconds,omitempty"`
	// CPUPct is the whole process's CPU; MainCPUPct its main thread's.
	CPUPct     float64 `json:"cpu_percent"`
	MainCPUPct float64 `json:"main_cpu_percent"`
	Threads    int     `json:"threads"`
	// RanThreads used CPU during the sample; Busy are the other threads
	// that used at least 10%; Blocked were in D state.
	RanThreads int         `json:"ran_threads"`
	Busy       []ThreadUse `json:"busy_threads,omitempty"`
	Blocked    []int       `json:"blocked_threads,omitempty"`
	// IOKnown says the I/O accounting was readable; Wrote and MainWrote
	// are the bytes the process, and its main thread, passed to write
	// calls (log lines, a collective's sends) during the sample.
	IOKnown   bool     `json:"io_known"`
	Wrote     uint64   `json:"bytes_written"`
	MainWrote uint64   `json:"main_thread_bytes_written"`
	Outputs   []Output `json:"outputs,omitempty"`
	// Wakeups is how often the main thread went to sleep and woke again
	// (voluntary context switches) during the sample: a rank that polls
	// for its peers wakes many times a second, one that is blocked for
	// good does not wake at all. -1 when unreadable.
	Wakeups int64 `json:"main_wakeups"`
	// StoreSockets are the rank's connections to its rendezvous port and
	// their TCP states (CLOSE-WAIT: the store's end is closed); StoreKnown
	// says its sockets could be read, StoreHost that it listens on that
	// port (rank 0 hosts the store under mp.spawn, mpirun and custom
	// launchers).
	StoreSockets []string `json:"store_sockets,omitempty"`
	StoreKnown   bool     `json:"store_known,omitempty"`
	StoreHost    bool     `json:"store_host,omitempty"`
	// StoreConns counts its connections to that port.
	StoreConns int     `json:"store_connections,omitempty"`
	GPU        *GPUUse `json:"gpu,omitempty"`
	Command    string  `json:"command"`
	// interval is how long the rank was watched.
	interval time.Duration
}

// Stopped reports whether the rank's main thread was stopped (SIGSTOP, a
// debugger) in most reads.
func (r RankSample) Stopped() bool {
	n := r.StateCounts["T"] + r.StateCounts["t"]
	if r.Reads == 0 {
		return r.States[0] == "T" || r.States[0] == "t" || r.States[1] == "T" || r.States[1] == "t"
	}
	return 2*n > r.Reads
}

// Running reports whether the main thread was runnable (R) in at least
// half the reads: it computes or spins (on a loaded machine it may be
// waiting for a core, but it wants one).
func (r RankSample) Running() bool {
	return r.Reads > 0 && 2*r.StateCounts["R"] >= r.Reads
}

type fdPos struct {
	path string
	pos  int64
	ok   bool
}

// readFD returns the target and file offset of fd when it is a regular
// file. The offset (fdinfo "pos:") moves on every write, also with
// O_APPEND, and is read through /proc so it works for a container's files.
func readFD(h *host.Host, pid, fd int) fdPos {
	base := "/proc/" + strconv.Itoa(pid)
	target, err := h.Readlink(base + "/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "/dev/") {
		return fdPos{} // a terminal, pipe or socket: nothing to measure
	}
	b, err := h.ReadFile(base + "/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return fdPos{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "pos:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return fdPos{}
			}
			return fdPos{path: target, pos: n, ok: true}
		}
	}
	return fdPos{}
}

// snap is one full read of a rank: its threads, I/O and outputs.
type snap struct {
	ok      bool
	tasks   map[int]proctab.Task
	io, mio proctab.IO
	ioOK    bool
	fds     [2]fdPos
	vcs     int64 // the main thread's voluntary context switches, -1 unknown
}

func takeSnap(h *host.Host, pid int, start uint64) snap {
	p, err := proctab.ReadStat(h, pid)
	if err != nil || p.StartTicks != start || p.Exited() {
		return snap{}
	}
	s := snap{ok: true, tasks: map[int]proctab.Task{}}
	ts, _ := proctab.Tasks(h, pid)
	for _, t := range ts {
		s.tasks[t.TID] = t
	}
	if len(ts) == 0 { // no task directory (a fixture): the leader alone
		s.tasks[pid] = proctab.Task{TID: pid, State: p.State, CPUTicks: p.CPUTicks}
	}
	var err1, err2 error
	s.io, err1 = proctab.ReadIO(h, pid, 0)
	s.mio, err2 = proctab.ReadIO(h, pid, pid)
	s.ioOK = err1 == nil && err2 == nil
	for k, fd := range []int{1, 2} {
		s.fds[k] = readFD(h, pid, fd)
	}
	s.vcs = proctab.Wakeups(h, pid, pid)
	return s
}

// Sample watches each rank for interval: a full read at both ends
// (threads' CPU, I/O written, stdout/stderr offsets) and the main
// thread's state and wait channel read `reads` times in between; the GPU
// each rank uses through NVML at the end.
func Sample(ctx context.Context, h *host.Host, j Job, interval time.Duration) ([]RankSample, error) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	n := len(j.Ranks)
	out := make([]RankSample, n)
	first := make([]snap, n)
	pids := make([]int, n)
	began := time.Now()
	for i, r := range j.Ranks {
		pids[i] = r.PID
		out[i] = RankSample{PID: r.PID, NSPID: r.NSLocalPID(), Rank: j.Number(r), RankFrom: j.NumberFrom[r.PID],
			LocalRank: r.Env["LOCAL_RANK"], Command: r.Command(), StateCounts: map[string]int{}, WchanCounts: map[string]int{},
			Wakeups: -1, interval: interval}
		first[i] = takeSnap(h, r.PID, r.StartTicks)
		if !first[i].ok {
			out[i].Gone = true
		}
	}
	step := interval / reads
	for k := 0; k < reads; k++ {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("sample the ranks: %w", ctx.Err())
		case <-time.After(time.Until(began.Add(time.Duration(k+1) * step))):
		}
		for i, r := range j.Ranks {
			s := &out[i]
			if s.Gone {
				continue
			}
			p, err := proctab.ReadStat(h, r.PID)
			if err != nil || p.StartTicks != r.StartTicks || p.Exited() {
				s.Gone, s.GoneAfter = true, time.Since(began).Seconds()
				continue
			}
			if s.Reads == 0 {
				s.States[0] = p.State
			}
			s.States[1] = p.State
			s.Reads++
			s.StateCounts[p.State]++
			if p.State != "R" {
				if w := procs.ReadWchan(h, r.PID); w != "" {
					s.WchanCounts[w]++
				}
			}
		}
	}
	elapsed := time.Since(began)
	gpus := gpuUse(h, pids)
	for i, r := range j.Ranks {
		s := &out[i]
		last := takeSnap(h, r.PID, r.StartTicks)
		if s.Gone || !first[i].ok || !last.ok {
			if !s.Gone {
				s.Gone, s.GoneAfter = true, elapsed.Seconds()
			}
			continue
		}
		fill(h, s, first[i], last, elapsed)
		if g, ok := gpus[r.PID]; ok {
			s.GPU = &g
		}
	}
	markShared(out)
	return out, nil
}

// fill derives CPU, threads, I/O and output growth from two full reads.
func fill(h *host.Host, s *RankSample, a, b snap, elapsed time.Duration) {
	secs := elapsed.Seconds()
	pct := func(ticks uint64) float64 { return 100 * float64(ticks) / proctab.UserHZ / secs }
	var total uint64
	for tid, tb := range b.tasks {
		ta, seen := a.tasks[tid]
		d := tb.CPUTicks
		if seen {
			d = sub(tb.CPUTicks, ta.CPUTicks)
		}
		if d > 0 {
			s.RanThreads++
		}
		total += d
		if tid == s.PID {
			s.MainCPUPct = pct(d)
		} else if pct(d) >= 10 {
			s.Busy = append(s.Busy, ThreadUse{TID: tid, Name: threadName(h, s.PID, tid), CPUPct: pct(d)})
		}
		if tb.State == "D" || (seen && ta.State == "D") {
			s.Blocked = append(s.Blocked, tid)
		}
	}
	sort.Ints(s.Blocked)
	sort.Slice(s.Busy, func(x, y int) bool { return s.Busy[x].CPUPct > s.Busy[y].CPUPct })
	s.Threads = len(b.tasks)
	s.CPUPct = pct(total)
	if a.ioOK && b.ioOK {
		s.IOKnown = true
		s.Wrote, s.MainWrote = sub(b.io.WChar, a.io.WChar), sub(b.mio.WChar, a.mio.WChar)
	}
	for k, fd := range []int{1, 2} {
		x, y := a.fds[k], b.fds[k]
		if !x.ok || !y.ok || x.path != y.path {
			continue
		}
		if k == 1 && len(s.Outputs) == 1 && s.Outputs[0].Path == y.path {
			continue // 2>&1: one file
		}
		s.Outputs = append(s.Outputs, Output{FD: fd, Path: y.path, Grew: y.pos > x.pos, Bytes: max(y.pos-x.pos, 0)})
	}
	s.Wakeups = -1
	if a.vcs >= 0 && b.vcs >= a.vcs {
		s.Wakeups = b.vcs - a.vcs
	}
	if w := dominant(s.WchanCounts); w != "" {
		s.Wchan = w
	}
}

// markShared flags outputs that several ranks write to: one file
// description inherited by all (mp.spawn, mpirun, a redirected launcher),
// whose offset any of them moves.
func markShared(ss []RankSample) {
	users := map[string]int{}
	for _, s := range ss {
		seen := map[string]bool{}
		for _, o := range s.Outputs {
			if !seen[o.Path] {
				seen[o.Path] = true
				users[o.Path]++
			}
		}
	}
	for i := range ss {
		for k := range ss[i].Outputs {
			ss[i].Outputs[k].Shared = users[ss[i].Outputs[k].Path] > 1
		}
	}
}

func threadName(h *host.Host, pid, tid int) string {
	b, err := h.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// dominant returns the most frequent key (ties: the first by name).
func dominant(m map[string]int) string {
	best, n := "", 0
	for k, v := range m {
		if v > n || (v == n && k < best) {
			best, n = k, v
		}
	}
	return best
}

func sub(b, a uint64) uint64 {
	if b > a {
		return b - a
	}
	return 0
}
