//go:build !nonvml

package nvml

import (
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Available is true: this build opens the driver's library at Init.
const Available = true

// DefaultLibrary is the soname the NVIDIA driver installs.
const DefaultLibrary = "libnvidia-ml.so.1"

// New returns the driver's NVML, opened from DefaultLibrary at the first Init.
func New() Interface { return NewFrom(DefaultLibrary) }

// NewFrom returns NVML opened from path (a soname searched the way dlopen
// searches, or a file) at the first Init.
func NewFrom(path string) Interface { return &library{path: path} }

// library binds libnvidia-ml with purego: symbols are looked up with dlsym
// after dlopen, so a missing function is ERROR_FUNCTION_NOT_FOUND, never an
// undefined symbol at load time.
type library struct {
	path   string
	mu     sync.Mutex
	loaded bool
	loadOK Return
	f      funcs
}

// C layouts (nvml.h, LP64).
type cPciInfo struct {
	BusIDLegacy                                      [16]byte
	Domain, Bus, Device, PciDeviceID, PciSubSystemID uint32
	BusID                                            [32]byte
}

type cProcessV1 struct {
	Pid           uint32
	_             uint32
	UsedGpuMemory uint64
}

type cProcessV2 struct {
	Pid                              uint32
	_                                uint32
	UsedGpuMemory                    uint64
	GpuInstanceID, ComputeInstanceID uint32
}

type funcs struct {
	init, shutdown    func() Return
	driverVersion     func(*byte, uint32) Return
	cudaDriverVersion func(*int32) Return
	count             func(*uint32) Return
	byIndex           func(uint32, *uintptr) Return

	pciInfo             func(uintptr, *cPciInfo) Return
	name, uuid          func(uintptr, *byte, uint32) Return
	memory              func(uintptr, *Memory) Return
	cc                  func(uintptr, *int32, *int32) Return
	persistence         func(uintptr, *EnableState) Return
	mig                 func(uintptr, *uint32, *uint32) Return
	nvlinkState         func(uintptr, uint32, *EnableState) Return
	nvlinkVersion       func(uintptr, uint32, *uint32) Return
	maxGen, currGen     func(uintptr, *uint32) Return
	maxWidth, currWidth func(uintptr, *uint32) Return
	numa                func(uintptr, *uint32) Return
	memAffinity         func(uintptr, uint32, *uint64, AffinityScope) Return
	procs               func(uintptr, *uint32, unsafe.Pointer) Return
	procsV1             bool // procs takes nvmlProcessInfo_v1_t (16 bytes), not v2 (24)
	topo                func(uintptr, uintptr, *GpuTopologyLevel) Return
	p2p                 func(uintptr, uintptr, GpuP2PCapsIndex, *GpuP2PStatus) Return
	util                func(uintptr, *Utilization) Return
	power, powerLimit   func(uintptr, *uint32) Return
	clock               func(uintptr, ClockType, *uint32) Return
}

// bind registers fn for the first of names the library exports; false when
// none is there (fn stays nil).
func bind(handle uintptr, fn any, names ...string) bool {
	for _, n := range names {
		if addr, err := purego.Dlsym(handle, n); err == nil && addr != 0 {
			purego.RegisterFunc(fn, addr)
			return true
		}
	}
	return false
}

func (l *library) load() Return {
	if l.loaded {
		return l.loadOK
	}
	l.loaded = true
	handle, err := purego.Dlopen(l.path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil || handle == 0 {
		l.loadOK = ERROR_LIBRARY_NOT_FOUND
		return l.loadOK
	}
	f := &l.f
	if !bind(handle, &f.init, "nvmlInit_v2", "nvmlInit") || !bind(handle, &f.shutdown, "nvmlShutdown") {
		l.loadOK = ERROR_FUNCTION_NOT_FOUND
		return l.loadOK
	}
	bind(handle, &f.driverVersion, "nvmlSystemGetDriverVersion")
	bind(handle, &f.cudaDriverVersion, "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")
	bind(handle, &f.count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount")
	bind(handle, &f.byIndex, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex")
	// v1 of nvmlDeviceGetPciInfo has an older struct; v2 and v3 share today's.
	bind(handle, &f.pciInfo, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2")
	bind(handle, &f.name, "nvmlDeviceGetName")
	bind(handle, &f.uuid, "nvmlDeviceGetUUID")
	bind(handle, &f.memory, "nvmlDeviceGetMemoryInfo")
	bind(handle, &f.cc, "nvmlDeviceGetCudaComputeCapability")
	bind(handle, &f.persistence, "nvmlDeviceGetPersistenceMode")
	bind(handle, &f.mig, "nvmlDeviceGetMigMode")
	bind(handle, &f.nvlinkState, "nvmlDeviceGetNvLinkState")
	bind(handle, &f.nvlinkVersion, "nvmlDeviceGetNvLinkVersion")
	bind(handle, &f.maxGen, "nvmlDeviceGetMaxPcieLinkGeneration")
	bind(handle, &f.currGen, "nvmlDeviceGetCurrPcieLinkGeneration")
	bind(handle, &f.maxWidth, "nvmlDeviceGetMaxPcieLinkWidth")
	bind(handle, &f.currWidth, "nvmlDeviceGetCurrPcieLinkWidth")
	bind(handle, &f.numa, "nvmlDeviceGetNumaNodeId")
	bind(handle, &f.memAffinity, "nvmlDeviceGetMemoryAffinity")
	if !bind(handle, &f.procs, "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2") {
		f.procsV1 = bind(handle, &f.procs, "nvmlDeviceGetComputeRunningProcesses")
	}
	bind(handle, &f.topo, "nvmlDeviceGetTopologyCommonAncestor")
	bind(handle, &f.p2p, "nvmlDeviceGetP2PStatus")
	bind(handle, &f.util, "nvmlDeviceGetUtilizationRates")
	bind(handle, &f.power, "nvmlDeviceGetPowerUsage")
	bind(handle, &f.powerLimit, "nvmlDeviceGetEnforcedPowerLimit")
	bind(handle, &f.clock, "nvmlDeviceGetClockInfo")
	l.loadOK = SUCCESS
	return l.loadOK
}

// Init opens the library on first use, then calls nvmlInit_v2.
func (l *library) Init() Return {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.load(); r != SUCCESS {
		return r
	}
	return l.f.init()
}

// Shutdown balances one successful Init. The library stays mapped: NVML
// keeps threads of its own, and unmapping under them is not safe.
func (l *library) Shutdown() Return {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loadOK != SUCCESS || !l.loaded {
		return ERROR_UNINITIALIZED
	}
	return l.f.shutdown()
}

func (l *library) SystemGetDriverVersion() (string, Return) {
	if l.f.driverVersion == nil {
		return "", ERROR_FUNCTION_NOT_FOUND
	}
	buf := make([]byte, 80) // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
	r := l.f.driverVersion(&buf[0], uint32(len(buf)))
	return cString(buf), r
}

func (l *library) SystemGetCudaDriverVersion() (int, Return) {
	if l.f.cudaDriverVersion == nil {
		return 0, ERROR_FUNCTION_NOT_FOUND
	}
	var v int32
	r := l.f.cudaDriverVersion(&v)
	return int(v), r
}

func (l *library) DeviceGetCount() (int, Return) {
	if l.f.count == nil {
		return 0, ERROR_FUNCTION_NOT_FOUND
	}
	var n uint32
	r := l.f.count(&n)
	return int(n), r
}

func (l *library) DeviceGetHandleByIndex(i int) (Device, Return) {
	if l.f.byIndex == nil {
		return nil, ERROR_FUNCTION_NOT_FOUND
	}
	var h uintptr
	if r := l.f.byIndex(uint32(i), &h); r != SUCCESS {
		return nil, r
	}
	return device{l: l, h: h}, SUCCESS
}

// device is an nvmlDevice_t.
type device struct {
	l *library
	h uintptr
}

func (d device) GetPciInfo() (PciInfo, Return) {
	if d.l.f.pciInfo == nil {
		return PciInfo{}, ERROR_FUNCTION_NOT_FOUND
	}
	var c cPciInfo
	if r := d.l.f.pciInfo(d.h, &c); r != SUCCESS {
		return PciInfo{}, r
	}
	return PciInfo{BusID: cString(c.BusID[:]), Domain: c.Domain, Bus: c.Bus, Device: c.Device, PciDeviceID: c.PciDeviceID}, SUCCESS
}

func (d device) str(fn func(uintptr, *byte, uint32) Return) (string, Return) {
	if fn == nil {
		return "", ERROR_FUNCTION_NOT_FOUND
	}
	buf := make([]byte, 96) // NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE
	r := fn(d.h, &buf[0], uint32(len(buf)))
	if r != SUCCESS {
		return "", r
	}
	return cString(buf), r
}

func (d device) GetName() (string, Return) { return d.str(d.l.f.name) }
func (d device) GetUUID() (string, Return) { return d.str(d.l.f.uuid) }

func (d device) GetMemoryInfo() (Memory, Return) {
	if d.l.f.memory == nil {
		return Memory{}, ERROR_FUNCTION_NOT_FOUND
	}
	var m Memory
	r := d.l.f.memory(d.h, &m)
	return m, r
}

func (d device) GetCudaComputeCapability() (int, int, Return) {
	if d.l.f.cc == nil {
		return 0, 0, ERROR_FUNCTION_NOT_FOUND
	}
	var maj, mnr int32
	r := d.l.f.cc(d.h, &maj, &mnr)
	return int(maj), int(mnr), r
}

func (d device) GetPersistenceMode() (EnableState, Return) {
	if d.l.f.persistence == nil {
		return 0, ERROR_FUNCTION_NOT_FOUND
	}
	var s EnableState
	r := d.l.f.persistence(d.h, &s)
	return s, r
}

func (d device) GetMigMode() (int, int, Return) {
	if d.l.f.mig == nil {
		return 0, 0, ERROR_FUNCTION_NOT_FOUND
	}
	var cur, pend uint32
	r := d.l.f.mig(d.h, &cur, &pend)
	return int(cur), int(pend), r
}

func (d device) GetNvLinkState(link int) (EnableState, Return) {
	if d.l.f.nvlinkState == nil {
		return 0, ERROR_FUNCTION_NOT_FOUND
	}
	var s EnableState
	r := d.l.f.nvlinkState(d.h, uint32(link), &s)
	return s, r
}

func (d device) GetNvLinkVersion(link int) (uint32, Return) {
	if d.l.f.nvlinkVersion == nil {
		return 0, ERROR_FUNCTION_NOT_FOUND
	}
	var v uint32
	r := d.l.f.nvlinkVersion(d.h, uint32(link), &v)
	return v, r
}

func (d device) u32(fn func(uintptr, *uint32) Return) (uint32, Return) {
	if fn == nil {
		return 0, ERROR_FUNCTION_NOT_FOUND
	}
	var v uint32
	r := fn(d.h, &v)
	return v, r
}

func (d device) GetMaxPcieLinkGeneration() (int, Return) {
	v, r := d.u32(d.l.f.maxGen)
	return int(v), r
}

func (d device) GetCurrPcieLinkGeneration() (int, Return) {
	v, r := d.u32(d.l.f.currGen)
	return int(v), r
}

func (d device) GetMaxPcieLinkWidth() (int, Return) {
	v, r := d.u32(d.l.f.maxWidth)
	return int(v), r
}

func (d device) GetCurrPcieLinkWidth() (int, Return) {
	v, r := d.u32(d.l.f.currWidth)
	return int(v), r
}

func (d device) GetNumaNodeId() (int, Return) {
	v, r := d.u32(d.l.f.numa)
	return int(v), r
}

func (d device) GetMemoryAffinity(numNodes int, scope AffinityScope) ([]uint64, Return) {
	if d.l.f.memAffinity == nil {
		return nil, ERROR_FUNCTION_NOT_FOUND
	}
	if numNodes <= 0 {
		return nil, ERROR_INVALID_ARGUMENT
	}
	set := make([]uint64, (numNodes+63)/64)
	if r := d.l.f.memAffinity(d.h, uint32(len(set)), &set[0], scope); r != SUCCESS {
		return nil, r
	}
	return set, SUCCESS
}

// maxProcs bounds the buffer a hostile or broken driver can make us grow.
const maxProcs = 1 << 14

func (d device) GetComputeRunningProcesses() ([]ProcessInfo, Return) {
	fn := d.l.f.procs
	if fn == nil {
		return nil, ERROR_FUNCTION_NOT_FOUND
	}
	for n := uint32(32); n <= maxProcs; n *= 2 {
		count := n
		var r Return
		var out []ProcessInfo
		if d.l.f.procsV1 {
			buf := make([]cProcessV1, n)
			r = fn(d.h, &count, unsafe.Pointer(&buf[0]))
			if r == SUCCESS {
				for _, p := range buf[:min(count, n)] {
					out = append(out, ProcessInfo{Pid: p.Pid, UsedGpuMemory: p.UsedGpuMemory})
				}
			}
		} else {
			buf := make([]cProcessV2, n)
			r = fn(d.h, &count, unsafe.Pointer(&buf[0]))
			if r == SUCCESS {
				for _, p := range buf[:min(count, n)] {
					out = append(out, ProcessInfo{Pid: p.Pid, UsedGpuMemory: p.UsedGpuMemory})
				}
			}
		}
		if r != ERROR_INSUFFICIENT_SIZE {
			return out, r
		}
	}
	return nil, ERROR_INSUFFICIENT_SIZE
}

func other(o Device) (uintptr, bool) {
	od, ok := o.(device)
	return od.h, ok
}

func (d device) GetTopologyCommonAncestor(o Device) (GpuTopologyLevel, Return) {
	oh, ok := other(o)
	if !ok {
		return 0, ERROR_INVALID_ARGUMENT
	}
	if d.l.f.topo == nil {
		return 0, ERROR_FUNCTION_NOT_FOUND
	}
	var lv GpuTopologyLevel
	r := d.l.f.topo(d.h, oh, &lv)
	return lv, r
}

func (d device) GetP2PStatus(o Device, idx GpuP2PCapsIndex) (GpuP2PStatus, Return) {
	oh, ok := other(o)
	if !ok {
		return 0, ERROR_INVALID_ARGUMENT
	}
	if d.l.f.p2p == nil {
		return 0, ERROR_FUNCTION_NOT_FOUND
	}
	var st GpuP2PStatus
	r := d.l.f.p2p(d.h, oh, idx, &st)
	return st, r
}

func (d device) GetUtilizationRates() (Utilization, Return) {
	if d.l.f.util == nil {
		return Utilization{}, ERROR_FUNCTION_NOT_FOUND
	}
	var u Utilization
	r := d.l.f.util(d.h, &u)
	return u, r
}

func (d device) GetPowerUsage() (uint32, Return)         { return d.u32(d.l.f.power) }
func (d device) GetEnforcedPowerLimit() (uint32, Return) { return d.u32(d.l.f.powerLimit) }

func (d device) GetClockInfo(t ClockType) (uint32, Return) {
	if d.l.f.clock == nil {
		return 0, ERROR_FUNCTION_NOT_FOUND
	}
	var v uint32
	r := d.l.f.clock(d.h, t, &v)
	return v, r
}
