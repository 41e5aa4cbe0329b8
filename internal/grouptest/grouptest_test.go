package grouptest

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/polltest"
)

// TestGroupEndsWithTest: the child and the grandchild it started (same
// group) are both gone once the test that started them ends.
func TestGroupEndsWithTest(t *testing.T) {
	var pids []int
	t.Run("start", func(t *testing.T) {
		c := exec.Command("sh", "-c", "sleep 600 & echo ready; echo $!; wait")
		out := StartReady(t, c)
		line, err := out.ReadString('\n')
		grand, err2 := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || err2 != nil {
			t.Fatalf("grandchild pid: %q %v %v", line, err, err2)
		}
		pids = []int{c.Process.Pid, grand}
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); err != nil {
				t.Fatalf("pid %d not running: %v", pid, err)
			}
		}
	})
	for _, pid := range pids {
		// The grandchild is reaped by init, a moment after the kill.
		if !polltest.Until(10*time.Second, func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH }) {
			t.Errorf("pid %d outlived its test", pid)
		}
	}
}

func TestStartReadyRejectsOtherFirstLine(t *testing.T) {
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		StartReady(ft, exec.Command("sh", "-c", "echo hello; sleep 600"))
	}()
	if !strings.Contains(ft.msg, `first line "hello", want ready`) {
		t.Errorf("failure message %q", ft.msg)
	}
}

// fakeT records Fatalf instead of ending the test (cleanups still go to
// the real test).
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = strings.TrimSpace(fmt.Sprintf(format, args...))
	panic("fatal")
}
