package explain

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"

	"github.com/ncclwiz/ncclwiz/explain/catalog"
	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// CUDA errors NCCL and PyTorch surface: NCCL's CUDACHECK prints
// cudaGetErrorString ("Cuda failure '<text>'", every release since 2.3),
// its CUCHECK the driver's code and string ("Cuda failure <code> '<text>'",
// 2.19+); PyTorch says "CUDA error: <text>" and older torch "cuda runtime
// error (<code>) : <text>". The table (code, name, text, meaning, guide,
// the cause it names) is the catalogue's (catalog.yaml, from CUDA's
// driver_types.h).

// reCudaErr finds a CUDA error in NCCL's, nccl-tests' or PyTorch's wording,
// or by enumerator name.
var reCudaErr = regexp.MustCompile(`(?:Cuda failure|CUDA failure \S+)(?: (\d+))? '([^']+)'|CUDA error: ([^\r\n]+?)\s*$|cuda runtime error \((\d+)\) : ([^\r\n]+?)(?: at \S+)?\s*$|\b(cudaError[A-Z]\w+|CUDA_ERROR_[A-Z_]+)\b`)

// lookupCudaError names the CUDA error in text, if any: by code when one is
// printed, else by its string or enumerator name.
func lookupCudaError(cat *catalog.Catalog, text string) (catalog.CudaError, bool) {
	sm := reCudaErr.FindStringSubmatch(text)
	if sm == nil {
		// Other wordings print the string after the code ("failed to
		// peer with device 1(=2000): 217 peer access is not supported
		// ..."): a long, distinctive string is enough.
		return cat.CudaIn(text)
	}
	code, msg, name := sm[1]+sm[4], sm[2]+sm[3]+sm[5], sm[6]
	var byCode *catalog.CudaError
	if n, err := strconv.Atoi(code); err == nil {
		if c, ok := cat.CudaByCode(n); ok {
			byCode = &c
		}
	}
	if byCode != nil && (msg == "" || byCode.Text == msg) {
		return *byCode, true
	}
	// CUDA before 10.1 numbered errors differently ("cuda runtime error
	// (4) : unspecified launch failure"): a known string wins over the code.
	if msg != "" {
		if c, ok := cat.CudaByText(msg); ok {
			return c, true
		}
	}
	if name != "" {
		if c, ok := cat.CudaByText(name); ok {
			return c, true
		}
	}
	if byCode != nil { // a driver's own wording of a known code
		return *byCode, true
	}
	return catalog.CudaError{}, false
}

// addCudaError fills a diagnosis's cuda_code / cuda_name fields and says
// what the error means, from the first text that names a CUDA error.
func addCudaError(cat *catalog.Catalog, d *Diagnosis, texts ...string) {
	for _, t := range texts {
		c, ok := lookupCudaError(cat, t)
		if !ok {
			continue
		}
		d.Fields["cuda_code"] = strconv.Itoa(c.Code)
		d.Fields["cuda_name"] = c.Name
		msg := fmt.Sprintf("CUDA error %d (%s, %q): %s.", c.Code, c.Name, c.Text, c.Meaning)
		if c.Guide != d.Guide {
			msg += " Guide: ncclwiz guides " + c.Guide + "."
		}
		d.Advice = append(d.Advice, msg)
		return
	}
}

// exceptionCudaCauses are the CUDA errors whose cause a Python exception
// ("RuntimeError: CUDA error: <text>") names by itself: the platform's,
// not the model's (an out-of-memory or a kernel fault there is the
// model's, diagnosed as such).
var exceptionCudaCauses = map[string]bool{"p2p-unsupported": true, "fabric-manager-not-ready": true,
	"invalid-device-ordinal": true, "cuda-init-failure": true, "gpu-xid": true}

// terminateCudaCauses are the CUDA errors a process that terminated on
// them names as its cause: a kernel fault is the process's own, whatever
// library met it first.
var terminateCudaCauses = map[string]bool{"cuda-kernel-fault": true}

// terminatePayload is the message of std::terminate's "what():" line,
// nil for any other line.
func terminatePayload(msg []byte) []byte {
	p, ok := bytes.CutPrefix(bytes.TrimSpace(msg), []byte("what():"))
	if !ok {
		return nil
	}
	return bytes.TrimSpace(p)
}

// cudaCause records the cause a CUDA error in an exception or wrapper
// line names; false when it names none.
func (s *scan) cudaCause(fs *fileState, msg []byte, ev func() Evidence, m linetext.Meta) bool {
	// A C++ exception that ended the process ("terminate called after
	// throwing an instance of 'std::logic_error'", then "  what():  <its
	// message>"): a CUDA error there is what the process died of, in any
	// library's wording (Horovod's "cudaEventQuery failed: <text>"); the
	// SIGABRT that follows is its consequence.
	what := terminatePayload(msg)
	// PyTorch's "CUDA error: <text>" and "cuda runtime error (N)";
	// TensorRT-LLM's "CUDA runtime error in <call>: <text>".
	if what == nil && !bytes.Contains(msg, []byte("CUDA error")) && !bytes.Contains(msg, []byte("cuda runtime error")) &&
		!bytes.Contains(msg, []byte("CUDA runtime error")) {
		return false
	}
	text := msg
	if what != nil {
		text = what
	}
	c, ok := lookupCudaError(s.e.cat, string(truncText(text)))
	if !ok || !exceptionCudaCauses[c.Cause] && !(what != nil && terminateCudaCauses[c.Cause]) {
		return false
	}
	def := s.e.byID[c.Cause]
	if def == nil {
		return false
	}
	a := s.record(s.aggs, sigHit{def: def}, ev(), m, fs, false)
	if _, ok := a.fields["cuda_error"]; !ok {
		a.fields["cuda_error"] = c.Text
	}
	s.failureSeen(def, ev, m)
	return true
}

// driverDetails words the commonest CUDA init failure precisely: a driver
// older than the CUDA runtime (cudaErrorInsufficientDriver, 35, or
// torch.cuda's own driver check), whose fix is the driver or the build.
func driverDetails(d *Diagnosis) {
	f := d.Fields
	if f["cuda_code"] != "35" && f["driver_version"] == "" {
		return
	}
	d.Title = "The NVIDIA driver is older than the CUDA runtime this build needs"
	if v := f["driver_version"]; v != "" {
		d.Title += " (the driver supports CUDA " + cudaVersion(v) + ")"
	}
	d.Advice = append(d.Advice, "nvidia-smi shows the newest CUDA the driver supports (\"CUDA Version\"); python -c 'import torch; print(torch.version.cuda)' the CUDA the build needs. Upgrade the driver, or install the PyTorch (and NCCL) build for a CUDA the driver supports; in a container, the host's driver is the one that counts.")
}

// cudaVersion turns torch's driver version number (CUDA_VERSION style,
// 11040) into "11.4".
func cudaVersion(v string) string {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1000 {
		return v
	}
	return strconv.Itoa(n/1000) + "." + strconv.Itoa(n%1000/10)
}
