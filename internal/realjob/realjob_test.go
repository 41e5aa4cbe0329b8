package realjob

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOrphansAreCleanedUp: a job whose launcher was killed leaves orphaned
// ranks; Close kills them too, by the job's token.
func TestOrphansAreCleanedUp(t *testing.T) {
	t.Parallel()
	j := Start(t, Spec{Launcher: Subprocess, Behave: map[int]Behaviour{1: Sleep}})
	j.WaitReady(3 * time.Minute)
	ranks, ls := j.Ranks(), j.Launchers()
	if len(ranks) != 3 || len(ls) != 1 {
		t.Fatalf("ranks %v, launchers %v", ranks, ls)
	}
	for r, pid := range ranks {
		if ppid := parentOf(pid); ppid != ls[0] {
			t.Errorf("rank %d (pid %d): parent %d, want the launcher %d", r, pid, ppid, ls[0])
		}
	}
	starts := map[int]uint64{}
	for _, pid := range ranks {
		starts[pid] = startTicks(pid)
	}
	j.KillLauncher()
	for r, pid := range ranks {
		if ppid := parentOf(pid); ppid == ls[0] || ppid == 0 {
			t.Errorf("rank %d (pid %d) not re-parented: parent %d", r, pid, ppid)
		}
	}
	j.Close()
	for _, pid := range ranks {
		// Dead: gone, a zombie until init reaps it, or its PID already
		// reused (pid_max may be 32768 on a busy machine).
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH && procState(pid) != "Z" && startTicks(pid) == starts[pid] {
			t.Errorf("rank pid %d outlived Close: state %q", pid, procState(pid))
		}
	}
	if left := scanToken("REALJOB_TOKEN=" + j.Token()); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// TestRaiseEndsTheJob: a rank's IndexError ends the job with a failure
// and the traceback in its output.
func TestRaiseEndsTheJob(t *testing.T) {
	t.Parallel()
	j := Start(t, Spec{Launcher: Subprocess, Behave: map[int]Behaviour{1: Raise}})
	code, err := j.Wait(3 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if out := j.Output(); code == 0 || !strings.Contains(out, "IndexError: list index out of range") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, _ := strconv.Atoi(f[1])
	return n
}
