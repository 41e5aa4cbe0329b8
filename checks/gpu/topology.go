package gpu

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/dotted"
)

// Matrix renders the topology like nvidia-smi topo -m.
func (s Snapshot) Matrix() []string {
	if len(s.Topology) == 0 {
		return nil
	}
	head := "      "
	for i := range s.Topology {
		head += fmt.Sprintf("%-6s", fmt.Sprintf("GPU%d", i))
	}
	out := []string{head + "NUMA"}
	for i, row := range s.Topology {
		line := fmt.Sprintf("%-6s", fmt.Sprintf("GPU%d", i))
		for _, c := range row {
			line += fmt.Sprintf("%-6s", c)
		}
		numa := "-"
		if i < len(s.Devices) && s.Devices[i].NUMANode >= 0 {
			numa = fmt.Sprint(s.Devices[i].NUMANode)
		}
		out = append(out, line+numa)
	}
	return out
}

func runTopology(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	s := Probe(ctx, h)
	if !s.OK() {
		return []checks.Finding{s.skippedFinding("GPU topology")}, nil
	}
	n := len(s.Devices)
	if n < 2 {
		return []checks.Finding{{Severity: checks.OK, Title: fmt.Sprintf("%d GPU: no GPU-to-GPU traffic to check", n)}}, nil
	}
	ev := map[string]any{"matrix": s.Matrix()}
	nv := 0
	var bad []string
	pairs := 0
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			pairs++
			if strings.HasPrefix(s.Topology[i][j], "NV") {
				nv++
			}
			if st := s.P2P[i][j]; st != "OK" && st != "X" {
				bad = append(bad, fmt.Sprintf("GPU%d-GPU%d: %s", i, j, st))
			}
		}
	}
	links := "PCIe"
	if nv == pairs {
		links = "NVLink between every pair (" + s.Topology[0][1] + ")"
	} else if nv > 0 {
		links = fmt.Sprintf("NVLink between %d of %d pairs", nv, pairs)
	}
	head := checks.Finding{Severity: checks.OK, Title: fmt.Sprintf("%d GPUs, %s; peer-to-peer OK between all pairs", n, links), Evidence: ev}
	var fs []checks.Finding
	if len(bad) > 0 {
		ev["p2p_not_ok"] = bad
		head.Title = fmt.Sprintf("%d GPUs, %s; peer-to-peer not available for %d of %d pairs", n, links, len(bad), pairs)
		cons := consumer(s.Devices[0].Name)
		f := checks.Finding{Severity: checks.Warn,
			Title: "GPU peer-to-peer is not supported between some GPUs: " + strings.Join(first(bad, 3), "; "),
			Detail: "NCCL then moves data through host shared memory (SHM) — correct but slower, and it needs a large enough /dev/shm. " +
				"If P2P is reported OK but transfers hang, PCIe ACS or the IOMMU is usually the cause (host.pcie).",
			Guide: "p2p-acs-iommu", Fixes: []string{"env.export"},
			Evidence: map[string]any{
				"recommended_env":        map[string]string{"NCCL_P2P_DISABLE": "1"},
				"recommended_env_reason": map[string]string{"NCCL_P2P_DISABLE": "NVML reports peer-to-peer unsupported between these GPUs; make NCCL use shared memory deliberately"},
			}}
		if cons {
			f.Title = fmt.Sprintf("Consumer GPUs (%s) without peer-to-peer", s.Devices[0].Name)
			f.Detail = "GeForce cards have no NVLink, and NVML reports no PCIe peer-to-peer between these: NCCL moves data through host shared memory. " +
				"NCCL_P2P_DISABLE=1 makes that choice explicit on every rank."
			f.Guide = "consumer-gpu-p2p"
			f.Evidence["recommended_env"] = map[string]string{"NCCL_P2P_DISABLE": "1"}
			f.Evidence["recommended_env_reason"] = map[string]string{
				"NCCL_P2P_DISABLE": "consumer GPUs without peer-to-peer (NVML)",
			}
			// accelerate (utils/environment.py check_cuda_p2p_ib_support)
			// refuses more than one "RTX 40" GPU on drivers before 550.40.07
			// unless both variables are set.
			if n > 1 && strings.Contains(s.Devices[0].Name, "RTX 40") && s.Driver != "" && dotted.Less(s.Driver, "550.40.07") {
				f.Detail += " With driver " + s.Driver + " (older than 550.40.07), accelerate refuses to start on RTX 40-series GPUs unless " +
					"NCCL_P2P_DISABLE=1 and NCCL_IB_DISABLE=1 are both set (or the job starts with `accelerate launch`, which sets them); a newer driver lifts that check."
				f.Evidence["recommended_env"] = map[string]string{"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}
				f.Evidence["recommended_env_reason"] = map[string]string{
					"NCCL_P2P_DISABLE": "consumer GPUs without peer-to-peer (NVML); accelerate requires it on RTX 40-series with drivers before 550.40.07",
					"NCCL_IB_DISABLE":  "accelerate requires it on RTX 40-series with drivers before 550.40.07",
				}
			}
			f.Fixes = []string{"env.export", "launch.single-gpu"}
		}
		fs = append(fs, f)
	}
	// GPUs on several NUMA nodes: fine for NCCL, but worth knowing when a
	// job is given GPUs from both sockets.
	numa := map[int]bool{}
	for _, d := range s.Devices {
		if d.NUMANode >= 0 {
			numa[d.NUMANode] = true
		}
	}
	if len(numa) > 1 {
		var ns []int
		for k := range numa {
			ns = append(ns, k)
		}
		sort.Ints(ns)
		fs = append(fs, checks.Finding{Severity: checks.Info, Title: fmt.Sprintf("GPUs sit on %d NUMA nodes (%s)", len(ns), joinInts(ns)),
			Detail: "Traffic between GPUs on different sockets crosses the CPU interconnect (SYS in the matrix) unless NVLink joins them; for small jobs prefer GPUs of one NUMA node."})
	}
	return append([]checks.Finding{head}, fs...), nil
}

func first(xs []string, n int) []string {
	if len(xs) > n {
		return append(append([]string{}, xs[:n]...), fmt.Sprintf("+%d more", len(xs)-n))
	}
	return xs
}

// joinInts lists numbers for people: "0, 1".
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
