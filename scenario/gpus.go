//go:build cgo

package scenario

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/ncclwiz/ncclwiz/host"
)

// box describes a simulated GPU server.
type box struct {
	cfg         gpus.Config
	n           int
	driver      string
	cuda        int
	nvlinks     int // active NVLinks per GPU (0 = PCIe only)
	nvlinkVer   uint32
	p2p         nvml.GpuP2PStatus
	pcieGen     int
	pcieWidth   int
	sameSwitch  nvml.GpuTopologyLevel // topology between GPUs of one NUMA node
	crossNode   nvml.GpuTopologyLevel
	gpusPerNUMA int
	persistence nvml.EnableState
}

var rtx4090 = gpus.Config{Name: "NVIDIA GeForce RTX 4090", Architecture: nvml.DEVICE_ARCH_ADA, Brand: nvml.BRAND_GEFORCE,
	MemoryMB: 24564, CudaMajor: 8, CudaMinor: 9, PciDeviceId: 0x268410DE}

var boxes = map[string]box{
	"dgx-h100": {cfg: gpus.H100_SXM5_80GB, n: 8, driver: "550.54.15", cuda: 12040, nvlinks: 18, nvlinkVer: 4,
		p2p: nvml.P2P_STATUS_OK, pcieGen: 5, pcieWidth: 16, sameSwitch: nvml.TOPOLOGY_NODE, crossNode: nvml.TOPOLOGY_SYSTEM, gpusPerNUMA: 4, persistence: nvml.FEATURE_ENABLED},
	"rtx4090x2": {cfg: rtx4090, n: 2, driver: "535.183.01", cuda: 12020, nvlinks: 0,
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
	if b.cfg.Brand == nvml.BRAND_GEFORCE {
		class = "0x030000"
	}
	out := make([]pciGPU, b.n)
	for i := range out {
		out[i] = pciGPU{BDF: fmt.Sprintf("0000:%02x:00.0", gpuBus(i)), Class: class}
	}
	return out
}

// simulatedGPUs returns a go-nvml simulated server for the named box.
func simulatedGPUs(name string, procs map[int][]GPUProcess) (host.NVML, error) {
	if name == "" {
		return nil, nil
	}
	b, ok := boxes[name]
	if !ok {
		return nil, fmt.Errorf("unknown simulated GPU box %q", name)
	}
	cfgs := make([]gpus.Config, b.n)
	for i := range cfgs {
		cfgs[i] = b.cfg
	}
	srv, err := server.New(server.WithGPUs(cfgs...), server.WithDriverVersion(b.driver), server.WithCUDADriverVersion(b.cuda))
	if err != nil {
		return nil, fmt.Errorf("simulate %s: %w", name, err)
	}
	numa := func(i int) int { return i / max(b.gpusPerNUMA, 1) }
	for i, d := range srv.Devices {
		md, idx := d.(*server.Device), i
		busID := fmt.Sprintf("00000000:%02X:00.0", gpuBus(idx))
		md.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for j, c := range busID {
				p.BusId[j] = int8(c)
			}
			p.Domain, p.Bus, p.PciDeviceId = 0, uint32(gpuBus(idx)), b.cfg.PciDeviceId
			return p, nvml.SUCCESS
		}
		md.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			var out []nvml.ProcessInfo
			for _, p := range procs[idx] {
				out = append(out, nvml.ProcessInfo{Pid: uint32(p.PID), UsedGpuMemory: p.Memory})
			}
			return out, nvml.SUCCESS
		}
		md.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		// ncclwiz hang reads these for the ranks' GPUs; the simulated server
		// leaves some unset (its mock panics on an unset method).
		if md.GetUtilizationRatesFunc == nil {
			md.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
		}
		if md.GetPowerUsageFunc == nil {
			md.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}
		if md.GetEnforcedPowerLimitFunc == nil {
			md.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}
		if md.GetClockInfoFunc == nil {
			md.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}
		if md.GetUUIDFunc == nil {
			md.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED }
		}
		md.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return b.persistence, nvml.SUCCESS }
		md.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return nvml.COMPUTEMODE_DEFAULT, nvml.SUCCESS }
		md.GetNumaNodeIdFunc = func() (int, nvml.Return) { return numa(idx), nvml.SUCCESS }
		md.GetCpuAffinityFunc = func(n int) ([]uint, nvml.Return) {
			if numa(idx) == 0 {
				return []uint{0x00000000FFFFFFFF}, nvml.SUCCESS
			}
			return []uint{0xFFFFFFFF00000000}, nvml.SUCCESS
		}
		md.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
			if link >= b.nvlinks {
				return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		md.GetNvLinkVersionFunc = func(link int) (uint32, nvml.Return) {
			if link >= b.nvlinks {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return b.nvlinkVer, nvml.SUCCESS
		}
		md.GetP2PStatusFunc = func(nvml.Device, nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) { return b.p2p, nvml.SUCCESS }
		md.GetTopologyCommonAncestorFunc = func(o nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			if numa(o.(*server.Device).Index) != numa(idx) {
				return b.crossNode, nvml.SUCCESS
			}
			return b.sameSwitch, nvml.SUCCESS
		}
		md.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return b.pcieGen, nvml.SUCCESS }
		md.GetMaxPcieLinkGenerationFunc = func() (int, nvml.Return) { return b.pcieGen, nvml.SUCCESS }
		md.GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return b.pcieWidth, nvml.SUCCESS }
		md.GetMaxPcieLinkWidthFunc = func() (int, nvml.Return) { return b.pcieWidth, nvml.SUCCESS }
	}
	srv.DeviceGetTopologyCommonAncestorFunc = func(a, c nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
		return a.GetTopologyCommonAncestor(c)
	}
	srv.DeviceGetP2PStatusFunc = func(a, c nvml.Device, i nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
		return a.GetP2PStatus(c, i)
	}
	srv.SystemGetProcessNameFunc = func(pid int) (string, nvml.Return) { return "", nvml.ERROR_NOT_FOUND }
	return srv, nil
}
