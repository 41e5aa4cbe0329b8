package proctab

import (
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/host"
)

// IO is a process's (or one thread's) I/O accounting, /proc/PID/io or
// /proc/PID/task/TID/io: every byte passed to read- and write-like system
// calls (files, pipes, terminals, sockets) and how many calls. The kernel
// shows it only to the process's user or root (ptrace read access).
type IO struct {
	RChar, WChar, SyscR, SyscW uint64
}

// ReadIO reads pid's I/O accounting; tid > 0 reads that thread's alone.
func ReadIO(h *host.Host, pid, tid int) (IO, error) {
	p := "/proc/" + strconv.Itoa(pid)
	if tid > 0 {
		p += "/task/" + strconv.Itoa(tid)
	}
	b, err := h.ReadFile(p + "/io")
	if err != nil {
		return IO{}, err
	}
	var io IO
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "rchar":
			io.RChar = n
		case "wchar":
			io.WChar = n
		case "syscr":
			io.SyscR = n
		case "syscw":
			io.SyscW = n
		}
	}
	return io, nil
}

// MappedFiles returns the distinct files pid maps (/proc/PID/maps: its
// executable, shared libraries, mapped data), in order of first mapping.
// Readable by the process's user or root.
func MappedFiles(h *host.Host, pid int) ([]string, error) {
	b, err := h.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		// address perms offset dev inode pathname
		f := strings.SplitN(line, " ", 6)
		if len(f) < 6 {
			continue
		}
		path := strings.TrimSpace(f[5])
		path = strings.TrimSuffix(path, " (deleted)")
		if !strings.HasPrefix(path, "/") || seen[path] {
			continue
		}
		seen[path] = true
		out = append(out, path)
	}
	return out, nil
}

// Wakeups returns how many times thread tid of pid went to sleep of its
// own accord (status "voluntary_ctxt_switches"), or -1 when unreadable: a
// thread that polls wakes many times a second, one blocked for good never.
func Wakeups(h *host.Host, pid, tid int) int64 {
	b, err := h.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}
