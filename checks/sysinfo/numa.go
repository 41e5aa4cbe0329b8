package sysinfo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/nvml"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// What NCCL does (src/misc/cudawrap.cc, ncclCuMemHostEnable, v2.26.3-1 to
// v2.30.7-1): with cuMem host allocations on (the default with a CUDA 12.6+
// driver since 2.24), each process allocates one granule of pinned host
// memory on CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID of its own GPU (node 0 when the
// driver reports none) and, when that fails, quietly uses /dev/shm instead.
// 2.24 to 2.26.2 have no such probe: the SHM setup itself fails. A host
// node the allocation fails on is one without memory, or (NVIDIA/nccl#2190:
// "NUMA eligibility followed CPU presence") one without CPUs. Nodes no GPU
// allocates on never enter the probe: on Grace Hopper and Grace Blackwell
// the GPU's own memory is a CPU-less NUMA node and MIG adds empty
// placeholder nodes, by design, while the GPU's host node is its Grace
// CPU's. NCCL trips when ranks then disagree (some GPUs' host nodes work,
// some do not): a /dev/shm rank reads a peer's cuMem handle as a file name
// ("attaching to shared memory segment /dev/shm/nccl-… (size 0)").

// GPUHome is where one GPU's host allocations go.
type GPUHome struct {
	Index    int
	BusID    string
	HostNode int    // the host NUMA node NCCL's probe allocates on
	MemNode  int    // the node of the GPU's own memory, -1 when it is not one
	Source   string // "nvml" (the driver's memory affinity) or "sysfs" (the PCI device's numa_node)
}

// gpuHomes asks NVML for each GPU's host node, falling back to the PCI
// device's numa_node; nil when NVML does not answer (no driver means no
// CUDA, so NCCL's probe never runs here). Only these few NVML calls: the
// full inventory is gpu.Probe's (checks/gpu), which this package cannot
// import (checks/gpu → checks/procs → checks/shm → here).
func gpuHomes(_ context.Context, h *host.Host) []GPUHome {
	lib := h.NVML
	if lib == nil || (!host.NVMLAvailableInBuild && !h.Simulated) {
		return nil
	}
	if lib.Init() != nvml.SUCCESS {
		return nil
	}
	defer lib.Shutdown()
	n, r := lib.DeviceGetCount()
	if r != nvml.SUCCESS {
		return nil
	}
	var out []GPUHome
	for i := 0; i < n; i++ {
		d, r := lib.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			continue
		}
		p, r := d.GetPciInfo()
		if r != nvml.SUCCESS {
			continue
		}
		g := GPUHome{Index: i, BusID: p.BusID, HostNode: nvml.HostNUMANode(d), MemNode: nvml.GPUMemoryNUMANode(d), Source: "nvml"}
		if g.HostNode < 0 {
			g.HostNode, g.Source = pciNUMANode(h, p.BusID), "sysfs"
		}
		if g.HostNode < 0 {
			g.HostNode = 0 // what NCCL takes when the driver reports no node
		}
		out = append(out, g)
	}
	return out
}

// pciNUMANode reads /sys/bus/pci/devices/BDF/numa_node for an NVML bus id
// ("00000009:01:00.0" is sysfs's "0009:01:00.0"); -1 when unknown.
func pciNUMANode(h *host.Host, busID string) int {
	dom, rest, ok := strings.Cut(strings.ToLower(busID), ":")
	if !ok {
		return -1
	}
	if len(dom) > 4 {
		dom = dom[len(dom)-4:]
	}
	b, err := h.ReadFile("/sys/bus/pci/devices/" + dom + ":" + rest + "/numa_node")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// nodeRole says what a node is, for people and the JSON.
func nodeRole(n NUMANode, memOf map[int][]int, hostOf map[int][]int) string {
	switch {
	case len(memOf[n.ID]) > 0:
		return "gpu-memory"
	case len(hostOf[n.ID]) > 0:
		return "gpu-host"
	case n.CPUList != "" && n.MemTotal > 0:
		return "cpu"
	case n.CPUList != "":
		return "cpu-memoryless"
	case n.MemTotal > 0:
		return "memory-only"
	}
	return "empty"
}

// eligible: NCCL's probe can allocate pinned host memory on the node.
func eligible(n NUMANode) bool { return n.MemTotal > 0 && n.CPUList != "" }

func whyNot(n NUMANode) string {
	switch {
	case n.MemTotal == 0 && n.CPUList == "":
		return "no memory and no CPUs"
	case n.MemTotal == 0:
		return "no memory"
	}
	return "no CPUs"
}

func gpuList(ix []int) string {
	s := make([]string, len(ix))
	for i, v := range ix {
		s[i] = strconv.Itoa(v)
	}
	if len(ix) == 1 {
		return "GPU " + s[0]
	}
	return "GPUs " + strings.Join(s, ",")
}

// judgeNUMA is the NUMA finding of host.ipc: a warning only where NCCL's
// cuMem host probe fails for some or all of this machine's GPUs.
func judgeNUMA(nodes []NUMANode, gpus []GPUHome, cumemHostEnv string) checks.Finding {
	byID := map[int]NUMANode{}
	for _, n := range nodes {
		byID[n.ID] = n
	}
	memOf, hostOf := map[int][]int{}, map[int][]int{}
	for _, g := range gpus {
		if g.MemNode >= 0 {
			memOf[g.MemNode] = append(memOf[g.MemNode], g.Index)
		}
		hostOf[g.HostNode] = append(hostOf[g.HostNode], g.Index)
	}
	list := make([]map[string]any, 0, len(nodes))
	var odd, byDesign []string
	for _, n := range nodes {
		role := nodeRole(n, memOf, hostOf)
		e := map[string]any{"node": n.ID, "mem_total_bytes": n.MemTotal, "cpus": n.CPUList, "role": role}
		if g := memOf[n.ID]; len(g) > 0 {
			e["memory_of_gpus"] = g
		}
		if g := hostOf[n.ID]; len(g) > 0 {
			e["host_of_gpus"] = g
		}
		list = append(list, e)
		switch {
		case role == "gpu-memory":
			byDesign = append(byDesign, fmt.Sprintf("node%d is %s's own memory", n.ID, gpuList(memOf[n.ID])))
		case !eligible(n) && len(hostOf[n.ID]) == 0:
			odd = append(odd, fmt.Sprintf("node%d (%s)", n.ID, whyNot(n)))
		}
	}
	var gpuEv []map[string]any
	for _, g := range gpus {
		gpuEv = append(gpuEv, map[string]any{"index": g.Index, "bus_id": g.BusID, "host_node": g.HostNode, "gpu_memory_node": g.MemNode, "source": g.Source})
	}
	ev := map[string]any{"numa_nodes": list}
	if gpuEv != nil {
		ev["gpus"] = gpuEv
	}
	f := checks.Finding{Severity: checks.OK, Evidence: ev}

	// Which GPUs' host nodes NCCL's probe fails on.
	var bad, good, unseen []int
	badNodes := map[int]bool{}
	for _, g := range gpus {
		n, ok := byID[g.HostNode]
		switch {
		case !ok:
			// NVML names a node sysfs does not show (a container's view):
			// nothing to judge it by.
			unseen = append(unseen, g.Index)
		case !eligible(n):
			bad = append(bad, g.Index)
			badNodes[g.HostNode] = true
		default:
			good = append(good, g.Index)
		}
	}
	if len(bad) == 0 {
		f.Title = units.Count(len(nodes), "NUMA node")
		switch {
		case len(gpus) == 0 && len(odd) == 0:
			f.Title += ", all with memory and CPUs"
		case len(gpus) == 0:
			f.Title += " (" + strings.Join(odd, ", ") + "); no GPU NCCL could use was found, so its cuMem host probe does not run here"
		case len(good) == 0:
			f.Title += "; the GPUs' host nodes are not in /sys/devices/system/node, so NCCL's cuMem host probe cannot be judged here"
		default:
			var homes []string
			for _, id := range slices.Sorted(maps.Keys(hostOf)) {
				if _, ok := byID[id]; ok {
					homes = append(homes, fmt.Sprintf("node%d (%s)", id, gpuList(hostOf[id])))
				}
			}
			f.Title += "; every GPU's host node has CPUs and memory: " + strings.Join(homes, ", ")
			if len(unseen) > 0 {
				f.Title += "; " + gpuList(unseen) + ": host node not in /sys/devices/system/node"
			}
		}
		if len(byDesign) > 0 || (len(gpus) > 0 && len(odd) > 0) {
			parts := append([]string{}, byDesign...)
			if len(odd) > 0 {
				parts = append(parts, strings.Join(odd, ", ")+" no GPU allocates on")
			}
			f.Detail = "NCCL's cuMem host probe allocates only on each GPU's host node, so the other nodes do not matter to it: " +
				strings.Join(parts, "; ") + "."
			if len(byDesign) > 0 {
				f.Detail += " A GPU whose memory is a NUMA node without CPUs, with empty placeholder nodes beside it, is the layout of Grace Hopper (GH200) and Grace Blackwell (GB200) by design."
			}
		}
		return f
	}

	var badDesc []string
	for _, id := range slices.Sorted(maps.Keys(badNodes)) {
		badDesc = append(badDesc, fmt.Sprintf("node%d (%s, %s)", id, whyNot(byID[id]), gpuList(hostOf[id])))
	}
	f.Severity = checks.Warn
	f.Guide = "shm-cumem-host"
	f.Fixes = []string{"env.export"}
	if len(good) > 0 {
		f.Title = "NUMA layout NCCL's cuMem host probe trips on: " + gpuList(bad) + " allocate on " + strings.Join(badDesc, "; ") +
			", " + gpuList(good) + " on nodes that work"
		f.Detail = "NCCL 2.26.3 and later probe cuMem host memory on each GPU's host NUMA node and fall back to /dev/shm where the probe fails: " +
			"ranks on " + gpuList(bad) + " take /dev/shm while ranks on " + gpuList(good) + " use cuMem, and a job spanning both fails with " +
			"'Error while attaching to shared memory segment /dev/shm/nccl-… (size 0)'. NCCL 2.24 to 2.26.2 have no probe: the SHM setup of those ranks fails instead. " +
			"Set NCCL_CUMEM_HOST_ENABLE=0 on every rank, or give the node memory and CPUs (BIOS NUMA settings, the VM's CPU and memory topology)."
	} else {
		f.Title = "NUMA layout NCCL's cuMem host probe fails on for every GPU: " + strings.Join(badDesc, "; ")
		f.Detail = "Every GPU's host NUMA node lacks memory or CPUs. NCCL 2.26.3 and later then use /dev/shm on every rank (they agree, so jobs run, with /dev/shm sized for it); " +
			"NCCL 2.24 to 2.26.2 have no probe and fail in the SHM setup. Setting NCCL_CUMEM_HOST_ENABLE=0 on every rank makes every release take /dev/shm."
	}
	if cumemHostEnv == "0" {
		f.Severity = checks.Info
		f.Detail += " NCCL_CUMEM_HOST_ENABLE=0 is already set here."
	} else {
		f.Evidence["recommended_env"] = map[string]string{"NCCL_CUMEM_HOST_ENABLE": "0"}
		f.Evidence["recommended_env_reason"] = map[string]string{"NCCL_CUMEM_HOST_ENABLE": "NCCL's cuMem host probe fails on the host NUMA node of " + gpuList(bad)}
	}
	return f
}
