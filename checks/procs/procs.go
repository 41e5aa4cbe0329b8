// Package procs reads the process table through the host seam and finds
// leftover training ranks: processes of a distributed job whose launcher is
// gone or that are zombies. It holds the proc.ranks check; the proc.stale
// fix ends what it finds, by PID.
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
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/textsafe"
)

// Checks returns proc.ranks.
func Checks() []checks.Check {
	return []checks.Check{{ID: "proc.ranks", Title: "Leftover training processes", Category: "proc", Tier: checks.Quick, Run: run}}
}

// Proc is what ncclwiz knows about one process.
type Proc struct {
	PID, PPID int
	UID       int
	State     string // R, S, D, Z, T …
	Comm      string
	Cmdline   []string
	// Env holds the distributed-training variables, when readable.
	Env map[string]string
	// StartTicks is field 22 of /proc/PID/stat: it tells a PID reused by a
	// new process apart from the one that was judged.
	StartTicks uint64
	Age        time.Duration
}

// Command returns the command line, sanitised and shortened for display.
func (p Proc) Command() string {
	s := strings.Join(p.Cmdline, " ")
	if s == "" {
		s = "[" + p.Comm + "]"
	}
	s = textsafe.Clean(s)
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

var rankEnv = []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
	"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "ACCELERATE_MIXED_PRECISION", "CUDA_VISIBLE_DEVICES"}

// Read returns one process, or an error if it vanished.
func Read(h *host.Host, pid int) (Proc, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := h.ReadFile(dir + "/stat")
	if err != nil {
		return Proc{}, err
	}
	p, err := parseStat(b)
	if err != nil {
		return Proc{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	if st, err := h.ReadFile(dir + "/status"); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					p.UID, _ = strconv.Atoi(f[0])
				}
			}
		}
	}
	if c, err := h.ReadFile(dir + "/cmdline"); err == nil {
		for _, a := range strings.Split(strings.TrimRight(string(c), "\x00"), "\x00") {
			if a != "" {
				p.Cmdline = append(p.Cmdline, a)
			}
		}
	}
	if e, err := h.ReadFile(dir + "/environ"); err == nil {
		p.Env = map[string]string{}
		for _, kv := range strings.Split(string(e), "\x00") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			for _, want := range rankEnv {
				if k == want {
					p.Env[k] = v
				}
			}
		}
	}
	if up, err := h.ReadFile("/proc/uptime"); err == nil {
		if f := strings.Fields(string(up)); len(f) > 0 {
			if secs, err := strconv.ParseFloat(f[0], 64); err == nil && p.StartTicks > 0 {
				// USER_HZ is 100 on every Linux architecture ncclwiz runs on.
				started := float64(p.StartTicks) / 100
				if secs > started {
					p.Age = time.Duration((secs - started) * float64(time.Second))
				}
			}
		}
	}
	return p, nil
}

// parseStat reads /proc/PID/stat; comm may contain spaces and parentheses,
// so fields are counted from the last ')'.
func parseStat(b []byte) (Proc, error) {
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return Proc{}, fmt.Errorf("malformed stat")
	}
	p := Proc{Comm: s[open+1 : close]}
	p.PID, _ = strconv.Atoi(strings.TrimSpace(s[:open]))
	f := strings.Fields(s[close+1:])
	if len(f) < 20 {
		return Proc{}, fmt.Errorf("short stat")
	}
	p.State = f[0]
	p.PPID, _ = strconv.Atoi(f[1])
	p.StartTicks, _ = strconv.ParseUint(f[19], 10, 64)
	return p, nil
}

// List reads every process.
func List(ctx context.Context, h *host.Host) ([]Proc, error) {
	ents, err := h.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if p, err := Read(h, pid); err == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// IsRank reports whether p is a rank of a distributed PyTorch job (not the
// launcher itself).
func IsRank(p Proc) bool {
	if _, ok := p.Env["RANK"]; ok {
		return true
	}
	if _, ok := p.Env["LOCAL_RANK"]; ok {
		return true
	}
	return false
}

// IsLauncher reports whether p is torchrun, accelerate or deepspeed.
func IsLauncher(p Proc) bool {
	cmd := strings.Join(p.Cmdline, " ")
	for _, l := range []string{"torchrun", "torch.distributed.run", "torch.distributed.launch", "accelerate launch", "accelerate-launch", "deepspeed", "/deepspeed "} {
		if strings.Contains(cmd, l) {
			return true
		}
	}
	return false
}

// StaleRank is a rank left over from a job that is no longer running.
type StaleRank struct {
	Proc
	Reason   string
	Segments []string // shared-memory segments it holds
	// GPUMemory is what NVML says it holds (filled by gpu.FindStaleRanks).
	GPUMemory uint64
}

// FindStaleRanks returns ranks that are zombies or whose launcher is gone
// (reparented to PID 1 or a subreaper while RANK/LOCAL_RANK say they were
// started by one). Processes whose environment is unreadable (other users
// without root) cannot be judged and are not listed.
func FindStaleRanks(ctx context.Context, h *host.Host) ([]StaleRank, error) {
	ps, err := List(ctx, h)
	if err != nil {
		return nil, err
	}
	byPID := map[int]Proc{}
	for _, p := range ps {
		byPID[p.PID] = p
	}
	var out []StaleRank
	for _, p := range ps {
		if !IsRank(p) && !(p.State == "Z" && looksLikeTraining(p)) {
			continue
		}
		parent, hasParent := byPID[p.PPID]
		var reason string
		switch {
		case p.State == "Z":
			reason = "zombie: exited, but its parent never collected it"
		case p.PPID == 1 || !hasParent:
			reason = "its launcher is gone (re-parented to PID 1)"
		case !IsLauncher(parent) && !IsRank(parent) && parentIsReaper(parent):
			reason = fmt.Sprintf("its launcher is gone (re-parented to %s, pid %d)", parent.Comm, parent.PID)
		default:
			continue
		}
		out = append(out, StaleRank{Proc: p, Reason: reason})
	}
	if len(out) > 0 {
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
	}
	return out, nil
}

func looksLikeTraining(p Proc) bool {
	c := strings.ToLower(p.Comm)
	return strings.Contains(c, "python") || strings.Contains(c, "pt_main_thread") || strings.Contains(c, "torchrun")
}

// parentIsReaper reports whether the parent is a process that adopts
// orphans (systemd --user, tini) rather than one that started the rank. A
// shell is not: running a rank by hand from bash is normal.
func parentIsReaper(p Proc) bool {
	switch p.Comm {
	case "systemd", "init", "tini", "dumb-init":
		return true
	}
	return strings.HasPrefix(p.Comm, "containerd-shim")
}

func run(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	stale, err := FindStaleRanks(ctx, h)
	if err != nil {
		return nil, err
	}
	if len(stale) == 0 {
		return []checks.Finding{{Severity: checks.OK, Title: "No leftover training processes"}}, nil
	}
	var list []map[string]any
	mine := 0
	for _, s := range stale {
		if s.UID == h.EUID || h.IsRoot() {
			mine++
		}
		e := map[string]any{"pid": s.PID, "ppid": s.PPID, "uid": s.UID, "state": s.State, "command": s.Command(),
			"age_seconds": int64(s.Age.Seconds()), "reason": s.Reason}
		if r, ok := s.Env["RANK"]; ok {
			e["rank"] = r
		}
		if len(s.Segments) > 0 {
			e["shm_segments"] = s.Segments
		}
		list = append(list, e)
	}
	f := checks.Finding{Severity: checks.Warn,
		Title: units.Count(len(stale), "leftover rank") + " from a job that is no longer running",
		Detail: "These processes were started as ranks of a distributed job (RANK/LOCAL_RANK in their environment) but their launcher is gone or they are zombies. " +
			"They can keep GPU memory, shared-memory segments and the master port busy, so the next run fails or hangs. " +
			"ncclwiz can end them by PID (SIGTERM first; SIGKILL only if you agree).",
		Evidence: map[string]any{"stale_ranks": list}, Guide: "stale-ranks"}
	if mine > 0 {
		f.Fixes = []string{"proc.stale"}
	}
	return []checks.Finding{f}, nil
}
