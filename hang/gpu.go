package hang

import (
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/nvml"
)

// gpuUse asks NVML which GPU each of pids runs on, and how busy that GPU
// is. A GPU at full utilisation drawing little power is NCCL spinning in
// a kernel that waits for a peer; nil when NVML is unavailable.
func gpuUse(h *host.Host, pids []int) map[int]GPUUse {
	lib := h.NVML
	if lib == nil {
		return nil
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil
	}
	defer lib.Shutdown()
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil
	}
	out := map[int]GPUUse{}
	for i := 0; i < n; i++ {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		procs, ret := d.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			continue
		}
		var g *GPUUse
		for _, p := range procs {
			if !want[int(p.Pid)] {
				continue
			}
			if g == nil {
				g = &GPUUse{Index: i}
				if u, ret := d.GetUUID(); ret == nvml.SUCCESS {
					g.UUID = u
				}
				if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
					g.UtilPercent = u.Gpu
				}
				if mw, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
					g.PowerWatts = mw / 1000
				}
				if mw, ret := d.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
					g.PowerLimitW = mw / 1000
				}
				if c, ret := d.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
					g.SMClockMHz = c
				}
			}
			u := *g
			u.MemoryBytes = p.UsedGpuMemory
			out[int(p.Pid)] = u
		}
	}
	return out
}
