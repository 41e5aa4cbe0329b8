package gpu

import (
	"context"
	"fmt"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/nvml"
)

// maxNVLinks bounds the per-device link loop (NVML_NVLINK_MAX_LINKS).
const maxNVLinks = nvml.NVLINK_MAX_LINKS

// Probe asks NVML about the GPUs. Init is called once; on failure nothing
// else is called, and the state says why.
func Probe(_ context.Context, h *host.Host) Snapshot {
	if !host.NVMLAvailableInBuild && !h.Simulated {
		return Snapshot{State: StateUnavailable, Detail: "GPU checks are unavailable in this build (a static -tags nonvml build cannot load the driver's NVML)"}
	}
	lib := h.NVML
	if lib == nil {
		return Snapshot{State: StateNoNVML, Detail: "no NVIDIA driver on this machine (no NVML)"}
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return initFailure(ret)
	}
	// NVML reference-counts Init; every successful Init gets its Shutdown.
	defer lib.Shutdown()
	s := Snapshot{State: StateOK}
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		s.Driver = v
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		s.CUDA = cudaVersion(v)
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return Snapshot{State: stateOf(ret), Detail: "NVML cannot count the GPUs: " + ret.Error(), Driver: s.Driver, CUDA: s.CUDA}
	}
	handles := make([]nvml.Device, 0, n)
	for i := 0; i < n; i++ {
		d, ret := lib.DeviceGetHandleByIndex(i)
		dev := Device{Index: i, NUMANode: -1, MemNUMANode: -1}
		if ret != nvml.SUCCESS {
			dev.Lost = ret == nvml.ERROR_GPU_IS_LOST
			dev.Err = ret.Error()
			s.Devices = append(s.Devices, dev)
			handles = append(handles, nil)
			continue
		}
		fillDevice(lib, d, &dev)
		s.Devices = append(s.Devices, dev)
		handles = append(handles, d)
	}
	s.Topology, s.P2P = topology(s.Devices, handles)
	return s
}

func initFailure(ret nvml.Return) Snapshot {
	st := stateOf(ret)
	detail := map[string]string{
		StateNoDriver:     "no NVIDIA driver found",
		StateNoPermission: "no permission to use the NVIDIA devices",
		StateMismatch:     "the NVIDIA driver and its library do not match (reboot after the driver upgrade)",
		StateGPULost:      "a GPU has fallen off the bus",
		StateNotSupported: "NVML is not supported on this system",
	}[st]
	if detail == "" {
		detail = fmt.Sprintf("NVML failed to initialise (error %d)", int(ret))
	}
	return Snapshot{State: st, Detail: detail}
}

func stateOf(ret nvml.Return) string {
	switch ret {
	case nvml.SUCCESS:
		return StateOK
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return StateNoDriver
	case nvml.ERROR_NO_PERMISSION:
		return StateNoPermission
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return StateMismatch
	case nvml.ERROR_GPU_IS_LOST:
		return StateGPULost
	case nvml.ERROR_NOT_SUPPORTED:
		return StateNotSupported
	}
	return StateError
}

func fillDevice(lib nvml.Interface, d nvml.Device, dev *Device) {
	// The bus id first: it still identifies a GPU that stopped answering.
	if p, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
		dev.BusID = p.BusID
	}
	name, ret := d.GetName()
	if ret == nvml.ERROR_GPU_IS_LOST {
		dev.Lost, dev.Err = true, ret.Error()
		return
	}
	dev.Name = name
	if u, ret := d.GetUUID(); ret == nvml.SUCCESS {
		dev.UUID = u
	}
	if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		dev.MemTotal, dev.MemUsed = m.Total, m.Used
	}
	if maj, mnr, ret := d.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		dev.CC = fmt.Sprintf("%d.%d", maj, mnr)
	}
	if p, ret := d.GetPersistenceMode(); ret == nvml.SUCCESS {
		dev.Persistence = onOff(p == nvml.FEATURE_ENABLED)
	}
	if cur, _, ret := d.GetMigMode(); ret == nvml.SUCCESS {
		dev.MIG = onOff(cur == nvml.DEVICE_MIG_ENABLE)
	}
	for l := 0; l < maxNVLinks; l++ {
		st, ret := d.GetNvLinkState(l)
		if ret != nvml.SUCCESS {
			break // past the last link, or no NVLink at all
		}
		if st == nvml.FEATURE_ENABLED {
			dev.NVLinkActive++
			if v, ret := d.GetNvLinkVersion(l); ret == nvml.SUCCESS && int(v) > dev.NVLinkVersion {
				dev.NVLinkVersion = int(v)
			}
		}
	}
	// The maximum link, not the current one: idle GPUs train their PCIe
	// link down, and the probe runs before any GPU work.
	if g, ret := d.GetMaxPcieLinkGeneration(); ret == nvml.SUCCESS {
		dev.PCIeGen = g
	} else if g, ret := d.GetCurrPcieLinkGeneration(); ret == nvml.SUCCESS {
		dev.PCIeGen = g
	}
	if w, ret := d.GetMaxPcieLinkWidth(); ret == nvml.SUCCESS {
		dev.PCIeWidth = w
	} else if w, ret := d.GetCurrPcieLinkWidth(); ret == nvml.SUCCESS {
		dev.PCIeWidth = w
	}
	dev.NUMANode, dev.MemNUMANode = nvml.HostNUMANode(d), nvml.GPUMemoryNUMANode(d)
	if ps, ret := d.GetComputeRunningProcesses(); ret == nvml.SUCCESS {
		for _, p := range ps {
			dev.Processes = append(dev.Processes, Process{PID: int(p.Pid), GPUMemory: p.UsedGpuMemory})
		}
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

var levelNames = map[nvml.GpuTopologyLevel]string{
	nvml.TOPOLOGY_INTERNAL: "X", nvml.TOPOLOGY_SINGLE: "PIX", nvml.TOPOLOGY_MULTIPLE: "PXB",
	nvml.TOPOLOGY_HOSTBRIDGE: "PHB", nvml.TOPOLOGY_NODE: "NODE", nvml.TOPOLOGY_SYSTEM: "SYS",
}

var p2pText = map[nvml.GpuP2PStatus]string{
	nvml.P2P_STATUS_OK: "OK", nvml.P2P_STATUS_CHIPSET_NOT_SUPPORTED: "chipset not supported",
	nvml.P2P_STATUS_GPU_NOT_SUPPORTED: "GPU not supported", nvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED: "topology not supported",
	nvml.P2P_STATUS_DISABLED_BY_REGKEY: "disabled by regkey", nvml.P2P_STATUS_NOT_SUPPORTED: "not supported",
	nvml.P2P_STATUS_UNKNOWN: "unknown",
}

// topology builds the nvidia-smi topo -m style matrix and the P2P status
// between every pair.
func topology(devs []Device, hs []nvml.Device) ([][]string, [][]string) {
	n := len(hs)
	topo := make([][]string, n)
	p2p := make([][]string, n)
	for i := range hs {
		topo[i] = make([]string, n)
		p2p[i] = make([]string, n)
		for j := range hs {
			switch {
			case i == j:
				topo[i][j], p2p[i][j] = "X", "X"
				continue
			case hs[i] == nil || hs[j] == nil || devs[i].Lost || devs[j].Lost:
				topo[i][j], p2p[i][j] = "?", "GPU lost"
				continue
			}
			level := "?"
			if l, ret := hs[i].GetTopologyCommonAncestor(hs[j]); ret == nvml.SUCCESS {
				if name, ok := levelNames[l]; ok {
					level = name
				}
			}
			if devs[i].NVLinkActive > 0 && devs[j].NVLinkActive > 0 {
				if st, ret := hs[i].GetP2PStatus(hs[j], nvml.P2P_CAPS_INDEX_NVLINK); ret == nvml.SUCCESS && st == nvml.P2P_STATUS_OK {
					level = fmt.Sprintf("NV%d", min(devs[i].NVLinkActive, devs[j].NVLinkActive))
				}
			}
			topo[i][j] = level
			status := "unknown"
			if st, ret := hs[i].GetP2PStatus(hs[j], nvml.P2P_CAPS_INDEX_READ); ret == nvml.SUCCESS {
				status = p2pText[st]
				if st == nvml.P2P_STATUS_OK {
					if wst, ret := hs[i].GetP2PStatus(hs[j], nvml.P2P_CAPS_INDEX_WRITE); ret == nvml.SUCCESS && wst != nvml.P2P_STATUS_OK {
						status = "write " + p2pText[wst]
					}
				}
			}
			p2p[i][j] = status
		}
	}
	return topo, p2p
}
