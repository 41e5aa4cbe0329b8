package nvml

// Sim is a simulated NVML: a practice scenario's GPU server, or a test's.
// It needs no driver and no cgo, so practice servers have GPUs in every
// build. A zero field is a value NVML does not report (NOT_SUPPORTED).
type Sim struct {
	Driver     string
	CUDA       int    // 12040 for 12.4
	InitReturn Return // what Init answers (SUCCESS by default)
	GPUs       []*SimGPU
	// Topology and P2P between GPUs i and j (i != j); nil: NOT_SUPPORTED.
	Topology func(i, j int) GpuTopologyLevel
	P2P      func(i, j int, c GpuP2PCapsIndex) GpuP2PStatus
}

// SimGPU is one simulated GPU.
type SimGPU struct {
	Name, UUID, BusID   string
	Domain, Bus, PCIID  uint32
	MemTotal, MemUsed   uint64
	CCMajor, CCMinor    int
	Persistence         EnableState
	MIG                 bool
	NVLinks             int
	NVLinkVersion       uint32
	PCIeGen, PCIeWidth  int
	NUMANode            int // the GPU memory's own NUMA node; -1: not a NUMA node
	HostNUMA            int // nearest host NUMA node; -1: not reported
	Processes           []ProcessInfo
	Util                *Utilization
	PowerMW, PowerLimit uint32
	SMClockMHz          uint32
	Lost                bool
}

func (s *Sim) Init() Return     { return s.InitReturn }
func (s *Sim) Shutdown() Return { return SUCCESS }

func (s *Sim) SystemGetDriverVersion() (string, Return) { return s.Driver, SUCCESS }

func (s *Sim) SystemGetCudaDriverVersion() (int, Return) { return s.CUDA, SUCCESS }

func (s *Sim) DeviceGetCount() (int, Return) { return len(s.GPUs), SUCCESS }

func (s *Sim) DeviceGetHandleByIndex(i int) (Device, Return) {
	if i < 0 || i >= len(s.GPUs) {
		return nil, ERROR_INVALID_ARGUMENT
	}
	return simDevice{s: s, i: i}, SUCCESS
}

type simDevice struct {
	s *Sim
	i int
}

func (d simDevice) g() *SimGPU { return d.s.GPUs[d.i] }

func (d simDevice) lost() bool { return d.g().Lost }

func (d simDevice) GetPciInfo() (PciInfo, Return) {
	g := d.g()
	return PciInfo{BusID: g.BusID, Domain: g.Domain, Bus: g.Bus, PciDeviceID: g.PCIID}, SUCCESS
}

func (d simDevice) GetName() (string, Return) {
	if d.lost() {
		return "", ERROR_GPU_IS_LOST
	}
	return d.g().Name, SUCCESS
}

func (d simDevice) GetUUID() (string, Return) {
	if d.g().UUID == "" {
		return "", ERROR_NOT_SUPPORTED
	}
	return d.g().UUID, SUCCESS
}

func (d simDevice) GetMemoryInfo() (Memory, Return) {
	g := d.g()
	return Memory{Total: g.MemTotal, Used: g.MemUsed, Free: g.MemTotal - min(g.MemUsed, g.MemTotal)}, SUCCESS
}

func (d simDevice) GetCudaComputeCapability() (int, int, Return) {
	return d.g().CCMajor, d.g().CCMinor, SUCCESS
}

func (d simDevice) GetPersistenceMode() (EnableState, Return) { return d.g().Persistence, SUCCESS }

func (d simDevice) GetMigMode() (int, int, Return) {
	if d.g().MIG {
		return DEVICE_MIG_ENABLE, DEVICE_MIG_ENABLE, SUCCESS
	}
	return 0, 0, SUCCESS
}

func (d simDevice) GetNvLinkState(l int) (EnableState, Return) {
	if l >= d.g().NVLinks {
		return FEATURE_DISABLED, ERROR_NOT_SUPPORTED
	}
	return FEATURE_ENABLED, SUCCESS
}

func (d simDevice) GetNvLinkVersion(l int) (uint32, Return) {
	if l >= d.g().NVLinks {
		return 0, ERROR_NOT_SUPPORTED
	}
	return d.g().NVLinkVersion, SUCCESS
}

func orNot(v int) (int, Return) {
	if v == 0 {
		return 0, ERROR_NOT_SUPPORTED
	}
	return v, SUCCESS
}

func (d simDevice) GetMaxPcieLinkGeneration() (int, Return)  { return orNot(d.g().PCIeGen) }
func (d simDevice) GetCurrPcieLinkGeneration() (int, Return) { return orNot(d.g().PCIeGen) }
func (d simDevice) GetMaxPcieLinkWidth() (int, Return)       { return orNot(d.g().PCIeWidth) }
func (d simDevice) GetCurrPcieLinkWidth() (int, Return)      { return orNot(d.g().PCIeWidth) }

func (d simDevice) GetNumaNodeId() (int, Return) {
	if d.g().NUMANode < 0 {
		return 0, ERROR_NOT_SUPPORTED
	}
	return d.g().NUMANode, SUCCESS
}

func (d simDevice) GetMemoryAffinity(numNodes int, _ AffinityScope) ([]uint64, Return) {
	n := d.g().HostNUMA
	if n < 0 {
		return nil, ERROR_NOT_SUPPORTED
	}
	if numNodes <= 0 {
		return nil, ERROR_INVALID_ARGUMENT
	}
	set := make([]uint64, (numNodes+63)/64)
	if n/64 < len(set) {
		set[n/64] = 1 << (n % 64)
	}
	return set, SUCCESS
}

func (d simDevice) GetComputeRunningProcesses() ([]ProcessInfo, Return) {
	return append([]ProcessInfo(nil), d.g().Processes...), SUCCESS
}

func (d simDevice) GetTopologyCommonAncestor(o Device) (GpuTopologyLevel, Return) {
	od, ok := o.(simDevice)
	if !ok || d.s.Topology == nil {
		return 0, ERROR_NOT_SUPPORTED
	}
	if od.i == d.i {
		return TOPOLOGY_INTERNAL, SUCCESS
	}
	return d.s.Topology(d.i, od.i), SUCCESS
}

func (d simDevice) GetP2PStatus(o Device, c GpuP2PCapsIndex) (GpuP2PStatus, Return) {
	od, ok := o.(simDevice)
	if !ok || d.s.P2P == nil {
		return 0, ERROR_NOT_SUPPORTED
	}
	return d.s.P2P(d.i, od.i, c), SUCCESS
}

func (d simDevice) GetUtilizationRates() (Utilization, Return) {
	if d.g().Util == nil {
		return Utilization{}, ERROR_NOT_SUPPORTED
	}
	return *d.g().Util, SUCCESS
}

func u32(v uint32) (uint32, Return) {
	if v == 0 {
		return 0, ERROR_NOT_SUPPORTED
	}
	return v, SUCCESS
}

func (d simDevice) GetPowerUsage() (uint32, Return)         { return u32(d.g().PowerMW) }
func (d simDevice) GetEnforcedPowerLimit() (uint32, Return) { return u32(d.g().PowerLimit) }
func (d simDevice) GetClockInfo(ClockType) (uint32, Return) { return u32(d.g().SMClockMHz) }
