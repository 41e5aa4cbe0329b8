package contain

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSweepRunsEndsLeftProcesses (issue 22 item 20): ncclwiz and its
// keeper were both SIGKILLed under --contain subreaper, so nothing ended
// the run: its directory stayed, and so did its processes — one carrying
// the run's marker, one that left its session and dropped the marker but
// is in the run's cgroup (root). The next run's SweepRuns ends both (by
// PID, start time checked), removes the directory and says what it did;
// without a cgroup it says what it cannot find.
func TestSweepRunsEndsLeftProcesses(t *testing.T) {
	const id = "SWEEPTEST23456"
	parent := t.TempDir()
	dir := filepath.Join(parent, TmpPrefix+id+"-x1")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// An owner that is gone: this process's PID with another start time.
	self, ok := readStat(os.Getpid())
	ns, _ := os.Readlink("/proc/self/ns/pid")
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if !ok {
		t.Skip("no /proc")
	}
	owner := fmt.Sprintf("%d %d %s %s\n", os.Getpid(), self.StartTicks+1, ns, strings.TrimSpace(string(boot)))
	if err := os.WriteFile(filepath.Join(dir, ".ncclwiz-owner"), []byte(owner), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(env ...string) (*exec.Cmd, chan struct{}) {
		c := exec.Command("sleep", "60")
		c.Env = append(os.Environ(), env...)
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		t.Cleanup(func() { _ = c.Process.Kill(); <-done })
		return c, done
	}
	marked, markedDone := start("NCCLWIZ_RUN_ID=" + id)
	var inCg *exec.Cmd
	var inCgDone chan struct{}
	if own, err := ownCgroupDir(); err == nil && os.Geteuid() == 0 {
		cg := filepath.Join(own, TmpPrefix+id+"-cg")
		if err := os.Mkdir(cg, 0o755); err == nil {
			t.Cleanup(func() { _ = syscall.Rmdir(cg) })
			inCg, inCgDone = start() // no marker, its own session
			if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(inCg.Process.Pid)), 0); err != nil {
				t.Logf("cannot move a process into %s (%v): the cgroup path is not tested here", cg, err)
				inCg = nil
			}
		}
	}
	notes := SweepRuns(parent, "NCCLWIZ_RUN_ID")
	all := strings.Join(notes, "\n")
	wait := func(name string, c *exec.Cmd, done chan struct{}) {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("%s (pid %d) still runs after the sweep:\n%s", name, c.Process.Pid, all)
		}
		if !strings.Contains(all, strconv.Itoa(c.Process.Pid)+" ") {
			t.Errorf("the notes do not name %s (pid %d):\n%s", name, c.Process.Pid, all)
		}
	}
	wait("the marked process", marked, markedDone)
	if inCg != nil {
		wait("the process in the run's cgroup", inCg, inCgDone)
	} else if !strings.Contains(all, "had no cgroup here") {
		t.Errorf("without a cgroup the notes should say what cannot be found:\n%s", all)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the run's directory is still there")
	}
	t.Logf("notes:\n%s", all)
}
