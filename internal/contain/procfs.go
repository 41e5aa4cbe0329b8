package contain

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Stat is what /proc/PID/stat says about a process.
type Stat struct {
	PID   int
	Comm  string
	State string
	PPID  int
	PGRP  int
	// Start is the start time in clock ticks since boot: with the PID it
	// names one process, so a reused PID is never mistaken for it.
	Start uint64
}

// ReadStat parses /proc/PID/stat: the comm is in parentheses and may hold
// spaces or parentheses, so fields are counted from the last ')'.
func ReadStat(pid int) (Stat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, false
	}
	return parseStat(pid, b)
}

func parseStat(pid int, b []byte) (Stat, bool) {
	open := bytes.IndexByte(b, '(')
	closeP := bytes.LastIndexByte(b, ')')
	if open < 0 || closeP < open {
		return Stat{}, false
	}
	f := strings.Fields(string(b[closeP+1:]))
	// state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
	// utime stime cutime cstime priority nice threads itrealvalue starttime
	if len(f) < 20 {
		return Stat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Stat{}, false
	}
	return Stat{PID: pid, Comm: string(b[open+1 : closeP]), State: f[0], PPID: ppid, PGRP: pgrp, Start: start}, true
}

// Alive reports whether the process is running (not a zombie).
func (s Stat) Alive() bool { return s.State != "Z" && s.State != "X" }

// table reads every process's stat; unreadable entries are skipped.
func table() map[int]Stat {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make(map[int]Stat, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := ReadStat(pid); ok {
			out[pid] = s
		}
	}
	return out
}

// descendants lists the processes below root in the table (not root).
func descendants(t map[int]Stat, root int) map[int]bool {
	kids := map[int][]int{}
	for pid, s := range t {
		kids[s.PPID] = append(kids[s.PPID], pid)
	}
	out := map[int]bool{}
	stack := []int{root}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, k := range kids[p] {
			if !out[k] && k != root {
				out[k] = true
				stack = append(stack, k)
			}
		}
	}
	return out
}

// HasEnv reports whether the process's environment holds kv ("KEY=VALUE")
// exactly. Unreadable environments (other users', without root) do not.
func HasEnv(pid int, kv string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return false
	}
	want := []byte(kv)
	for _, e := range bytes.Split(b, []byte{0}) {
		if bytes.Equal(e, want) {
			return true
		}
	}
	return false
}

// maxCommand bounds a reported command line.
const maxCommand = 300

// Cmdline is the process's argv joined by spaces, shortened; "" when
// unreadable (a kernel thread, or gone).
func Cmdline(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	b = bytes.TrimRight(b, "\x00")
	s := strings.ReplaceAll(string(b), "\x00", " ")
	if len(s) > maxCommand {
		s = s[:maxCommand] + "…"
	}
	return s
}

// nsID is the process's PID (field "NSpid") or process group ("NSpgid")
// in its innermost PID namespace: the last number of that /proc/PID/status
// line.
func nsID(pid int, field string) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			n, err := strconv.Atoi(f[len(f)-1])
			return n, err == nil
		}
	}
	return 0, false
}

// killExact sends sig to the process only if it is still the one seen
// (same start time). A pidfd pins the process between the check and the
// signal, so a PID reused meanwhile is never signalled.
func killExact(s Stat, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(s.PID, 0)
	if errors.Is(err, unix.ENOSYS) {
		// Kernels before 5.3: check, then signal (a tiny window).
		if now, ok := ReadStat(s.PID); !ok || now.Start != s.Start {
			return nil
		}
		return unix.Kill(s.PID, sig)
	}
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return err
	}
	defer unix.Close(fd)
	if now, ok := ReadStat(s.PID); !ok || now.Start != s.Start {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

func sortedPIDs(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}
