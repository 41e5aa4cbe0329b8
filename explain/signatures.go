package explain

import (
	"regexp"

	"github.com/ncclwiz/ncclwiz/guides"
)

// Roles used in diagnoses. The first four are the guides package's; warning
// marks a signature that is never a failure on its own.
const (
	RoleCause       = guides.RoleCause
	RoleWrapper     = guides.RoleWrapper
	RoleConsequence = guides.RoleConsequence
	RoleContext     = guides.RoleContext
	RoleWarning     = "warning"
)

// Confidence levels.
const (
	High   = "high"
	Medium = "medium"
	Low    = "low"
)

// idUnrecognisedWarn names an NCCL WARN line no signature explains. It is
// shown only when nothing better was found.
const idUnrecognisedWarn = "nccl-warn-unrecognised"

// idCatalogWarning names an NCCL warning the catalogue knows and places in
// the subsystem of its source file rather than naming a cause.
const idCatalogWarning = "nccl-warning"

// titles are short per-signature headings (a guide's title covers all of
// its signatures; a diagnosis names the one that fired). A signature
// without a title here falls back to its guide's title.
var titles = map[string]string{
	"shm-create-nospace":          "/dev/shm ran out of space for an NCCL segment",
	"shm-create-failed":           "NCCL could not create a shared-memory segment",
	"shm-sigbus":                  "A process died of SIGBUS (bus error)",
	"shm-attach-enoent":           "A shared-memory segment vanished before a peer attached",
	"shm-attach-size0":            "Ranks disagree on cuMem host memory (segment of size 0)",
	"shm-unlink-enoent":           "A shared-memory segment was removed behind NCCL's back",
	"cumem-host-alloc":            "cuMem host allocation failed in the SHM transport",
	"watchdog-timeout":            "A collective timed out (PyTorch watchdog)",
	"watchdog-seq-status":         "Watchdog sequence numbers",
	"heartbeat-monitor":           "The ProcessGroupNCCL watchdog itself got stuck",
	"barrier-device-unknown":      "barrier() guessed which GPU this rank uses",
	"duplicate-gpu":               "Two ranks use the same GPU",
	"no-socket-interface":         "No usable network interface for NCCL",
	"socket-connect-failed":       "A rank could not connect to a peer over TCP",
	"socket-msg-truncated":        "Ranks exchanged messages of different sizes",
	"peer-closed":                 "A peer closed its connection",
	"nccl-remote-error":           "NCCL reports a remote error",
	"nccl-unhandled-system-error": "NCCL returned \"unhandled system error\"",
	"nccl-unhandled-cuda-error":   "NCCL returned \"unhandled cuda error\"",
	"nccl-invalid-usage":          "NCCL returned \"invalid usage\"",
	"nccl-internal-error":         "NCCL returned \"internal error\"",
	"nccl-invalid-argument":       "NCCL returned \"invalid argument\"",
	"proxy-failure":               "NCCL's proxy thread failed",
	"nccl-async-teardown":         "PyTorch took the process down after an NCCL failure",
	"torchrun-child-failed":       "torchrun reports failed workers",
	"ib-completion-error":         "InfiniBand/RoCE completion error",
	"ib-memlock":                  "RDMA memory registration failed (locked-memory limit)",
	"roce-gid":                    "RoCE queue-pair setup failed (GID index)",
	"p2p-hang-acs-iommu":          "Possible PCIe peer-to-peer hang (ACS/IOMMU)",
	"p2p-disabled-nvlink":         "P2P disabled between NVLink-connected GPUs",
	"accelerate-rtx40":            "accelerate refuses P2P/IB on RTX 40-series GPUs",
	"cuda-init-failure":           "CUDA could not initialise",
	"fabric-manager-not-ready":    "NVSwitch system not initialised (Fabric Manager)",
	"nvls-alloc-failure":          "NVLink SHARP (NVLS) buffer allocation failed",
	"nvml-gpu-not-visible":        "NVML cannot see a GPU NCCL needs",
	"nccl-version-mismatch":       "Ranks run different NCCL builds",
	"bootstrap-mismatch":          "Bootstrap cross-talk or inconsistent ranks",
	"master-port-in-use":          "The master port is already in use",
	"store-rendezvous-timeout":    "Rendezvous timed out: not every rank joined",
	"gpu-oom-init":                "Out of GPU memory while NCCL set up",
	"fd-exhaustion":               "Too many open files",
	"gpu-xid":                     "The GPU driver reported an Xid error",
	"cuda-kernel-fault":           "A GPU kernel faulted; NCCL only reported it",
	"deprecated-env-name":         "Deprecated PyTorch NCCL variable name",
	idUnrecognisedWarn:            "NCCL warning not in ncclwiz's catalogue",
}

// precedence orders signatures from specific to generic. It decides which
// of two signatures matching the same line is kept, and orders causes when
// timestamps cannot (§1.3: fabric-manager-not-ready before
// cuda-init-failure, a Last error payload before its wrapper, …). Ids not
// listed sort after the listed ones of the same role.
var precedence = []string{
	"gpu-xid", "fabric-manager-not-ready", "nccl-version-mismatch", "accelerate-rtx40",
	"nccl-not-built", "no-gpu-visible", "store-libuv-missing", "mnnvl-imex",
	"duplicate-gpu", "shm-attach-size0", "cumem-host-alloc", "cumem-alloc-failure", "shm-create-nospace",
	"shm-sigbus", "shm-permission-denied", "shm-create-failed", "shm-attach-enoent", "shm-unlink-enoent",
	"nvls-alloc-failure", "p2p-unsupported", "p2p-import-failed", "p2p-disabled-nvlink", "gpu-oom-init", "ib-memlock", "roce-gid",
	"ib-completion-error", "topology-mismatch", "topology-detection-failed", "network-not-found",
	"fd-exhaustion", "no-socket-interface", "master-port-in-use",
	"bootstrap-mismatch", "socket-msg-truncated", "socket-connect-failed",
	"nvml-gpu-not-visible", "invalid-device-ordinal", "cuda-init-failure", "cuda-kernel-fault",
	// What a waiting rank sees: outranked by any cause above.
	"heartbeat-monitor", "watchdog-timeout", "gloo-timeout", "store-rendezvous-timeout",
	"p2p-hang-acs-iommu", "barrier-device-unknown",
	// Wrappers, then consequences.
	"proxy-failure", "nccl-unhandled-cuda-error", "nccl-unhandled-system-error",
	"nccl-invalid-usage", "nccl-internal-error", "nccl-invalid-argument",
	"nccl-remote-error", "peer-closed", "nccl-async-teardown", "torchrun-child-failed",
	idCatalogWarning, idUnrecognisedWarn,
}

// waiters are causes seen by a rank that waited for others (a timeout).
// When any other cause is present they are reported as its likely
// consequence, not as the root cause.
var waiters = map[string]bool{
	"watchdog-timeout":         true,
	"heartbeat-monitor":        true,
	"store-rendezvous-timeout": true,
}

// launcherOnly are consequences a launcher prints after any worker failure,
// NCCL or not; alone they are no NCCL diagnosis.
var launcherOnly = map[string]bool{"torchrun-child-failed": true}

// warningSignatures are printed by healthy jobs too: they become notes, not
// diagnoses. barrier-device-unknown is promoted to a low-confidence
// diagnosis when the job also hung or two ranks shared a GPU (§1.3: the
// barrier warning is benign "when mapping is correct").
var warningSignatures = map[string]bool{
	"barrier-device-unknown": true,
	"deprecated-env-name":    true,
}

// benign lists lines that look alarming but are not failures (reference
// §1.3). A line matching one of them never becomes a diagnosis, whatever
// signature it also matches; some feed the NCCL_DEBUG digest instead.
var benign = []struct {
	Name    string
	Re      *regexp.Regexp
	Sample  string
	Literal string // prefilter literal (lower case)
}{
	{"net-plugin-missing", regexp.MustCompile(`NET/Plugin ?: (?:No plugin found \(libnccl-net\.so\)|Could not find:? libnccl-net\S*\.so|Plugin load returned)`),
		"ubuntu:39964:39964 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation", "net/plugin"},
	{"tuner-plugin-missing", regexp.MustCompile(`TUNER/Plugin ?: (?:Could not find:? libnccl-tuner\S*\.so|Plugin load returned)`),
		"node0:1211:1211 [0] NCCL INFO TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.", "tuner/plugin"},
	{"libibverbs-missing", regexp.MustCompile(`Failed to open libibverbs\.so`),
		"gpu1:2234:2234 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]", "failed to open libibverbs"},
	{"ib-no-device", regexp.MustCompile(`NET/IB ?: No device found\.?`),
		"iZ8vb69v6s60nfnp50dd1dZ:297:297 [0] NCCL INFO NET/IB : No device found.", "net/ib"},
	{"nvls-not-available", regexp.MustCompile(`NVLS multicast support is not available on dev \d+`),
		"node0:1211:1290 [3] NCCL INFO NVLS multicast support is not available on dev 3", "nvls multicast support is not available"},
	{"p2p-disabled-pcie", regexp.MustCompile(`NCCL INFO P2P is disabled between connected GPUs \d+ and \d+`),
		"node0:1211:1290 [0] NCCL INFO P2P is disabled between connected GPUs 0 and 1.", "p2p is disabled between connected gpus"},
	{"connect-retrying", regexp.MustCompile(`Call to connect returned Connection refused, retrying`),
		"node1:5521:5590 [0] NCCL INFO Call to connect returned Connection refused, retrying", "call to connect returned connection refused, retrying"},
	{"cumem-host-fallback", regexp.MustCompile(`cuMem host allocations do not appear to be working; falling back`),
		"node0:774:854 [0] NCCL INFO cuMem host allocations do not appear to be working; falling back to a /dev/shm/ based implementation. This could be due to the container runtime disabling NUMA support. To disable this warning, set NCCL_CUMEM_HOST_ENABLE=0", "cumem host allocations do not appear to be working; falling back"},
	{"async-error-handling-deprecated", regexp.MustCompile(`Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated`),
		"[W Utils.hpp:135] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarInt)", "environment variable nccl_async_error_handling is deprecated"},
	{"barrier-device-guess", regexp.MustCompile(`to perform barrier as devices used by this process are currently unknown|Guessing device ID based on global rank|barrier\(\): using the device under current context`),
		"[rank6]:[W1109 22:19:24.164824990 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 6]  using GPU 6 to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect.", "perform barrier as devices"},
}
