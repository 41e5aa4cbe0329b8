// Package grouptest starts real child processes for tests (fake launchers,
// ranks, holders) so that none outlives its test: each leads a process
// group of its own that is killed whole when the test ends, and dies with
// the test binary if that is killed first.
package grouptest

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// Start starts c in a new process group and returns the first line it
// prints on stdout (trimmed) — its "I am ready" — and the reader for the
// rest. The group is killed with SIGKILL when the test ends.
func Start(t testing.TB, c *exec.Cmd) (string, *bufio.Reader) {
	t.Helper()
	line, out, err := start(t, c)
	if err != nil {
		t.Fatalf("start %v: %v", c.Args, err)
	}
	return line, out
}

// StartReady is Start for a process that prints "ready" first.
func StartReady(t testing.TB, c *exec.Cmd) *bufio.Reader {
	t.Helper()
	line, out, err := start(t, c)
	if err == nil && line != "ready" {
		err = fmt.Errorf("first line %q, want ready", line)
	}
	if err != nil {
		t.Fatalf("start %v: %v", c.Args, err)
	}
	return out
}

func start(t testing.TB, c *exec.Cmd) (string, *bufio.Reader, error) {
	t.Helper()
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Setpgid = true
	c.SysProcAttr.Pdeathsig = syscall.SIGKILL
	pipe, err := c.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := c.Start(); err != nil {
		return "", nil, err
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		_ = c.Wait()
	})
	out := bufio.NewReader(pipe)
	line, err := out.ReadString('\n')
	if err != nil {
		return line, out, fmt.Errorf("reading its first line: %w", err)
	}
	return strings.TrimSpace(line), out, nil
}
