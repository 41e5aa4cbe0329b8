// Package envvars is the one table of environment variables ncclwiz knows:
// NCCL's, PyTorch's (ProcessGroupNCCL, c10d, launchers) and the few CUDA and
// rendezvous variables a multi-GPU job depends on. Each entry names its
// source. Guides, checks and fixes may only suggest variables listed here
// with Status Current (tests enforce this), and the env.nccl check uses the
// table to flag invented, misspelt and deprecated names.
package envvars

import (
	"sort"
	"strings"
)

// Status says whether a variable is real and current.
type Status string

// Statuses.
const (
	// Current: documented in the owner's docs or read by current code.
	Current Status = "current"
	// Undocumented: read by current code but absent from the docs.
	Undocumented Status = "undocumented"
	// Deprecated marks a variable still read, with a warning or a replacement named.
	Deprecated Status = "deprecated"
	// Removed: no longer read by current releases.
	Removed Status = "removed"
	// Nonexistent: never existed; public guides invent it.
	Nonexistent Status = "nonexistent"
)

// Var is one known variable.
type Var struct {
	Name    string
	Owner   string // "nccl", "torch", "cuda", "launcher"
	Meaning string
	Values  string // accepted values and the default
	Since   string // first release that reads it, when known
	Status  Status
	// ReplacedBy names the variable to use instead (deprecated/removed/nonexistent).
	ReplacedBy string
	// Advice is what to do instead when the variable does not exist.
	Advice string
	// Source cites the documentation or source file that proves the entry.
	Source string
	// Generated: the entry comes from the table generated from the
	// sources (no hand-written meaning or advice).
	Generated bool
}

// Exists reports whether setting the variable has any effect on some release.
func (v Var) Exists() bool { return v.Status != Nonexistent }

// Suggestible reports whether ncclwiz may recommend setting it.
func (v Var) Suggestible() bool { return v.Status == Current || v.Status == Undocumented }

const (
	srcNCCLEnv     = "NCCL user guide, Environment Variables (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html; nccl docs/userguide/source/env.rst v2.30.7)"
	srcTorchNCCL   = "PyTorch docs, PYTORCH ProcessGroupNCCL Environment Variables (docs.pytorch.org/docs/stable/torch_nccl_environment_variables.html)"
	srcTorchPGHpp  = "pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp (deprecated-name lists) and the warning printed by c10d Utils.hpp getCvar*"
	srcTorchDist   = "PyTorch docs, Distributed communication package (docs.pytorch.org/docs/stable/distributed.html)"
	srcTorchDebug  = "PyTorch docs, Debugging environment variables (docs.pytorch.org/docs/stable/debugging_environment_variables.html)"
	srcTorchrun    = "PyTorch docs, torchrun (Elastic Launch) (docs.pytorch.org/docs/stable/elastic/run.html)"
	srcCUDAEnv     = "CUDA C++ Programming Guide, CUDA Environment Variables (docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#env-vars)"
	srcNCCLHistory = "NCCL git history: git log --all -S over the whole NVIDIA/nccl repository finds no such name"
)

var table = []Var{
	// --- NCCL: logging
	{Name: "NCCL_DEBUG", Owner: "nccl", Meaning: "NCCL log level", Values: "VERSION, WARN, INFO, TRACE", Status: Current, Source: srcNCCLEnv + "; nccl src/debug.cc"},
	{Name: "NCCL_DEBUG_SUBSYS", Owner: "nccl", Meaning: "filter INFO output by subsystem; ^ excludes", Values: "INIT,COLL,P2P,SHM,NET,GRAPH,TUNING,ENV,ALLOC,CALL,PROXY,NVLS,BOOTSTRAP,REG,PROFILE,RAS,ALL; default INIT,BOOTSTRAP,ENV", Since: "2.3.4", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_DEBUG_FILE", Owner: "nccl", Meaning: "write the NCCL log to a file; %h is the host, %p the pid", Values: "path; default stdout", Since: "2.2.12", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_DEBUG_TIMESTAMP_FORMAT", Owner: "nccl", Meaning: "strftime format of log timestamps", Since: "2.26", Status: Current, Source: srcNCCLEnv + "; troubleshooting/logging.rst"},
	{Name: "NCCL_DEBUG_TIMESTAMP_LEVELS", Owner: "nccl", Meaning: "which log levels carry a timestamp", Values: "default WARN", Since: "2.26", Status: Current, Source: srcNCCLEnv + "; troubleshooting/logging.rst"},
	// --- NCCL: sockets and bootstrap
	{Name: "NCCL_SOCKET_IFNAME", Owner: "nccl", Meaning: "IP interfaces used for bootstrap and the socket transport", Values: "prefix list (eth,ib); =name for an exact match; ^ to exclude; default: auto (skips docker*, lo)", Status: Current, Source: srcNCCLEnv + "; nccl src/misc/socket.cc"},
	{Name: "NCCL_SOCKET_FAMILY", Owner: "nccl", Meaning: "force IPv4 or IPv6", Values: "AF_INET, AF_INET6", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_SOCKET_RETRY_CNT", Owner: "nccl", Meaning: "connect retries on refused/unreachable/timeouts", Values: "default 34", Since: "2.24", Status: Current, Source: srcNCCLEnv + "; nccl src/misc/socket.cc"},
	{Name: "NCCL_SOCKET_RETRY_SLEEP_MSEC", Owner: "nccl", Meaning: "sleep between connect retries", Values: "default 100 ms", Since: "2.24", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_SOCKET_NTHREADS", Owner: "nccl", Meaning: "CPU helper threads per socket connection", Values: "1-16", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_NSOCKS_PERTHREAD", Owner: "nccl", Meaning: "sockets opened by each helper thread", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_SOCKET_MAGIC", Owner: "nccl", Meaning: "per-job magic number checked in socket handshakes", Values: "integer", Since: "2.30", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_OOB_NET_IFNAME", Owner: "nccl", Meaning: "interface for NCCL's out-of-band (bootstrap) network", Since: "2.30", Status: Current, Source: "nccl v2.30 warning text 'verify NCCL_OOB_NET_IFNAME' (src/bootstrap.cc); " + srcNCCLEnv},
	{Name: "NCCL_COMM_ID", Owner: "nccl", Meaning: "bootstrap root address <ip>:<port>, bypassing the unique id", Status: Current, Source: "nccl src/bootstrap.cc; mentioned in " + srcNCCLEnv},
	{Name: "NCCL_HOSTID", Owner: "nccl", Meaning: "override the host identity used to decide which ranks share a node", Status: Undocumented, Source: "nccl src/misc/utils.cc (getHostHash); NVIDIA/nccl PR #248"},
	{Name: "NCCL_CONF_FILE", Owner: "nccl", Meaning: "path of a config file; otherwise ~/.nccl.conf then /etc/nccl.conf (never overrides real environment)", Since: "2.23", Status: Current, Source: srcNCCLEnv + "; nccl src/misc/param.cc"},
	// --- NCCL: transports
	{Name: "NCCL_P2P_DISABLE", Owner: "nccl", Meaning: "disable the peer-to-peer (NVLink/PCIe) transport", Values: "1 to disable", Status: Current, Source: srcNCCLEnv + "; nccl src/graph/paths.cc"},
	{Name: "NCCL_P2P_LEVEL", Owner: "nccl", Meaning: "largest GPU distance at which P2P is used", Values: "LOC, NVL, PIX, PXB, PHB, SYS", Since: "2.3.4", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_P2P_DIRECT_DISABLE", Owner: "nccl", Meaning: "forbid direct access to peer buffers within one process", Values: "1", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_IGNORE_DISABLED_P2P", Owner: "nccl", Meaning: "proceed although NVML reports P2P disabled between NVLink-connected GPUs", Values: "1 (2 skips the NVML check)", Since: "2.12.7", Status: Undocumented, Source: "nccl src/graph/paths.cc (named in the 'P2P is disabled between NVLINK connected GPUs' warning)"},
	{Name: "NCCL_SHM_DISABLE", Owner: "nccl", Meaning: "disable the shared-memory transport between processes on one node (falls back to the network)", Values: "1 to disable", Status: Current, Source: srcNCCLEnv + "; nccl src/transport/shm.cc"},
	{Name: "NCCL_SHM_LOCALITY", Owner: "nccl", Meaning: "which side owns SHM buffers", Values: "1 sender, 2 receiver (default)", Status: Undocumented, Source: "nccl src/transport/shm.cc"},
	{Name: "NCCL_SHM_USE_CUDA_MEMCPY", Owner: "nccl", Meaning: "copy-engine SHM mode", Since: "2.13.4", Status: Removed, Advice: "removed in NCCL 2.30.7 (commit 'Remove SHM CE proxy code'); drop it", Source: "git log -S SHM_USE_CUDA_MEMCPY in NVIDIA/nccl"},
	{Name: "NCCL_SHM_MEMCPY_MODE", Owner: "nccl", Meaning: "copy-engine SHM mode selector", Since: "2.13.4", Status: Removed, Advice: "removed in NCCL 2.30.7; drop it", Source: "git log -S SHM_USE_CUDA_MEMCPY in NVIDIA/nccl"},
	{Name: "NCCL_BUFFSIZE", Owner: "nccl", Meaning: "buffer size per connection (Simple protocol); also sizes /dev/shm segments", Values: "bytes; default 4194304", Status: Current, Source: srcNCCLEnv + "; nccl src/init.cc"},
	{Name: "NCCL_CUMEM_ENABLE", Owner: "nccl", Meaning: "use cuMem* APIs for device memory (P2P/CUMEM)", Values: "0/1; auto since 2.19", Since: "2.18", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_CUMEM_HOST_ENABLE", Owner: "nccl", Meaning: "use cuMem host allocations for SHM buffers instead of /dev/shm files", Values: "0/1; default 1 since 2.24 with driver >= 12.6 and runtime >= 12.2", Since: "2.23", Status: Current, Source: srcNCCLEnv + "; nccl src/misc/cudawrap.cc"},
	{Name: "NCCL_NVLS_ENABLE", Owner: "nccl", Meaning: "NVLink SHARP on Hopper+ NVSwitch systems", Values: "0, 1, 2 (default 2)", Since: "2.17", Status: Current, Source: srcNCCLEnv + "; nccl src/transport/nvls.cc"},
	{Name: "NCCL_MNNVL_ENABLE", Owner: "nccl", Meaning: "multi-node NVLink", Values: "0, 1, 2", Since: "2.21", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_MULTI_RANK_GPU_ENABLE", Owner: "nccl", Meaning: "allow more than one rank per GPU (experimental)", Values: "0 (default) / 1", Since: "2.30", Status: Current, Source: srcNCCLEnv + "; nccl src/init.cc"},
	{Name: "NCCL_IPC_USE_ABSTRACT_SOCKET", Owner: "nccl", Meaning: "use abstract Unix sockets for intra-node IPC handle exchange", Values: "default 1", Since: "2.29", Status: Current, Source: srcNCCLEnv},
	// --- NCCL: InfiniBand / RoCE / net
	{Name: "NCCL_IB_DISABLE", Owner: "nccl", Meaning: "do not use InfiniBand/RoCE verbs; use sockets", Values: "1 to disable", Status: Current, Source: srcNCCLEnv + "; nccl src/transport/net_ib"},
	{Name: "NCCL_IB_HCA", Owner: "nccl", Meaning: "which HCAs and ports NCCL uses", Values: "mlx5 | =mlx5_0:1,mlx5_1:1 | ^=mlx5_1", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_IB_TIMEOUT", Owner: "nccl", Meaning: "IB local ACK timeout exponent (4.096 us * 2^n)", Values: "0-31; default 20 (2.23+), 18 (2.14-2.22), 14 before", Status: Current, Source: srcNCCLEnv + "; nccl src/transport/net_ib/connect.cc"},
	{Name: "NCCL_IB_RETRY_CNT", Owner: "nccl", Meaning: "IB retry count", Values: "0-7; default 7", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_IB_GID_INDEX", Owner: "nccl", Meaning: "RoCE GID index", Values: "default -1 (automatic since 2.21; leave unset)", Status: Current, Source: srcNCCLEnv + "; troubleshooting/networking_troubleshooting.rst"},
	{Name: "NCCL_IB_ROCE_VERSION_NUM", Owner: "nccl", Meaning: "RoCE version used when choosing a GID", Values: "1 or 2 (default 2)", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_IB_TC", Owner: "nccl", Meaning: "RoCE traffic class", Values: "vendor-specific", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_NET_GDR_LEVEL", Owner: "nccl", Meaning: "largest GPU-NIC distance at which GPUDirect RDMA is used", Values: "LOC, PIX, PXB, PHB, SYS", Since: "2.4.0", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_IB_GDR_LEVEL", Owner: "nccl", Meaning: "old name of NCCL_NET_GDR_LEVEL", Status: Deprecated, ReplacedBy: "NCCL_NET_GDR_LEVEL", Source: srcNCCLEnv + " (renamed in 2.4.0; read only by NCCL 2.3.x, per envvars/read_gen.go)"},
	{Name: "NCCL_NET", Owner: "nccl", Meaning: "force the network module", Values: "IB, Socket, or a plugin name", Since: "2.10", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_DMABUF_ENABLE", Owner: "nccl", Meaning: "GPUDirect RDMA through DMA-BUF", Values: "0/1; default 1", Since: "2.13", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_RAS_ENABLE", Owner: "nccl", Meaning: "RAS subsystem (ncclras, port 28028)", Values: "default 1", Since: "2.24", Status: Current, Source: srcNCCLEnv + "; troubleshooting/ras.rst"},
	{Name: "NCCL_RAS_ADDR", Owner: "nccl", Meaning: "RAS listen address", Values: "default localhost:28028", Since: "2.24", Status: Current, Source: srcNCCLEnv + "; troubleshooting/ras.rst"},
	// --- NCCL: tuning (debug only)
	{Name: "NCCL_ALGO", Owner: "nccl", Meaning: "restrict collective algorithms (debugging only)", Values: "Ring, Tree, NVLS, … ; ^ excludes", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_PROTO", Owner: "nccl", Meaning: "restrict protocols (debugging only)", Values: "LL, LL128, Simple; ^ excludes", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_MAX_CTAS", Owner: "nccl", Meaning: "maximum CTAs (channels) per collective", Since: "2.17", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_MIN_CTAS", Owner: "nccl", Meaning: "minimum CTAs (channels) per collective", Since: "2.17", Status: Current, Source: srcNCCLEnv},
	{Name: "NCCL_MAX_NCHANNELS", Owner: "nccl", Meaning: "old channel limit", Status: Deprecated, ReplacedBy: "NCCL_MAX_CTAS", Source: srcNCCLEnv + " (deprecated in 2.17)"},
	{Name: "NCCL_MIN_NCHANNELS", Owner: "nccl", Meaning: "old channel limit", Status: Deprecated, ReplacedBy: "NCCL_MIN_CTAS", Source: srcNCCLEnv + " (deprecated in 2.17)"},
	{Name: "NCCL_LAUNCH_MODE", Owner: "nccl", Meaning: "PARALLEL or GROUP kernel launch", Status: Deprecated, Source: srcNCCLEnv + " (deprecated in 2.9)"},
	{Name: "NCCL_CHECK_POINTERS", Owner: "nccl", Meaning: "check user pointers", Status: Deprecated, ReplacedBy: "NCCL_CHECK_MODE", Source: srcNCCLEnv + " (deprecated in 2.29.7)"},
	{Name: "NCCL_CHECK_MODE", Owner: "nccl", Meaning: "argument checking mode", Since: "2.29.7", Status: Current, Source: srcNCCLEnv},
	// --- Invented names seen in public guides
	{Name: "NCCL_TIMEOUT", Owner: "nccl", Meaning: "nothing: NCCL has no such variable", Status: Nonexistent,
		Advice: "set the collective timeout in PyTorch: init_process_group(..., timeout=datetime.timedelta(minutes=N)); NCCL's own timeouts are NCCL_IB_TIMEOUT and socket retries",
		Source: srcNCCLHistory + "; not in torch ProcessGroupNCCL.hpp"},
	{Name: "NCCL_SHM_DIR", Owner: "nccl", Meaning: "nothing: the path /dev/shm/nccl-XXXXXX is hard-coded", Status: Nonexistent,
		Advice: "make /dev/shm bigger (docker --shm-size, a k8s emptyDir with medium: Memory) or avoid it with NCCL_CUMEM_HOST_ENABLE=1 (NCCL >= 2.23)",
		Source: srcNCCLHistory + "; nccl src/os/linux.cc ncclOsShmOpen"},
	{Name: "NCCL_SHM_USE_CUDA_MEMORY", Owner: "nccl", Meaning: "nothing; a confusion with NCCL_SHM_USE_CUDA_MEMCPY (itself removed in 2.30.7)", Status: Nonexistent,
		Advice: "drop it", Source: srcNCCLHistory},
	// --- Legacy PyTorch names with an NCCL_ prefix
	{Name: "NCCL_ASYNC_ERROR_HANDLING", Owner: "torch", Meaning: "old PyTorch name (not an NCCL variable)", Status: Deprecated, ReplacedBy: "TORCH_NCCL_ASYNC_ERROR_HANDLING", Source: srcTorchPGHpp},
	{Name: "NCCL_BLOCKING_WAIT", Owner: "torch", Meaning: "old PyTorch name (not an NCCL variable)", Status: Deprecated, ReplacedBy: "TORCH_NCCL_BLOCKING_WAIT", Source: srcTorchPGHpp},
	{Name: "NCCL_DESYNC_DEBUG", Owner: "torch", Meaning: "old PyTorch name (not an NCCL variable)", Status: Deprecated, ReplacedBy: "TORCH_NCCL_DESYNC_DEBUG", Source: srcTorchPGHpp},
	{Name: "NCCL_ENABLE_TIMING", Owner: "torch", Meaning: "old PyTorch name (not an NCCL variable)", Status: Deprecated, ReplacedBy: "TORCH_NCCL_ENABLE_TIMING", Source: srcTorchPGHpp},
	// --- PyTorch ProcessGroupNCCL
	{Name: "TORCH_NCCL_ASYNC_ERROR_HANDLING", Owner: "torch", Meaning: "what the watchdog does on an error or timeout", Values: "0 none, 1 abort and tear down, 2 abort only, 3 tear down without abort (default 3)", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_BLOCKING_WAIT", Owner: "torch", Meaning: "wait() blocks and raises on timeout", Values: "0/1, default 0", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_DUMP_ON_TIMEOUT", Owner: "torch", Meaning: "dump the flight recorder on timeout or exception", Values: "bool; default true in recent releases", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_TRACE_BUFFER_SIZE", Owner: "torch", Meaning: "flight-recorder ring size; 0 disables", Values: "int; default 2000 in recent releases", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", Owner: "torch", Meaning: "prefix of flight-recorder dump files", Values: "default /tmp/nccl_trace_rank_", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", Owner: "torch", Meaning: "write to <prefix><rank>.pipe to trigger a dump", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_DESYNC_DEBUG", Owner: "torch", Meaning: "desync report on timeout", Values: "bool", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_ENABLE_TIMING", Owner: "torch", Meaning: "record start events for each collective", Values: "bool", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_ENABLE_MONITORING", Owner: "torch", Meaning: "heartbeat monitor that kills a stuck process", Values: "bool, default true", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", Owner: "torch", Meaning: "heartbeat monitor timeout", Values: "seconds; default 480 (600 in ~2.2)", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", Owner: "torch", Meaning: "extra wait for the flight-recorder dump", Values: "milliseconds", Status: Current, Source: "pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"},
	{Name: "TORCH_NCCL_COORD_CHECK_MILSEC", Owner: "torch", Meaning: "poll interval for the cross-rank dump signal", Values: "default 1000 ms", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_NAN_CHECK", Owner: "torch", Meaning: "check collective inputs for NaN", Values: "bool", Status: Current, Source: srcTorchNCCL},
	{Name: "TORCH_NCCL_AVOID_RECORD_STREAMS", Owner: "torch", Meaning: "stash tensors instead of recordStream", Status: Deprecated, Advice: "it is the default behaviour now; drop it", Source: "pytorch ProcessGroupNCCL.cpp (~2.8: 'is the default now')"},
	{Name: "TORCH_NCCL_USE_COMM_NONBLOCKING", Owner: "torch", Meaning: "non-blocking NCCL communicator init", Values: "bool", Status: Current, Source: "pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp"},
	{Name: "TORCH_DISTRIBUTED_DEBUG", Owner: "torch", Meaning: "extra c10d logging and collective consistency checks", Values: "OFF (default), INFO, DETAIL", Status: Current, Source: srcTorchDist},
	{Name: "TORCH_CPP_LOG_LEVEL", Owner: "torch", Meaning: "c10 C++ log level", Values: "INFO, WARNING, ERROR, FATAL", Status: Current, Source: srcTorchDebug},
	{Name: "TORCH_SHOW_CPP_STACKTRACES", Owner: "torch", Meaning: "print C++ stack traces with Python errors", Values: "0/1", Status: Current, Source: srcTorchDebug},
	// --- rendezvous / launchers
	{Name: "MASTER_ADDR", Owner: "launcher", Meaning: "address of the rank-0 host (env:// rendezvous)", Status: Current, Source: srcTorchDist},
	{Name: "MASTER_PORT", Owner: "launcher", Meaning: "free TCP port on the rank-0 host (env:// rendezvous)", Status: Current, Source: srcTorchDist},
	{Name: "WORLD_SIZE", Owner: "launcher", Meaning: "total number of ranks", Status: Current, Source: srcTorchDist},
	{Name: "RANK", Owner: "launcher", Meaning: "global rank of this process", Status: Current, Source: srcTorchDist},
	{Name: "LOCAL_RANK", Owner: "launcher", Meaning: "rank of this process on its node (set by torchrun)", Status: Current, Source: srcTorchrun},
	{Name: "LOCAL_WORLD_SIZE", Owner: "launcher", Meaning: "ranks on this node (set by torchrun)", Status: Current, Source: srcTorchrun},
	{Name: "GLOO_SOCKET_IFNAME", Owner: "torch", Meaning: "interface for the Gloo backend (also used for CPU-side barriers)", Values: "comma-separated interface names", Status: Current, Source: srcTorchDist},
	// --- CUDA
	{Name: "CUDA_VISIBLE_DEVICES", Owner: "cuda", Meaning: "which GPUs the process sees, and in which order", Values: "indices, GPU-/MIG- UUIDs; empty hides all", Status: Current, Source: srcCUDAEnv},
	{Name: "CUDA_DEVICE_ORDER", Owner: "cuda", Meaning: "how CUDA numbers GPUs", Values: "FASTEST_FIRST (default), PCI_BUS_ID", Status: Current, Source: srcCUDAEnv},
	{Name: "CUDA_LAUNCH_BLOCKING", Owner: "cuda", Meaning: "make kernel launches synchronous (debugging)", Values: "0/1", Status: Current, Source: srcCUDAEnv},
}

var byName = func() map[string]int {
	m := make(map[string]int, len(table))
	for i, v := range table {
		m[v.Name] = i
	}
	return m
}()

// All returns the table sorted by name.
func All() []Var {
	out := append([]Var(nil), table...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup finds a variable by exact name: the hand-written entry (meaning,
// values, advice), else what the table generated from NCCL's and
// PyTorch's sources says (read_gen.go): a name some release reads is
// real — Undocumented when the newest release scanned still reads it,
// Removed (with the range of releases that did) otherwise. Only a name no
// release reads is unknown, and only such a name may be called invented.
func Lookup(name string) (Var, bool) {
	if i, ok := byName[name]; ok {
		return table[i], true
	}
	r, ok := ReadBySource(name)
	if !ok {
		return Var{}, false
	}
	v := Var{Name: name, Owner: r.Owner, Status: Undocumented, Source: r.Source, Generated: true}
	switch {
	case r.Owner == "torch":
		v.Meaning = "read by PyTorch (" + r.Source + "); ncclwiz has no description of it"
	case r.Current:
		v.Since = r.First
		v.Meaning = "read by NCCL since " + r.First + " (" + r.Source + "); see NCCL's documentation for its meaning"
	default:
		v.Since, v.Status = r.First, Removed
		v.Meaning = "read by NCCL " + r.First + " to " + r.Last + " only"
		v.Advice = "NCCL " + r.First + " to " + r.Last + " read it; no release since does (newest scanned: " + ncclLastScanned + "), so it matters only with one of those releases"
	}
	return v, true
}

// Governed reports whether a name falls in a namespace this table claims to
// cover completely (so an unknown name there is suspicious).
func Governed(name string) bool {
	return strings.HasPrefix(name, "NCCL_") || strings.HasPrefix(name, "TORCH_NCCL_") ||
		strings.HasPrefix(name, "TORCH_DISTRIBUTED_")
}

// Closest returns the known, existing variable nearest to name by edit
// distance (for "did you mean"), or "" when nothing is close.
func Closest(name string) string {
	best, bestD := "", 4
	try := func(n string) {
		if d := distance(name, n); d < bestD || d == bestD && n < best {
			best, bestD = n, d
		}
	}
	for _, v := range table {
		if v.Exists() {
			try(v.Name)
		}
	}
	for n := range readIndex {
		try(n)
	}
	return best
}

// distance is the Levenshtein distance, bounded for speed.
func distance(a, b string) int {
	if a == b {
		return 0
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
