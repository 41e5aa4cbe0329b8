package sysinfo

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
	"github.com/ncclwiz/ncclwiz/internal/nvml"
)

// node is one /sys/devices/system/node/nodeN of a fixture.
type node struct {
	cpus  string
	memKB uint64
}

// topo is a machine: its NUMA nodes and, per GPU, the host node NVML's
// memory affinity reports and the node of the GPU's own memory (-1: none).
type topo struct {
	nodes   map[int]node
	host    []int
	gpuMem  []int
	sysfs   map[string]string // PCI bus id -> numa_node, for GPUs NVML gives no affinity for
	noNVML  bool
	machine string
}

func (tp topo) build(t *testing.T, env map[string]string) *host.Host {
	files := map[string]any{}
	for id, n := range tp.nodes {
		dir := fmt.Sprintf("/sys/devices/system/node/node%d/", id)
		files[dir+"cpulist"] = n.cpus + "\n"
		files[dir+"meminfo"] = fmt.Sprintf("Node %d MemTotal:       %d kB\n", id, n.memKB)
	}
	for bdf, nn := range tp.sysfs {
		files["/sys/bus/pci/devices/"+bdf+"/numa_node"] = nn + "\n"
	}
	h := ft.Tree(t, files, host.FixtureSpec{Env: env})
	if tp.noNVML {
		return h
	}
	sim := &nvml.Sim{Driver: "580.65.06", CUDA: 13000}
	for i, hn := range tp.host {
		g := &nvml.SimGPU{Name: tp.machine, BusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i), HostNUMA: hn, NUMANode: -1}
		if i < len(tp.gpuMem) {
			g.NUMANode = tp.gpuMem[i]
		}
		sim.GPUs = append(sim.GPUs, g)
	}
	h.NVML = sim
	return h
}

const gib = 1 << 20 // kB

// grace builds the layout of Grace-based nodes: one Grace CPU node per
// superchip (72 cores, LPDDR5X), then per GPU eight nodes: the first holds
// the GPU's HBM, seven are empty placeholders for MIG instances. This is
// the layout public threads show: 9 nodes on one GH200 (node0 CPUs 0-71,
// nodes 1-8 without CPUs; bytedance/xpu-perf#129), 36 on a node of four
// GH200 (NVIDIA/mlperf-common#16), two Grace nodes with two GPUs each on
// GB200 (ishandhanani/srt-slurm#164). Sizes are ours.
func grace(graces, gpusPerGrace int, lpddrGiB, hbmGiB uint64, name string) topo {
	tp := topo{nodes: map[int]node{}, machine: name}
	for c := 0; c < graces; c++ {
		tp.nodes[c] = node{cpus: fmt.Sprintf("%d-%d", 72*c, 72*c+71), memKB: lpddrGiB * gib}
	}
	for g := 0; g < graces*gpusPerGrace; g++ {
		first := graces + 8*g
		tp.nodes[first] = node{memKB: hbmGiB * gib}
		for p := 1; p < 8; p++ {
			tp.nodes[first+p] = node{}
		}
		tp.host = append(tp.host, g/gpusPerGrace)
		tp.gpuMem = append(tp.gpuMem, first)
	}
	return tp
}

func x86(nodes map[int]node, host ...int) topo {
	return topo{nodes: nodes, host: host, machine: "NVIDIA H100 80GB HBM3"}
}

var (
	sockets      = map[int]node{0: {"0-31", 256 * gib}, 1: {"32-63", 256 * gib}}
	memorylessN2 = map[int]node{0: {"0-31", 256 * gib}, 1: {"32-63", 256 * gib}, 2: {"64-95", 0}}
	cpulessN1    = map[int]node{0: {"0-31", 256 * gib}, 1: {"", 256 * gib}}
)

func TestNUMALayouts(t *testing.T) {
	tests := []struct {
		name  string
		tp    topo
		env   map[string]string
		sev   checks.Severity
		title []string // all must appear in the NUMA finding's title
		rec   bool     // recommends NCCL_CUMEM_HOST_ENABLE=0
	}{
		// By design: the GPU's own memory and the placeholders are nodes no
		// GPU allocates host memory on.
		{"GH200, one superchip, 9 nodes", grace(1, 1, 480, 96, "NVIDIA GH200 480GB"), nil, checks.OK,
			[]string{"9 NUMA nodes", "every GPU's host node has CPUs and memory: node0 (GPU 0)"}, false},
		{"GH200, four superchips, 36 nodes", grace(4, 1, 120, 96, "NVIDIA GH200 120GB"), nil, checks.OK,
			[]string{"36 NUMA nodes", "node0 (GPU 0), node1 (GPU 1), node2 (GPU 2), node3 (GPU 3)"}, false},
		{"GB200, two Grace and four GPUs, 34 nodes", grace(2, 2, 480, 186, "NVIDIA GB200"), nil, checks.OK,
			[]string{"34 NUMA nodes", "node0 (GPUs 0,1), node1 (GPUs 2,3)"}, false},
		{"two sockets", x86(sockets, 0, 0, 0, 0, 1, 1, 1, 1), nil, checks.OK, []string{"node0 (GPUs 0,1,2,3), node1 (GPUs 4,5,6,7)"}, false},
		{"memoryless node without GPUs", x86(memorylessN2, 0, 0, 1, 1), nil, checks.OK, []string{"3 NUMA nodes", "every GPU's host node"}, false},
		// Where NCCL trips: ranks disagree.
		{"memoryless node with some GPUs", x86(memorylessN2, 0, 0, 1, 1, 2, 2), nil, checks.Warn,
			[]string{"GPUs 4,5 allocate on node2 (no memory, GPUs 4,5)", "GPUs 0,1,2,3 on nodes that work"}, true},
		{"CPU-less node with GPUs (a VM's filtered CPUs, NVIDIA/nccl#2190)", x86(cpulessN1, 0, 0, 1, 1), nil, checks.Warn,
			[]string{"GPUs 2,3 allocate on node1 (no CPUs, GPUs 2,3)"}, true},
		{"every GPU on a memoryless node", x86(memorylessN2, 2, 2), nil, checks.Warn, []string{"fails on for every GPU: node2 (no memory, GPUs 0,1)"}, true},
		{"already mitigated", x86(memorylessN2, 0, 2), map[string]string{"NCCL_CUMEM_HOST_ENABLE": "0"}, checks.Info, []string{"GPU 1 allocate on node2"}, false},
		{"no affinity from NVML: the PCI device's numa_node", topo{nodes: memorylessN2, host: []int{-1, -1}, machine: "x",
			sysfs: map[string]string{"0000:18:00.0": "0", "0000:19:00.0": "2"}}, nil, checks.Warn, []string{"GPU 1 allocate on node2"}, true},
		{"a host node sysfs does not show", x86(sockets, 0, 5), nil, checks.OK, []string{"node0 (GPU 0); GPU 1: host node not in /sys/devices/system/node"}, false},
		{"no NVML: no CUDA, no probe", topo{nodes: memorylessN2, noNVML: true}, nil, checks.OK, []string{"no GPU NCCL could use was found"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.tp.build(t, tt.env)
			f := judgeNUMA(mustNUMA(t, h), gpuHomes(context.Background(), h), h.Getenv("NCCL_CUMEM_HOST_ENABLE"))
			if f.Severity != tt.sev {
				t.Errorf("severity %s, want %s: %s\n%s", f.Severity, tt.sev, f.Title, f.Detail)
			}
			for _, w := range tt.title {
				if !strings.Contains(f.Title, w) {
					t.Errorf("title %q lacks %q", f.Title, w)
				}
			}
			_, rec := f.Evidence["recommended_env"]
			if rec != tt.rec {
				t.Errorf("recommends NCCL_CUMEM_HOST_ENABLE=0: %v, want %v", rec, tt.rec)
			}
			if tt.sev == checks.OK && f.Guide != "" {
				t.Errorf("an OK layout points at guide %q", f.Guide)
			}
			if tt.sev != checks.OK && (f.Guide != "shm-cumem-host" || !strings.Contains(f.Detail, "NCCL 2.24 to 2.26.2")) {
				t.Errorf("guide %q, detail %q", f.Guide, f.Detail)
			}
		})
	}
}

// TestGraceLayoutSaysWhy: on GH200 the OK finding says which nodes are the
// GPU's own memory and that the layout is by design.
func TestGraceLayoutSaysWhy(t *testing.T) {
	h := grace(1, 1, 480, 96, "NVIDIA GH200 480GB").build(t, nil)
	f := judgeNUMA(mustNUMA(t, h), gpuHomes(context.Background(), h), "")
	for _, w := range []string{"node1 is GPU 0's own memory", "node2 (no memory and no CPUs)", "Grace Hopper (GH200) and Grace Blackwell (GB200) by design"} {
		if !strings.Contains(f.Detail, w) {
			t.Errorf("detail lacks %q: %s", w, f.Detail)
		}
	}
	roles := map[string]int{}
	for _, n := range f.Evidence["numa_nodes"].([]map[string]any) {
		roles[n["role"].(string)]++
	}
	if roles["gpu-host"] != 1 || roles["gpu-memory"] != 1 || roles["empty"] != 7 {
		t.Errorf("roles %v", roles)
	}
}

func mustNUMA(t *testing.T, h *host.Host) []NUMANode {
	t.Helper()
	n, err := ReadNUMA(h)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
