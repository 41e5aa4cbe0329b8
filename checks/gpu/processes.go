package gpu

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// StaleRank is a rank left over from a job that is no longer running.
type StaleRank = procs.StaleRank

// FindStaleRanks returns leftover ranks with the GPU memory NVML says they
// hold (zero when NVML is unavailable).
func FindStaleRanks(ctx context.Context, h *host.Host) ([]StaleRank, error) {
	rs, err := procs.FindStaleRanks(ctx, h)
	if err != nil {
		return nil, err
	}
	mem := map[int]uint64{}
	if s := Probe(ctx, h); s.OK() {
		for _, d := range s.Devices {
			for _, p := range d.Processes {
				mem[p.PID] += p.GPUMemory
			}
		}
	}
	for i := range rs {
		rs[i].GPUMemory = mem[rs[i].PID]
	}
	return rs, nil
}

// userName maps a uid through the host's /etc/passwd.
func userName(h *host.Host, uid int) string {
	if b, err := h.ReadFile("/etc/passwd"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, ":")
			if len(f) > 2 && f[2] == strconv.Itoa(uid) {
				return f[0]
			}
		}
	}
	return "uid " + strconv.Itoa(uid)
}

func runProcesses(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	s := Probe(ctx, h)
	if !s.OK() {
		return []checks.Finding{s.skippedFinding("GPU processes")}, nil
	}
	stale, _ := procs.FindStaleRanks(ctx, h)
	staleByPID := map[int]procs.StaleRank{}
	for _, r := range stale {
		staleByPID[r.PID] = r
	}
	var list []map[string]any
	total := 0
	var staleHolders []string
	var staleMem uint64
	ranksOnGPU := map[int][]int{}
	for _, d := range s.Devices {
		for _, p := range d.Processes {
			total++
			e := map[string]any{"gpu": d.Index, "pid": p.PID, "gpu_memory": p.GPUMemory}
			pr, err := proctab.ReadProcess(ctx, h, p.PID, proctab.Options{EnvKeys: procs.EnvKeys})
			if err != nil {
				e["visible"] = false // another PID namespace (a container) or gone
			} else {
				e["user"] = userName(h, pr.UID())
				e["command"] = pr.Command()
				e["age_seconds"] = int64(proctab.Age(h, pr).Seconds())
				if procs.IsRank(pr) {
					ranksOnGPU[d.Index] = append(ranksOnGPU[d.Index], p.PID)
				}
			}
			if r, ok := staleByPID[p.PID]; ok {
				e["stale"] = r.Reason()
				staleHolders = append(staleHolders, fmt.Sprintf("pid %d on GPU %d (%s)", p.PID, d.Index, units.Bytes(p.GPUMemory)))
				staleMem += p.GPUMemory
			}
			list = append(list, e)
		}
	}
	ev := map[string]any{"processes": list}
	head := checks.Finding{Severity: checks.OK, Title: fmt.Sprintf("%s on %s", units.Count(total, "compute process", "compute processes"), units.Count(len(s.Devices), "GPU")), Evidence: ev}
	if total == 0 {
		head.Title = "No processes on the GPUs"
	}
	fs := []checks.Finding{head}
	if len(staleHolders) > 0 {
		fs = append(fs, checks.Finding{Severity: checks.Warn,
			Title: fmt.Sprintf("%s %s of GPU memory", units.Count(len(staleHolders), "leftover rank of a dead job holds", "leftover ranks of a dead job hold"), units.Bytes(staleMem)),
			Detail: "Their launcher is gone, but they still hold GPU memory (" + strings.Join(staleHolders, ", ") + "). " +
				"The next job can fail with out-of-memory during NCCL init. ncclwiz can end them by PID.",
			Guide: "stale-ranks", Fixes: []string{"proc.stale"}})
	}
	var shared []string
	gpus := make([]int, 0, len(ranksOnGPU))
	for g := range ranksOnGPU {
		gpus = append(gpus, g)
	}
	sort.Ints(gpus)
	for _, g := range gpus {
		if pids := ranksOnGPU[g]; len(pids) > 1 {
			shared = append(shared, fmt.Sprintf("GPU %d: %d ranks", g, len(pids)))
		}
	}
	if len(shared) > 0 {
		fs = append(fs, checks.Finding{Severity: checks.Warn, Title: "Several ranks share one GPU (" + strings.Join(shared, ", ") + ")",
			Detail: "Each rank should drive its own GPU: call torch.cuda.set_device(local_rank) before init_process_group, and start no more processes per node than GPUs. NCCL refuses this with 'Duplicate GPU detected'.",
			Guide:  "device-mapping"})
	}
	return fs, nil
}
