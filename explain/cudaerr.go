package explain

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// cudaErr is one CUDA error NCCL can surface: NCCL's CUDACHECK prints
// cudaGetErrorString ("Cuda failure '<text>'", every release since 2.3),
// its CUCHECK the driver's code and string ("Cuda failure <code> '<text>'",
// 2.19+); PyTorch says "CUDA error: <text>" and older torch "cuda runtime
// error (<code>) : <text>". The codes are those of CUDA's driver_types.h
// (cudaError_t); the driver API's CUresult uses the same numbers for these.
type cudaErr struct {
	Code  int
	Name  string // cudaError_t enumerator
	Text  string // cudaGetErrorString
	Cause string // what it means for a multi-GPU job
	Guide string
}

// cudaErrors: source CUDA Runtime API, driver_types.h (enum cudaError),
// https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html
var cudaErrors = []cudaErr{
	{1, "cudaErrorInvalidValue", "invalid argument", "a CUDA call got a bad argument; in NCCL's NVLS or cuMem code it means the feature is unsupported by this driver/fabric", "nvls"},
	{2, "cudaErrorMemoryAllocation", "out of memory", "the GPU is out of memory", "gpu-oom-init"},
	{3, "cudaErrorInitializationError", "initialization error", "CUDA could not initialise (often CUDA used before fork)", "cuda-driver"},
	{4, "cudaErrorCudartUnloading", "driver shutting down", "a CUDA call ran during process exit: a consequence of the process ending", "cuda-driver"},
	{35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version", "the driver is older than the CUDA runtime", "cuda-driver"},
	{46, "cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable", "the GPU is in exclusive mode and taken, or unavailable", "cuda-driver"},
	{100, "cudaErrorNoDevice", "no CUDA-capable device is detected", "no GPU is visible to the process", "cuda-driver"},
	{101, "cudaErrorInvalidDevice", "invalid device ordinal", "the rank's GPU index does not exist (LOCAL_RANK beyond the visible GPUs)", "device-mapping"},
	{214, "cudaErrorECCUncorrectable", "uncorrectable ECC error encountered", "a hardware memory error on the GPU", "gpu-xid"},
	{217, "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices", "the GPUs cannot reach each other's memory (P2P blocked by the platform or hypervisor)", "p2p-acs-iommu"},
	{220, "cudaErrorNvlinkUncorrectable", "uncorrectable NVLink error detected during the execution", "an NVLink hardware error", "gpu-xid"},
	{400, "cudaErrorInvalidResourceHandle", "invalid resource handle", "a stream or event of another device: the rank's current device is not the one its communicator uses (set torch.cuda.set_device before init)", "device-mapping"},
	{700, "cudaErrorIllegalAddress", "an illegal memory access was encountered", "a kernel faulted; the context is lost", "cuda-kernel-fault"},
	{702, "cudaErrorLaunchTimeout", "the launch timed out and was terminated", "a kernel ran past the display watchdog; the context is lost", "cuda-kernel-fault"},
	{710, "cudaErrorAssert", "device-side assert triggered", "an assert in the application's kernel (not NCCL)", "cuda-kernel-fault"},
	{714, "cudaErrorHardwareStackError", "hardware stack error", "a kernel's call stack overflowed or was corrupted; the context is lost", "cuda-kernel-fault"},
	{715, "cudaErrorIllegalInstruction", "an illegal instruction was encountered", "a kernel faulted (wrong architecture or corrupt code); the context is lost", "cuda-kernel-fault"},
	{716, "cudaErrorMisalignedAddress", "misaligned address", "a kernel faulted; the context is lost", "cuda-kernel-fault"},
	{717, "cudaErrorInvalidAddressSpace", "operation not supported on global/shared address space", "a kernel faulted; the context is lost", "cuda-kernel-fault"},
	{718, "cudaErrorInvalidPc", "invalid program counter", "a kernel faulted; the context is lost", "cuda-kernel-fault"},
	{719, "cudaErrorLaunchFailure", "unspecified launch failure", "a kernel faulted; the context is lost", "cuda-kernel-fault"},
	{800, "cudaErrorNotPermitted", "operation not permitted", "not permitted: IMEX channel permissions on multi-node NVLink, or a container without the capability", "cuda-driver"},
	{801, "cudaErrorNotSupported", "operation not supported", "the driver or platform lacks a feature NCCL tried (NVLS multicast, cuMem, fabric handles)", "nvls"},
	{802, "cudaErrorSystemNotReady", "system not yet initialized", "NVSwitch system whose Fabric Manager is not running", "fabric-manager"},
	{803, "cudaErrorSystemDriverMismatch", "system has unsupported display driver / cuda driver combination", "the kernel module and the user-space driver differ (upgrade without reboot)", "cuda-driver"},
	{804, "cudaErrorCompatNotSupportedOnDevice", "forward compatibility was attempted on non supported HW", "the CUDA forward-compatibility package does not support this GPU", "cuda-driver"},
	{999, "cudaErrorUnknown", "unknown error", "the driver failed without a reason: often a GPU that fell off the bus or a driver upgraded without a reboot", "gpu-xid"},
}

// reCudaErr finds a CUDA error in NCCL's, nccl-tests' or PyTorch's wording,
// or by enumerator name.
var reCudaErr = regexp.MustCompile(`(?:Cuda failure|CUDA failure \S+)(?: (\d+))? '([^']+)'|CUDA error: ([^\r\n]+?)\s*$|cuda runtime error \((\d+)\) : ([^\r\n]+?)(?: at \S+)?\s*$|\b(cudaError[A-Z]\w+|CUDA_ERROR_[A-Z_]+)\b`)

// lookupCudaError names the CUDA error in text, if any: by code when one is
// printed, else by its string or enumerator name.
func lookupCudaError(text string) (cudaErr, bool) {
	sm := reCudaErr.FindStringSubmatch(text)
	if sm == nil {
		// Other wordings print the string after the code ("failed to
		// peer with device 1(=2000): 217 peer access is not supported
		// ..."): a long, distinctive string is enough.
		for _, c := range cudaErrors {
			if len(c.Text) >= 20 && strings.Contains(text, c.Text) {
				return c, true
			}
		}
		return cudaErr{}, false
	}
	code, msg, name := sm[1]+sm[4], sm[2]+sm[3]+sm[5], sm[6]
	var byCode *cudaErr
	if n, err := strconv.Atoi(code); err == nil {
		for i, c := range cudaErrors {
			if c.Code == n {
				byCode = &cudaErrors[i]
			}
		}
	}
	if byCode != nil && (msg == "" || byCode.Text == msg) {
		return *byCode, true
	}
	// CUDA before 10.1 numbered errors differently ("cuda runtime error
	// (4) : unspecified launch failure"): a known string wins over the code.
	for _, c := range cudaErrors {
		if (msg != "" && c.Text == msg) || (name != "" && c.Name == name) {
			return c, true
		}
	}
	if byCode != nil { // a driver's own wording of a known code
		return *byCode, true
	}
	return cudaErr{}, false
}

// addCudaError fills a diagnosis's cuda_code / cuda_name fields and says
// what the error means, from the first text that names a CUDA error.
func addCudaError(d *Diagnosis, texts ...string) {
	for _, t := range texts {
		c, ok := lookupCudaError(t)
		if !ok {
			continue
		}
		d.Fields["cuda_code"] = strconv.Itoa(c.Code)
		d.Fields["cuda_name"] = c.Name
		msg := fmt.Sprintf("CUDA error %d (%s, %q): %s.", c.Code, c.Name, c.Text, c.Cause)
		if c.Guide != d.Guide {
			msg += " Guide: ncclwiz guides " + c.Guide + "."
		}
		d.Advice = append(d.Advice, msg)
		return
	}
}
