package scenario

import (
	"fmt"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/nvml"
)

// model is one GPU model as NVML names it (values of NVIDIA's H100 SXM5
// 80GB and GeForce RTX 4090, as go-nvml's simulated servers describe them).
type model struct {
	name       string
	memoryMB   uint64
	ccMajor    int
	ccMinor    int
	pciID      uint32
	geforce    bool // VGA class on the PCI bus, not 3D controller
	nvlinkVer  uint32
	uuidPrefix string
}

var (
	h100    = model{name: "NVIDIA H100 80GB HBM3", memoryMB: 81920, ccMajor: 9, pciID: 0x233010DE, nvlinkVer: 4, uuidPrefix: "GPU-5d2e4b1a-0000-4000-8000-00000000"}
	rtx4090 = model{name: "NVIDIA GeForce RTX 4090", memoryMB: 24564, ccMajor: 8, ccMinor: 9, pciID: 0x268410DE, geforce: true, uuidPrefix: "GPU-7a41c0de-0000-4000-8000-00000000"}
)

// box describes a simulated GPU server.
type box struct {
	gpu         model
	n           int
	driver      string
	cuda        int
	nvlinks     int // active NVLinks per GPU (0 = PCIe only)
	p2p         nvml.GpuP2PStatus
	pcieGen     int
	pcieWidth   int
	sameSwitch  nvml.GpuTopologyLevel // topology between GPUs of one NUMA node
	crossNode   nvml.GpuTopologyLevel
	gpusPerNUMA int
	persistence nvml.EnableState
}

var boxes = map[string]box{
	"dgx-h100": {gpu: h100, n: 8, driver: "550.54.15", cuda: 12040, nvlinks: 18,
		p2p: nvml.P2P_STATUS_OK, pcieGen: 5, pcieWidth: 16, sameSwitch: nvml.TOPOLOGY_NODE, crossNode: nvml.TOPOLOGY_SYSTEM, gpusPerNUMA: 4, persistence: nvml.FEATURE_ENABLED},
	"rtx4090x2": {gpu: rtx4090, n: 2, driver: "535.183.01", cuda: 12020, nvlinks: 0,
		p2p: nvml.P2P_STATUS_NOT_SUPPORTED, pcieGen: 4, pcieWidth: 16, sameSwitch: nvml.TOPOLOGY_HOSTBRIDGE, crossNode: nvml.TOPOLOGY_HOSTBRIDGE, gpusPerNUMA: 2, persistence: nvml.FEATURE_DISABLED},
}

// gpuBus is the PCI bus number of simulated GPU i; NVML and sysfs agree.
func gpuBus(i int) int { return 0x18 + i*0x10 }

// simulatedPCI lists the simulated GPUs as sysfs sees them: their bus
// address and PCI class (3D controller for datacenter parts, VGA for
// GeForce), so host.pcie counts the same GPUs NVML reports.
func simulatedPCI(name string) []pciGPU {
	b, ok := boxes[name]
	if !ok {
		return nil
	}
	class := "0x030200"
	if b.gpu.geforce {
		class = "0x030000"
	}
	out := make([]pciGPU, b.n)
	for i := range out {
		out[i] = pciGPU{BDF: fmt.Sprintf("0000:%02x:00.0", gpuBus(i)), Class: class}
	}
	return out
}

// simulatedGPUs returns a simulated NVML for the named box.
func simulatedGPUs(name string, procs map[int][]GPUProcess) (host.NVML, error) {
	if name == "" {
		return nil, nil
	}
	b, ok := boxes[name]
	if !ok {
		return nil, fmt.Errorf("unknown simulated GPU box %q", name)
	}
	numa := func(i int) int { return i / max(b.gpusPerNUMA, 1) }
	sim := &nvml.Sim{Driver: b.driver, CUDA: b.cuda,
		Topology: func(i, j int) nvml.GpuTopologyLevel {
			if numa(i) != numa(j) {
				return b.crossNode
			}
			return b.sameSwitch
		},
		P2P: func(int, int, nvml.GpuP2PCapsIndex) nvml.GpuP2PStatus { return b.p2p },
	}
	for i := 0; i < b.n; i++ {
		g := &nvml.SimGPU{Name: b.gpu.name, UUID: fmt.Sprintf("%s%04x", b.gpu.uuidPrefix, i),
			BusID: fmt.Sprintf("00000000:%02X:00.0", gpuBus(i)), Bus: uint32(gpuBus(i)), PCIID: b.gpu.pciID,
			MemTotal: b.gpu.memoryMB << 20, CCMajor: b.gpu.ccMajor, CCMinor: b.gpu.ccMinor,
			Persistence: b.persistence, NVLinks: b.nvlinks, NVLinkVersion: b.gpu.nvlinkVer,
			PCIeGen: b.pcieGen, PCIeWidth: b.pcieWidth,
			// x86 boxes: GPU memory is not a NUMA node; the host node is the
			// socket the GPU hangs off.
			NUMANode: -1, HostNUMA: numa(i)}
		for _, p := range procs[i] {
			g.Processes = append(g.Processes, nvml.ProcessInfo{Pid: uint32(p.PID), UsedGpuMemory: p.Memory})
			g.MemUsed += p.Memory
		}
		sim.GPUs = append(sim.GPUs, g)
	}
	return sim, nil
}
