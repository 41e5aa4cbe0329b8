package explain

import (
	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
	"regexp"
)

// Non-NCCL failures: what the job died of when NCCL was not involved, or
// what a straggler rank died of before the others timed out.
var (
	// PyTorch's allocator says "CUDA out of memory"; a CUDA call checked
	// by C10_CUDA_CHECK says "CUDA error: out of memory" (a C++ exception
	// that may end the process through std::terminate).
	reCudaOOM = regexp.MustCompile(`CUDA out of memory|OutOfMemoryError|CUDA error: out of memory`)
	// torchrun, DeepSpeed's launcher, Slurm and the kernel name a SIGKILL.
	reKilled = regexp.MustCompile(`exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\)|^\s*Killed\s*$|Out of memory: Killed process|invoked oom-killer|terminated with signal SIGKILL|died with <Signals\.SIGKILL: 9>|exits with return code = -9\b|oom[-_]kill event|tasks? [\d\-,]+: Out Of Memory|line \d+: +\d+ Killed +\S`)
	reSegv   = regexp.MustCompile(`Segmentation fault|exitcode\s*:\s*-11\b|Signal 11 \(SIGSEGV\)|exits with return code = -11\b`)
	// A CUDA kernel's assert (PyTorch's CUDA_KERNEL_ASSERT, printed by the
	// device): "Indexing.cu:1236: indexSelectSmallIndex: block: [0,0,0],
	// thread: [96,0,0] Assertion `srcIndex < srcSelectDimSize` failed."
	reKernelAssert = regexp.MustCompile(`block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion ` + "`" + `(.*)` + "`" + ` failed`)
)

// reLogLevel is the prefix of vLLM's and similar Python loggers ("ERROR
// 07-08 11:03:52 worker_base.py:145] ", "INFO 01-28 20:09:24
// [parallel_state.py:951] "): a traceback logged through them keeps its
// lines after it.
var reLogLevel = regexp.MustCompile(`^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \[?[\w.\-]+:\d+\]? ?`)

// stripLogLevel removes a logger prefix (reLogLevel) from msg.
func stripLogLevel(msg []byte) []byte {
	if loc := reLogLevel.FindIndex(msg); loc != nil {
		return msg[loc[1]:]
	}
	return msg
}

// errorLiterals trigger the checks above (lower case; the prefilter folds
// case). "what():" is std::terminate's line with the exception that ended
// a process, in whatever words its library chose (cudaerr.go).
var errorLiterals = []string{"error", "exception", "interrupt", "out of memory", "killed", "sigkill", "exitcode", "segmentation fault", "sigsegv", "oom-killer", "assertion", "what():"}

// classifyError names the kind of a non-NCCL error line, or "".
func classifyError(msg []byte) (kind string) {
	msg = stripLogLevel(msg)
	switch {
	case reCudaOOM.Match(msg):
		return "cuda-oom"
	case reKernelAssert.Match(msg):
		return "cuda-assert"
	case linetext.PyException.Match(msg):
		// Log levels ("ERROR: …") are not class names: the regexp needs a
		// name ending in Error/Exception/Interrupt, case-sensitive.
		return "python-exception"
	case reKilled.Match(msg):
		return "killed"
	case reSegv.Match(msg):
		return "segfault"
	}
	return ""
}

// errorSummary is a short description for straggler reasons.
func errorSummary(kind string, msg []byte) string {
	switch kind {
	case "cuda-oom":
		return "CUDA out of memory"
	case "cuda-assert":
		return "a device-side assert in a CUDA kernel"
	case "killed":
		return "killed by SIGKILL (often the kernel OOM killer)"
	case "segfault":
		return "segmentation fault"
	}
	// The line still has its launcher and logger prefixes ("[rank3]: ").
	if sm := linetext.PyException.FindSubmatch(stripLogLevel(linetext.Parse(msg).Msg)); sm != nil {
		return string(sm[1])
	}
	return kind
}
