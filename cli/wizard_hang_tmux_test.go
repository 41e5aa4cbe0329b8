package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// The real binary at 80×24 against a real fake job (hang/internal/fakejob:
// a torchrun-like launcher with three ranks, rank 1 blocked reading a pipe
// nobody writes while the others spin). Start → "My job is hanging" →
// (the job picked from the list when other jobs run here) → the verdict
// names rank 1, scrolls, g opens the hang guide, Esc returns to the verdict.
// The job runs in a private mount namespace with its own /tmp, so its
// flight-recorder dumps do not land in the machine's /tmp.
func TestWizardHangInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the fake job gets a private /tmp (unshare -m); CI runs as root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not installed")
	}
	bin := tmuxtest.Build(t, "..")
	// Outside /tmp: the job's namespace mounts a tmpfs there, and the
	// launcher re-executes its own path.
	dir, err := os.MkdirTemp("/var/tmp", "ncclwiz-wiz-fakejob-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	fake := filepath.Join(dir, "fakejob")
	build := exec.Command("go", "build", "-o", fake, "./hang/internal/fakejob")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fakejob: %v\n%s", err, out)
	}
	job := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount -t tmpfs ncclwiz-wiz-tmp /tmp && exec "+fake+" launcher wait,pipe,wait")
	job.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-job.Process.Pid, syscall.SIGKILL) // the launcher's group: its ranks
		_ = job.Wait()
	})
	waitRanks(t, job.Process.Pid, 3)

	s := tmuxtest.Start(t, 80, 24, "", []string{"TERM=xterm-256color", "LANG=C.UTF-8"}, bin)
	s.WaitFor(10*time.Second, "My job is hanging")
	s.Keys("3")
	scr := waitUntil(t, s, 60*time.Second, func(scr string) bool {
		return strings.Contains(scr, "Suspect:") || strings.Contains(scr, "Which one hangs?") || strings.Contains(scr, "No hang")
	})
	if strings.Contains(scr, "Which one hangs?") { // other jobs run here: pick ours
		// The list names a job by its launcher's PID, or by its first
		// rank's when the launcher is not one it knows (the fake job's
		// ranks call themselves python3 train.py, as real ones do). Other
		// tests' real jobs come and go meanwhile: move the cursor by the
		// distance to our line, then wait until it is there, since keys
		// are drawn after Keys returns.
		pid := job.Process.Pid
		var moved bool
		for range 10 {
			lines, cur := jobLines(s.Screen())
			target := slices.IndexFunc(lines, func(l string) bool { return ours(l, pid) })
			if target < 0 || cur < 0 {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			key := "Down"
			if target < cur {
				key = "Up"
			}
			for range max(target-cur, cur-target) {
				s.Keys(key)
			}
			got := s.WaitUntil(5*time.Second, func(scr string) bool {
				l := cursorLine(scr)
				return ours(l, pid) || l != lines[cur]
			})
			if ours(cursorLine(got), pid) {
				moved = true
				break
			}
		}
		if !moved {
			t.Fatalf("the fake job (launcher pid %d) is not in the list:\n%s", pid, s.Screen())
		}
		s.Keys("Enter")
	}
	scr = s.WaitFor(60*time.Second, "Suspect: rank 1")
	assertFits(t, scr, 80, 24)
	if !strings.Contains(scr, "g guide") || !strings.Contains(scr, "pgdn") {
		t.Errorf("verdict help bar:\n%s", scr)
	}
	s.Keys("End")
	scr = s.WaitFor(10*time.Second, "end; pgup/home")
	assertFits(t, scr, 80, 24)
	s.Keys("g")
	s.WaitFor(10*time.Second, "finding the rank that holds everyone up")
	s.Keys("Escape")
	s.WaitFor(10*time.Second, "Suspect: rank 1")
	s.Keys("q")
	s.WaitFor(10*time.Second, "NCCLWIZ-EXIT=")
	if err := syscall.Kill(job.Process.Pid, 0); err != nil {
		t.Errorf("the job is gone after the read-only inspection: %v", err)
	}
}

// waitRanks waits until the launcher has n children.
func waitRanks(t *testing.T, pid, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join("/proc", itoa(pid), "task", itoa(pid), "children"))
		if len(strings.Fields(string(b))) >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the fake launcher did not start %d ranks", n)
}

func itoa(n int) string { return strconv.Itoa(n) }

// ours reports whether a job-list line names the launcher pid or one of
// its children.
func ours(line string, launcher int) bool {
	// The job is listed by its launcher, or by its first rank: unshare's
	// child (the fake launcher) and that one's children (the ranks).
	pids := []string{strconv.Itoa(launcher)}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", launcher, launcher))
	for _, c := range strings.Fields(string(b)) {
		pids = append(pids, c)
		g, _ := os.ReadFile(fmt.Sprintf("/proc/%s/task/%s/children", c, c))
		pids = append(pids, strings.Fields(string(g))...)
	}
	for _, p := range pids {
		if strings.Contains(line, " "+p+" ") {
			return true
		}
	}
	return false
}

// jobLines are the job list's lines (PID first, the cursor's marked) and
// the index of the cursor's.
func jobLines(scr string) (lines []string, cursor int) {
	cursor = -1
	for _, l := range strings.Split(scr, "\n") {
		f := strings.Fields(strings.TrimLeft(strings.TrimSpace(l), "›>"))
		if len(f) < 2 {
			continue
		}
		if _, err := strconv.Atoi(f[0]); err != nil {
			continue
		}
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "›") || strings.HasPrefix(t, ">") {
			cursor = len(lines)
		}
		lines = append(lines, l)
	}
	return lines, cursor
}

// cursorLine is the line of the list the cursor is on.
func cursorLine(scr string) string {
	for _, l := range strings.Split(scr, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "›") || strings.HasPrefix(strings.TrimSpace(l), ">") {
			return l
		}
	}
	return ""
}

// assertFits fails when the captured screen is larger than w×h.
func assertFits(t *testing.T, scr string, w, h int) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(scr, "\n"), "\n")
	if len(lines) > h {
		t.Errorf("%d lines on a %d-line screen", len(lines), h)
	}
	for i, l := range lines {
		if n := len([]rune(l)); n > w {
			t.Errorf("line %d is %d cells: %q", i, n, l)
		}
	}
}
