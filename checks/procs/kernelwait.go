package procs

import (
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/host"
)

// kernelWaits name what a task in uninterruptible sleep waits for, by the
// prefix of its wait channel (/proc/PID/wchan, the kernel function it
// sleeps in). Checked in order: the first prefix that matches wins.
var kernelWaits = []struct{ prefix, what string }{
	{"kernel_clone", "a child it started with vfork (posix_spawn, a subprocess) to exec or exit"},
	{"wait_for_vfork_done", "a child it started with vfork (posix_spawn, a subprocess) to exec or exit"},
	{"nfs", "an NFS server"},
	{"rpc_", "an NFS server"},
	{"__rpc_", "an NFS server"},
	{"fuse_", "a FUSE filesystem's daemon"},
	{"request_wait_answer", "a FUSE filesystem's daemon"},
	{"ll_", "a Lustre server"},
	{"ptlrpc", "a Lustre server"},
	{"nvme", "disk or filesystem I/O"},
	{"os_", "the NVIDIA driver (the GPU)"},
	{"nv", "the NVIDIA driver (the GPU)"},
	{"uvm", "the NVIDIA driver (the GPU)"},
	{"io_schedule", "disk or filesystem I/O"},
	{"folio_wait", "disk or filesystem I/O"},
	{"wait_on_page", "disk or filesystem I/O"},
	{"__lock_page", "disk or filesystem I/O"},
	{"bit_wait_io", "disk or filesystem I/O"},
	{"blk_", "disk or filesystem I/O"},
	{"jbd2", "disk or filesystem I/O"},
	{"rwsem", "a kernel lock another task holds"},
	{"mutex", "a kernel lock another task holds"},
}

// KernelWait says what a task in uninterruptible sleep (D) waits for,
// from its wait channel: "the kernel waits on its behalf for X (in
// WCHAN)", or for storage, a driver or the GPU when the channel is not
// one ncclwiz knows or could not be read.
func KernelWait(wchan string) string {
	if wchan == "" {
		return "the kernel waits on its behalf — for storage, a network filesystem, a driver or the GPU"
	}
	for _, k := range kernelWaits {
		if strings.HasPrefix(wchan, k.prefix) {
			return "the kernel waits on its behalf for " + k.what + " (in " + wchan + ")"
		}
	}
	return "the kernel waits on its behalf (in " + wchan + ") — for storage, a network filesystem, a driver or the GPU"
}

// Unkillable is what a signal does to a task in uninterruptible sleep:
// nothing until the kernel wait returns, except that a fatal signal ends
// a wait the kernel marked killable (TASK_KILLABLE; the kernel treats an
// unhandled SIGTERM as fatal too). Said wherever ncclwiz reports or would
// end such a process, so nobody expects a signal to free it.
const Unkillable = "it acts on no signal until that wait returns (Ctrl-C, or a SIGTERM the program handles, waits); SIGKILL, or a SIGTERM it does not handle, ends it only if the kernel marked the wait killable — and ending it does not free what it waits for"

// ReadWchan returns pid's wait channel, "" when it runs or is hidden
// (another user's process).
func ReadWchan(h *host.Host, pid int) string {
	b, err := h.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if s == "0" {
		return ""
	}
	return s
}
