// Package gpu holds the GPU and NCCL-stack checks: the NVML inventory,
// processes on the GPUs, topology and peer-to-peer, CUDA_VISIBLE_DEVICES,
// Fabric Manager on NVSwitch systems, and which NCCL builds a job could
// load. NVML is reached only through host.Host.NVML; Init is called once per
// probe and, when it fails, no other NVML call is ever made (a call after a
// failed Init ends the process).
package gpu

import (
	"context"
	"fmt"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
)

// Checks returns the gpu.* checks and nccl.stack.
func Checks() []checks.Check {
	return []checks.Check{
		{ID: "gpu.inventory", Title: "GPUs and driver (NVML)", Category: "gpu", Tier: checks.Quick, Needs: []checks.Need{checks.NeedGPU}, Run: runInventory},
		{ID: "gpu.processes", Title: "Processes on the GPUs", Category: "gpu", Tier: checks.Quick, Needs: []checks.Need{checks.NeedGPU}, Run: runProcesses},
		{ID: "gpu.topology", Title: "GPU topology and peer-to-peer", Category: "gpu", Tier: checks.Quick, Needs: []checks.Need{checks.NeedGPU}, Run: runTopology},
		{ID: "gpu.visible", Title: "CUDA_VISIBLE_DEVICES", Category: "gpu", Tier: checks.Quick, Run: runVisible},
		{ID: "gpu.fabric", Title: "NVSwitch Fabric Manager", Category: "gpu", Tier: checks.Quick, Run: runFabric},
		{ID: "nccl.stack", Title: "NCCL and PyTorch builds a job would load", Category: "nccl", Tier: checks.Quick, Run: runStack},
	}
}

// States of NVML access.
const (
	StateOK           = "ok"
	StateNoDriver     = "no-driver"
	StateNoPermission = "no-permission"
	StateMismatch     = "driver-mismatch"
	StateGPULost      = "gpu-lost"
	StateNotSupported = "not-supported"
	StateUnavailable  = "unavailable-in-build"
	StateError        = "error"
	StateNoNVML       = "no-nvml"
)

// Process is one compute process on a GPU.
type Process struct {
	PID       int
	GPUMemory uint64
}

// Device is one GPU as NVML reports it.
type Device struct {
	Index              int
	Name, UUID, BusID  string
	MemTotal, MemUsed  uint64
	CC                 string // compute capability, e.g. "9.0"
	Persistence        string // "on", "off" or ""
	MIG                string // "on", "off" or ""
	NVLinkActive       int
	NVLinkVersion      int
	PCIeGen, PCIeWidth int
	NUMANode           int // nearest host NUMA node (NVML memory affinity), -1 unknown
	MemNUMANode        int // NUMA node of the GPU's own memory (Grace Hopper/Blackwell), -1 none
	Lost               bool
	Err                string
	Processes          []Process
}

// Snapshot is what one NVML probe saw.
type Snapshot struct {
	State, Detail string
	Driver, CUDA  string
	Devices       []Device
	// Topology[i][j] is nvidia-smi topo -m's notation: X, NV#, PIX, PXB,
	// PHB, NODE, SYS.
	Topology [][]string
	// P2P[i][j] is NVML's read/write P2P status between i and j: "OK" or the
	// reason it is not.
	P2P [][]string
}

// OK reports whether NVML answered.
func (s Snapshot) OK() bool { return s.State == StateOK }

// skippedFinding says why a GPU check could not look.
func (s Snapshot) skippedFinding(title string) checks.Finding {
	f := checks.Finding{Severity: checks.Skipped, Title: title + ": " + s.Detail, Evidence: map[string]any{"nvml_state": s.State}}
	switch s.State {
	case StateNoDriver:
		f.Detail = "libnvidia-ml.so.1 could not be loaded or the nvidia kernel module is not loaded. Without the NVIDIA driver this machine cannot run CUDA; checks that need a GPU are skipped. If this machine should have GPUs, see the guide."
		f.Guide = "cuda-driver"
	case StateMismatch:
		f.Severity = checks.Error
		f.Detail = "The NVIDIA kernel module and the user-space library differ (usually a driver upgrade without a reboot). CUDA and NCCL fail until the machine is rebooted."
		f.Guide = "cuda-driver"
	case StateGPULost:
		f.Severity = checks.Error
		f.Detail = "NVML reports a GPU that has fallen off the bus. Check the kernel log for Xid errors; the GPU needs a reset or the node a reboot."
		f.Guide = "gpu-xid"
	case StateNoPermission:
		f.Detail = "This user may not open the NVIDIA devices (/dev/nvidia*); in a container, start it with the GPUs (--gpus all)."
		f.Guide = "cuda-driver"
	}
	return f
}

// cudaVersion turns NVML's integer (12040) into "12.4".
func cudaVersion(v int) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
}

// consumer reports whether a GPU name is a GeForce/RTX consumer card of the
// 40 or 50 series (accelerate's own check looks for "RTX 40").
func consumer(name string) bool {
	return strings.Contains(name, "RTX 40") || strings.Contains(name, "RTX 50")
}

func runInventory(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	s := Probe(ctx, h)
	if !s.OK() {
		return []checks.Finding{s.skippedFinding("GPUs")}, nil
	}
	if len(s.Devices) == 0 {
		return []checks.Finding{{Severity: checks.Warn, Title: "The NVIDIA driver is loaded but sees no GPU",
			Detail: "In a container, start it with --gpus all; check CUDA_VISIBLE_DEVICES and /dev/nvidia*.", Guide: "cuda-driver",
			Evidence: map[string]any{"driver": s.Driver, "cuda": s.CUDA}}}, nil
	}
	names := map[string]int{}
	var list []map[string]any
	var fs []checks.Finding
	for _, d := range s.Devices {
		if !d.Lost {
			names[d.Name]++
		}
		e := map[string]any{"index": d.Index, "name": d.Name, "uuid": d.UUID, "bus_id": d.BusID, "memory_total": d.MemTotal,
			"memory_used": d.MemUsed, "compute_capability": d.CC, "persistence": d.Persistence, "mig": d.MIG}
		if d.NUMANode >= 0 {
			e["host_numa_node"] = d.NUMANode
		}
		if d.MemNUMANode >= 0 {
			e["gpu_memory_numa_node"] = d.MemNUMANode
		}
		if d.NVLinkActive > 0 {
			e["nvlinks"] = d.NVLinkActive
		}
		list = append(list, e)
		if d.Lost {
			fs = append(fs, checks.Finding{Severity: checks.Error, Title: fmt.Sprintf("GPU %d (%s) has fallen off the bus", d.Index, d.BusID),
				Detail: "NVML returns GPU_IS_LOST: the GPU stopped answering (Xid 79 in the kernel log). It needs a reset or the node a reboot; drain it from the scheduler.",
				Guide:  "gpu-xid"})
		}
		if d.MIG == "on" {
			fs = append(fs, checks.Finding{Severity: checks.Info, Title: fmt.Sprintf("GPU %d is in MIG mode", d.Index),
				Detail: "Each MIG instance is a separate CUDA device with its own slice of the GPU; a multi-GPU job sees MIG instances, not whole GPUs.",
				Guide:  "device-mapping"})
		}
	}
	ev := map[string]any{"driver": s.Driver, "cuda": s.CUDA, "gpus": list}
	var parts []string
	for n, c := range names {
		parts = append(parts, fmt.Sprintf("%d× %s", c, n))
	}
	head := checks.Finding{Severity: checks.OK, Title: fmt.Sprintf("%s; driver %s (CUDA %s)", strings.Join(parts, ", "), s.Driver, s.CUDA), Evidence: ev}
	if len(names) > 1 {
		head.Severity = checks.Warn
		head.Title = "Mixed GPU models: " + strings.Join(parts, ", ")
		head.Detail = "NCCL runs at the pace of the slowest GPU and link; different models may also have different P2P support. Give one job GPUs of one model (CUDA_VISIBLE_DEVICES)."
		head.Guide = "device-mapping"
	}
	persistOff := 0
	for _, d := range s.Devices {
		if d.Persistence == "off" {
			persistOff++
		}
	}
	if persistOff > 0 && persistOff == len(s.Devices) {
		fs = append(fs, checks.Finding{Severity: checks.Info, Title: "Persistence mode is off",
			Detail: "Without persistence mode the driver tears GPU state down when no process uses it, which slows every job start; admins usually enable nvidia-persistenced on servers."})
	}
	return append([]checks.Finding{head}, fs...), nil
}
