package validate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MarkerVar is put into the environment of every launcher ncclwiz starts;
// every descendant inherits it, so survivors are found even when they left
// the process group (setsid) and were re-parented.
const MarkerVar = "NCCLWIZ_RUN_ID"

// procSpec is one launcher run.
type procSpec struct {
	Path    string
	Args    []string
	Env     []string
	Dir     string
	Marker  string // value of MarkerVar in Env
	Timeout time.Duration
	Grace   time.Duration
	// OnLine receives every output line (stdout and stderr interleaved),
	// at most maxLine bytes of it.
	OnLine func(string)
}

// procResult is what happened.
type procResult struct {
	ExitCode  int
	Signal    string
	TimedOut  bool
	Canceled  bool
	Duration  time.Duration
	Survivors []Proc
	// Leftover lists processes that could not be ended (should be empty).
	Leftover []Proc
}

const maxLine = 64 << 10

// runProcess starts the launcher in its own process group and waits for it.
// On timeout or cancellation the group gets SIGTERM, then SIGKILL after the
// grace period. The leader is not reaped until its group has been swept, so
// its PID (the group's ID) cannot be reused while ncclwiz signals it.
func runProcess(ctx context.Context, spec procSpec) (procResult, error) {
	var res procResult
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return res, fmt.Errorf("start %s: %w", spec.Path, err)
	}
	pw.Close()
	pid := cmd.Process.Pid

	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		readLines(pr, spec.OnLine)
	}()

	exited := make(chan struct{})
	go func() {
		defer close(exited)
		var info unix.Siginfo
		for {
			// WNOWAIT leaves the leader a zombie: the PGID stays reserved.
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()

	timer := time.NewTimer(spec.Timeout)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		res.TimedOut = true
	case <-ctx.Done():
		res.Canceled = true
	}
	if res.TimedOut || res.Canceled {
		if !terminateGroup(pid, exited, spec.Grace) {
			// SIGKILL did not take within the bound: the leader is stuck
			// in the kernel (a GPU driver call, say). Report it rather
			// than wait forever; only the goroutine waiting for it stays.
			res.Duration = time.Since(start)
			res.Survivors, res.Leftover = sweep(pid, spec.Marker)
			comm, _, _, _ := readStat(pid)
			res.Leftover = append(res.Leftover, Proc{PID: pid, Comm: comm, Why: "launcher did not die after SIGKILL"})
			res.ExitCode = -1
			pr.Close() // unblocks the reader; its output ends here
			<-readDone
			return res, nil
		}
	}
	res.Duration = time.Since(start)

	// The leader has exited (a zombie, not reaped). Anything still in its
	// group, or carrying the marker, outlived it.
	res.Survivors, res.Leftover = sweep(pid, spec.Marker)

	waitErr := cmd.Wait()
	select {
	case <-readDone:
	case <-time.After(2 * time.Second):
		// A process we could not end still holds the pipe.
	}
	pr.Close()
	<-readDone

	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case st.Signaled():
			res.ExitCode = -int(st.Signal())
			res.Signal = unix.SignalName(st.Signal())
		default:
			res.ExitCode = st.ExitStatus()
		}
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return res, fmt.Errorf("wait for %s: %w", spec.Path, waitErr)
	}
	return res, nil
}

// terminateGroup sends SIGTERM to the group (torchrun forwards it to its
// workers and prints what it was doing), then SIGKILL after grace. It
// reports whether the leader exited.
func terminateGroup(pgid int, exited <-chan struct{}, grace time.Duration) bool {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-exited:
		return true
	case <-time.After(killBound):
		return false
	}
}

// killBound is how long SIGKILL may take before ncclwiz gives up waiting.
const killBound = 15 * time.Second

// sweep finds the processes of a run that are still alive after its leader
// exited: members of the process group, and any process whose environment
// carries the run's marker. It ends them with SIGKILL (the group by its ID,
// the others by PID after re-reading their marker) and waits until /proc
// shows none, for a few seconds at most.
func sweep(pgid int, marker string) (survivors, leftover []Proc) {
	seen := map[int]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for {
		procs := findRunProcs(pgid, marker)
		if len(procs) == 0 {
			return survivors, nil
		}
		for _, p := range procs {
			if !seen[p.PID] {
				seen[p.PID] = true
				survivors = append(survivors, p)
			}
		}
		if time.Now().After(deadline) {
			return survivors, procs
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		for _, p := range procs {
			if p.Why == "environment marker" && hasMarker(p.PID, marker) {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// findRunProcs lists live (not zombie) processes other than the leader
// that are in the group or carry the marker. It reads the real /proc: these
// are processes ncclwiz itself started, never a fixture's.
func findRunProcs(pgid int, marker string) []Proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		comm, state, pgrp, ok := readStat(pid)
		if !ok || state == "Z" || state == "X" {
			continue
		}
		switch {
		case pgrp == pgid:
			out = append(out, Proc{PID: pid, Comm: comm, Why: "process group"})
		case marker != "" && hasMarker(pid, marker):
			out = append(out, Proc{PID: pid, Comm: comm, Why: "environment marker"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// readStat parses /proc/PID/stat: the comm is in parentheses and may hold
// spaces or parentheses, so fields are counted from the last ')'.
func readStat(pid int) (comm, state string, pgrp int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", "", 0, false
	}
	open := bytes.IndexByte(b, '(')
	closeP := bytes.LastIndexByte(b, ')')
	if open < 0 || closeP < open {
		return "", "", 0, false
	}
	comm = string(b[open+1 : closeP])
	f := strings.Fields(string(b[closeP+1:]))
	if len(f) < 3 {
		return "", "", 0, false
	}
	pgrp, err = strconv.Atoi(f[2])
	if err != nil {
		return "", "", 0, false
	}
	return comm, f[0], pgrp, true
}

func hasMarker(pid int, marker string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return false
	}
	want := []byte(MarkerVar + "=" + marker)
	for _, kv := range bytes.Split(b, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}

// readLines splits r into lines, keeping at most maxLine bytes of each, so
// that a binary blob or a huge line neither stalls nor exhausts memory.
func readLines(r io.Reader, on func(string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var cur []byte
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if !over {
				room := maxLine - len(cur)
				if len(chunk) > room {
					cur = append(cur, chunk[:room]...)
					over = true
				} else {
					cur = append(cur, chunk...)
				}
			}
			if chunk[len(chunk)-1] == '\n' {
				if on != nil {
					on(strings.TrimRight(string(cur), "\r\n"))
				}
				cur, over = cur[:0], false
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if len(cur) > 0 && on != nil {
				on(strings.TrimRight(string(cur), "\r\n"))
			}
			return
		}
	}
}
