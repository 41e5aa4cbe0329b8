// Package nvml is the part of NVIDIA's Management Library that ncclwiz
// asks, bound without cgo: libnvidia-ml.so.1 is opened with dlopen through
// purego at Init, so the binary needs no C toolchain to build, has no
// GLIBC version requirement (docs/development.md, "Portable binaries") and
// starts with LD_BIND_NOW=1 on a machine without the driver.
//
// Names and values follow nvml.h (NVML_* constants, nvml* functions) and
// the method names of github.com/NVIDIA/go-nvml, which tests use through
// internal/nvml/gonvml to check this binding against NVIDIA's own.
package nvml

import "fmt"

// Return is nvmlReturn_t.
type Return int32

// nvmlReturn_t values (nvml.h).
const (
	SUCCESS                       Return = 0
	ERROR_UNINITIALIZED           Return = 1
	ERROR_INVALID_ARGUMENT        Return = 2
	ERROR_NOT_SUPPORTED           Return = 3
	ERROR_NO_PERMISSION           Return = 4
	ERROR_ALREADY_INITIALIZED     Return = 5
	ERROR_NOT_FOUND               Return = 6
	ERROR_INSUFFICIENT_SIZE       Return = 7
	ERROR_INSUFFICIENT_POWER      Return = 8
	ERROR_DRIVER_NOT_LOADED       Return = 9
	ERROR_TIMEOUT                 Return = 10
	ERROR_IRQ_ISSUE               Return = 11
	ERROR_LIBRARY_NOT_FOUND       Return = 12
	ERROR_FUNCTION_NOT_FOUND      Return = 13
	ERROR_CORRUPTED_INFOROM       Return = 14
	ERROR_GPU_IS_LOST             Return = 15
	ERROR_RESET_REQUIRED          Return = 16
	ERROR_OPERATING_SYSTEM        Return = 17
	ERROR_LIB_RM_VERSION_MISMATCH Return = 18
	ERROR_IN_USE                  Return = 19
	ERROR_MEMORY                  Return = 20
	ERROR_NO_DATA                 Return = 21
	ERROR_UNKNOWN                 Return = 999
)

var returnText = map[Return]string{
	SUCCESS: "Success", ERROR_UNINITIALIZED: "Uninitialized", ERROR_INVALID_ARGUMENT: "Invalid Argument",
	ERROR_NOT_SUPPORTED: "Not Supported", ERROR_NO_PERMISSION: "Insufficient Permissions",
	ERROR_ALREADY_INITIALIZED: "Already Initialized", ERROR_NOT_FOUND: "Not Found",
	ERROR_INSUFFICIENT_SIZE: "Insufficient Size", ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
	ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded", ERROR_TIMEOUT: "Timeout", ERROR_IRQ_ISSUE: "Interrupt Request Issue",
	ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found", ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
	ERROR_CORRUPTED_INFOROM: "Corrupted infoROM", ERROR_GPU_IS_LOST: "GPU is lost", ERROR_RESET_REQUIRED: "GPU requires reset",
	ERROR_OPERATING_SYSTEM:        "GPU access blocked by the operating system",
	ERROR_LIB_RM_VERSION_MISMATCH: "Driver/library version mismatch", ERROR_IN_USE: "In use by another client",
	ERROR_MEMORY: "Insufficient Memory", ERROR_NO_DATA: "No data", ERROR_UNKNOWN: "Unknown Error",
}

// Error is nvmlErrorString's text for the codes ncclwiz meets.
func (r Return) Error() string {
	if s, ok := returnText[r]; ok {
		return s
	}
	return fmt.Sprintf("NVML error %d", int32(r))
}

// EnableState is nvmlEnableState_t.
type EnableState int32

// nvmlEnableState_t values.
const (
	FEATURE_DISABLED EnableState = 0
	FEATURE_ENABLED  EnableState = 1
)

// DEVICE_MIG_ENABLE is the MIG mode value of an enabled GPU.
const DEVICE_MIG_ENABLE = 1

// NVLINK_MAX_LINKS bounds the per-device link loop (nvml.h of r580).
const NVLINK_MAX_LINKS = 36

// GpuTopologyLevel is nvmlGpuTopologyLevel_t.
type GpuTopologyLevel int32

// nvmlGpuTopologyLevel_t values.
const (
	TOPOLOGY_INTERNAL   GpuTopologyLevel = 0
	TOPOLOGY_SINGLE     GpuTopologyLevel = 10
	TOPOLOGY_MULTIPLE   GpuTopologyLevel = 20
	TOPOLOGY_HOSTBRIDGE GpuTopologyLevel = 30
	TOPOLOGY_NODE       GpuTopologyLevel = 40
	TOPOLOGY_SYSTEM     GpuTopologyLevel = 50
)

// GpuP2PStatus is nvmlGpuP2PStatus_t.
type GpuP2PStatus int32

// nvmlGpuP2PStatus_t values.
const (
	P2P_STATUS_OK                         GpuP2PStatus = 0
	P2P_STATUS_CHIPSET_NOT_SUPPORTED      GpuP2PStatus = 1
	P2P_STATUS_GPU_NOT_SUPPORTED          GpuP2PStatus = 2
	P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED GpuP2PStatus = 3
	P2P_STATUS_DISABLED_BY_REGKEY         GpuP2PStatus = 4
	P2P_STATUS_NOT_SUPPORTED              GpuP2PStatus = 5
	P2P_STATUS_UNKNOWN                    GpuP2PStatus = 6
)

// GpuP2PCapsIndex is nvmlGpuP2PCapsIndex_t.
type GpuP2PCapsIndex int32

// nvmlGpuP2PCapsIndex_t values.
const (
	P2P_CAPS_INDEX_READ   GpuP2PCapsIndex = 0
	P2P_CAPS_INDEX_WRITE  GpuP2PCapsIndex = 1
	P2P_CAPS_INDEX_NVLINK GpuP2PCapsIndex = 2
)

// ClockType is nvmlClockType_t.
type ClockType int32

// CLOCK_SM is the SM clock domain.
const CLOCK_SM ClockType = 1

// AffinityScope is nvmlAffinityScope_t.
type AffinityScope uint32

// AFFINITY_SCOPE_NODE asks for NUMA nodes (not sockets).
const AFFINITY_SCOPE_NODE AffinityScope = 0

// PciInfo is the part of nvmlPciInfo_t ncclwiz reads.
type PciInfo struct {
	BusID       string // "00000000:18:00.0"
	Domain, Bus uint32
	Device      uint32
	PciDeviceID uint32 // device id << 16 | vendor id
}

// Memory is nvmlMemory_t.
type Memory struct{ Total, Free, Used uint64 }

// Utilization is nvmlUtilization_t.
type Utilization struct{ Gpu, Memory uint32 }

// ProcessInfo is one entry of nvmlDeviceGetComputeRunningProcesses.
type ProcessInfo struct {
	Pid           uint32
	UsedGpuMemory uint64
}

// Interface is the library: Init, then the system and device queries, then
// Shutdown. NVML reference-counts Init.
type Interface interface {
	Init() Return
	Shutdown() Return
	SystemGetDriverVersion() (string, Return)
	SystemGetCudaDriverVersion() (int, Return)
	DeviceGetCount() (int, Return)
	DeviceGetHandleByIndex(int) (Device, Return)
}

// Device is one GPU handle.
type Device interface {
	GetPciInfo() (PciInfo, Return)
	GetName() (string, Return)
	GetUUID() (string, Return)
	GetMemoryInfo() (Memory, Return)
	GetCudaComputeCapability() (int, int, Return)
	GetPersistenceMode() (EnableState, Return)
	GetMigMode() (int, int, Return)
	GetNvLinkState(link int) (EnableState, Return)
	GetNvLinkVersion(link int) (uint32, Return)
	GetMaxPcieLinkGeneration() (int, Return)
	GetCurrPcieLinkGeneration() (int, Return)
	GetMaxPcieLinkWidth() (int, Return)
	GetCurrPcieLinkWidth() (int, Return)
	// GetNumaNodeId is the NUMA node of the GPU's own memory, on platforms
	// where GPU memory is a NUMA node (Grace Hopper, Grace Blackwell).
	GetNumaNodeId() (int, Return)
	// GetMemoryAffinity is the bitmask (64 nodes a word) of the host NUMA
	// nodes nearest the GPU, for a machine of up to numNodes nodes.
	GetMemoryAffinity(numNodes int, scope AffinityScope) ([]uint64, Return)
	GetComputeRunningProcesses() ([]ProcessInfo, Return)
	GetTopologyCommonAncestor(Device) (GpuTopologyLevel, Return)
	GetP2PStatus(Device, GpuP2PCapsIndex) (GpuP2PStatus, Return)
	GetUtilizationRates() (Utilization, Return)
	GetPowerUsage() (uint32, Return)
	GetEnforcedPowerLimit() (uint32, Return)
	GetClockInfo(ClockType) (uint32, Return)
}

// cString turns a NUL-terminated C buffer into a Go string.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
