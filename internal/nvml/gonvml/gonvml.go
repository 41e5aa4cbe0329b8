//go:build cgo

// Package gonvml adapts github.com/NVIDIA/go-nvml to internal/nvml. go-nvml
// stays where it serves: its simulated DGX servers in tests, and its cgo
// binding as the reference the purego binding is checked against. It needs
// cgo, so the release binary (CGO_ENABLED=0) never links it.
package gonvml

import (
	gn "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/ncclwiz/ncclwiz/internal/nvml"
)

// Wrap returns l as an nvml.Interface; nil stays nil.
func Wrap(l gn.Interface) nvml.Interface {
	if l == nil {
		return nil
	}
	return lib{l}
}

type lib struct{ l gn.Interface }

type dev struct{ d gn.Device }

// call turns a panic of a go-nvml mock method nobody set into
// ERROR_FUNCTION_NOT_FOUND, what a driver without that function answers.
func call[T any](f func() (T, gn.Return)) (v T, r nvml.Return) {
	defer func() {
		if recover() != nil {
			var zero T
			v, r = zero, nvml.ERROR_FUNCTION_NOT_FOUND
		}
	}()
	x, ret := f()
	return x, nvml.Return(ret)
}

func ret(f func() gn.Return) nvml.Return {
	_, r := call(func() (struct{}, gn.Return) { return struct{}{}, f() })
	return r
}

func (w lib) Init() nvml.Return     { return ret(w.l.Init) }
func (w lib) Shutdown() nvml.Return { return ret(w.l.Shutdown) }
func (w lib) SystemGetDriverVersion() (string, nvml.Return) {
	return call(w.l.SystemGetDriverVersion)
}
func (w lib) SystemGetCudaDriverVersion() (int, nvml.Return) {
	return call(w.l.SystemGetCudaDriverVersion)
}
func (w lib) DeviceGetCount() (int, nvml.Return) { return call(w.l.DeviceGetCount) }
func (w lib) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, r := call(func() (gn.Device, gn.Return) { return w.l.DeviceGetHandleByIndex(i) })
	if r != nvml.SUCCESS {
		return nil, r
	}
	return dev{d}, r
}

func (w dev) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	p, r := call(w.d.GetPciInfo)
	var b []byte
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return nvml.PciInfo{BusID: string(b), Domain: p.Domain, Bus: p.Bus, Device: p.Device, PciDeviceID: p.PciDeviceId}, r
}
func (w dev) GetName() (string, nvml.Return) { return call(w.d.GetName) }
func (w dev) GetUUID() (string, nvml.Return) { return call(w.d.GetUUID) }
func (w dev) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	m, r := call(w.d.GetMemoryInfo)
	return nvml.Memory{Total: m.Total, Free: m.Free, Used: m.Used}, r
}
func (w dev) GetCudaComputeCapability() (int, int, nvml.Return) {
	var mnr int
	maj, r := call(func() (int, gn.Return) {
		a, b, r := w.d.GetCudaComputeCapability()
		mnr = b
		return a, r
	})
	return maj, mnr, r
}
func (w dev) GetPersistenceMode() (nvml.EnableState, nvml.Return) {
	s, r := call(w.d.GetPersistenceMode)
	return nvml.EnableState(s), r
}
func (w dev) GetMigMode() (int, int, nvml.Return) {
	var pend int
	cur, r := call(func() (int, gn.Return) {
		a, b, r := w.d.GetMigMode()
		pend = b
		return a, r
	})
	return cur, pend, r
}
func (w dev) GetNvLinkState(l int) (nvml.EnableState, nvml.Return) {
	s, r := call(func() (gn.EnableState, gn.Return) { return w.d.GetNvLinkState(l) })
	return nvml.EnableState(s), r
}
func (w dev) GetNvLinkVersion(l int) (uint32, nvml.Return) {
	return call(func() (uint32, gn.Return) { return w.d.GetNvLinkVersion(l) })
}
func (w dev) GetMaxPcieLinkGeneration() (int, nvml.Return) { return call(w.d.GetMaxPcieLinkGeneration) }
func (w dev) GetCurrPcieLinkGeneration() (int, nvml.Return) {
	return call(w.d.GetCurrPcieLinkGeneration)
}
func (w dev) GetMaxPcieLinkWidth() (int, nvml.Return)  { return call(w.d.GetMaxPcieLinkWidth) }
func (w dev) GetCurrPcieLinkWidth() (int, nvml.Return) { return call(w.d.GetCurrPcieLinkWidth) }
func (w dev) GetNumaNodeId() (int, nvml.Return)        { return call(w.d.GetNumaNodeId) }
func (w dev) GetMemoryAffinity(n int, s nvml.AffinityScope) ([]uint64, nvml.Return) {
	set, r := call(func() ([]uint, gn.Return) { return w.d.GetMemoryAffinity(n, gn.AffinityScope(s)) })
	// go-nvml sizes its buffer in bytes, not bits: keep the words that
	// numNodes needs.
	var out []uint64
	for i, v := range set {
		if i < (n+63)/64 {
			out = append(out, uint64(v))
		}
	}
	return out, r
}
func (w dev) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	ps, r := call(w.d.GetComputeRunningProcesses)
	var out []nvml.ProcessInfo
	for _, p := range ps {
		out = append(out, nvml.ProcessInfo{Pid: p.Pid, UsedGpuMemory: p.UsedGpuMemory})
	}
	return out, r
}
func (w dev) GetTopologyCommonAncestor(o nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
	od, ok := o.(dev)
	if !ok {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	l, r := call(func() (gn.GpuTopologyLevel, gn.Return) { return w.d.GetTopologyCommonAncestor(od.d) })
	return nvml.GpuTopologyLevel(l), r
}
func (w dev) GetP2PStatus(o nvml.Device, i nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
	od, ok := o.(dev)
	if !ok {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	s, r := call(func() (gn.GpuP2PStatus, gn.Return) { return w.d.GetP2PStatus(od.d, gn.GpuP2PCapsIndex(i)) })
	return nvml.GpuP2PStatus(s), r
}
func (w dev) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	u, r := call(w.d.GetUtilizationRates)
	return nvml.Utilization{Gpu: u.Gpu, Memory: u.Memory}, r
}
func (w dev) GetPowerUsage() (uint32, nvml.Return)         { return call(w.d.GetPowerUsage) }
func (w dev) GetEnforcedPowerLimit() (uint32, nvml.Return) { return call(w.d.GetEnforcedPowerLimit) }
func (w dev) GetClockInfo(c nvml.ClockType) (uint32, nvml.Return) {
	return call(func() (uint32, gn.Return) { return w.d.GetClockInfo(gn.ClockType(c)) })
}
