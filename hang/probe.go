package hang

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// DefaultInterval is how far apart the two samples of each rank are: long
// enough that a rank spinning in an NCCL kernel or a busy-wait shows
// hundreds of CPU ticks, short enough to wait for.
const DefaultInterval = 3 * time.Second

// Output is one of a rank's stdout/stderr when it is a regular file.
type Output struct {
	FD   int    `json:"fd"`
	Path string `json:"path"`
	// Grew is true when the file offset moved between the samples: the
	// rank wrote to it.
	Grew  bool  `json:"grew"`
	Bytes int64 `json:"bytes_written"`
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

// RankSample is what one rank was doing over the sample.
type RankSample struct {
	PID int `json:"pid"`
	// NSPID is the PID inside the rank's own PID namespace (a container's).
	NSPID     int    `json:"ns_pid"`
	Rank      int    `json:"rank"`
	LocalRank string `json:"local_rank,omitempty"`
	// States are the process states in the first and second sample.
	States  [2]string `json:"states"`
	Wchan   string    `json:"wchan,omitempty"`
	Gone    bool      `json:"gone"`
	CPUPct  float64   `json:"cpu_percent"`
	Threads int       `json:"threads"`
	// RanThreads used CPU during the sample; Blocked were in D state.
	RanThreads int      `json:"ran_threads"`
	Blocked    []int    `json:"blocked_threads,omitempty"`
	Outputs    []Output `json:"outputs,omitempty"`
	GPU        *GPUUse  `json:"gpu,omitempty"`
	Command    string   `json:"command"`
}

// Stopped reports whether the rank was stopped (SIGSTOP, a debugger) in
// either sample.
func (r RankSample) Stopped() bool {
	for _, s := range r.States {
		if s == "T" || s == "t" {
			return true
		}
	}
	return false
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

func readWchan(h *host.Host, pid int) string {
	b, err := h.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if s == "0" {
		return "" // running, or hidden by kptr_restrict
	}
	return s
}

func readState(ctx context.Context, h *host.Host, pid int, start uint64) (string, bool) {
	p, err := proctab.ReadProcess(ctx, h, pid, proctab.Options{})
	if err != nil || p.StartTicks != start {
		return "", false
	}
	return p.State, true
}

// Sample reads each rank twice, interval apart: state, wait channel, CPU
// progress of every thread, growth of stdout/stderr and (through gpus,
// which may be nil) the GPU each rank uses.
func Sample(ctx context.Context, h *host.Host, j Job, interval time.Duration) ([]RankSample, error) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	pids := make([]int, len(j.Ranks))
	out := make([]RankSample, len(j.Ranks))
	before := make([][2]fdPos, len(j.Ranks))
	for i, r := range j.Ranks {
		pids[i] = r.PID
		out[i] = RankSample{PID: r.PID, NSPID: r.NSLocalPID(), Rank: RankOf(r), LocalRank: r.Env["LOCAL_RANK"], Command: r.Command()}
		out[i].States[0] = r.State
		if s, ok := readState(ctx, h, r.PID, r.StartTicks); ok {
			out[i].States[0] = s
		}
		for k, fd := range []int{1, 2} {
			before[i][k] = readFD(h, r.PID, fd)
		}
	}
	prog, err := proctab.Sample(ctx, h, pids, interval)
	if err != nil {
		return nil, fmt.Errorf("sample the ranks: %w", err)
	}
	gpus := gpuUse(h, pids)
	for i, r := range j.Ranks {
		s := &out[i]
		pr, ok := prog[r.PID]
		state, alive := readState(ctx, h, r.PID, r.StartTicks)
		if !ok || pr.Gone || !alive || state == "Z" || state == "X" {
			s.Gone = true
			s.States[1] = state
			continue
		}
		s.States[1] = state
		s.Wchan = readWchan(h, r.PID)
		s.CPUPct = 100 * pr.CPU().Seconds() / interval.Seconds()
		s.Threads, s.RanThreads, s.Blocked = pr.Threads, pr.RanThreads, pr.Blocked
		for k, fd := range []int{1, 2} {
			a := before[i][k]
			b := readFD(h, r.PID, fd)
			if !a.ok || !b.ok || a.path != b.path {
				continue
			}
			if k == 1 && len(s.Outputs) == 1 && s.Outputs[0].Path == b.path {
				continue // 2>&1: one file
			}
			s.Outputs = append(s.Outputs, Output{FD: fd, Path: b.path, Grew: b.pos > a.pos, Bytes: max(b.pos-a.pos, 0)})
		}
		if g, ok := gpus[r.PID]; ok {
			s.GPU = &g
		}
	}
	return out, nil
}
