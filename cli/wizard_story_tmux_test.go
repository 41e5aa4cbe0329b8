package cli

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

	"github.com/ncclwiz/ncclwiz/internal/shmtest"
	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// The classic story (issue 25), for real, from Start to Summary in one
// pass at 80x24: a job died in a PID namespace whose init is tini, leaving
// two orphaned NCCL segments and a leftover rank — a real Python process
// that ignores SIGTERM and holds a third segment open and mapped. The
// wizard finds both (evidence in human words, 25.10), plans proc.stale
// first with the rank's PID ticked in a checklist (25.3, 25.5) and a
// cleanup that also takes the rank's segment once the rank is gone (25.3),
// accepts y only after the whole plan was on screen (22.8), asks for
// SIGKILL on the Apply screen in full (25.1), and ends with every problem
// fixed and a Summary that says so. The script exported there keeps
// --shm-path (25.6) and an existing file is not replaced without asking
// (25.7).
func TestWizardClassicStory(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	shmtest.RequireRoot(t)
	for _, tool := range []string{"tmux", "unshare", "tini", "/usr/bin/python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (CI installs it)", tool)
		}
	}
	bin := tmuxtest.Build(t, "..")
	shm := shmtest.MountTmpfs(t, "256M")
	orphans := []string{
		shmtest.MakeSegment(t, shm, "nccl-story-orphan1", 300<<10, time.Hour),
		shmtest.MakeSegment(t, shm, "nccl-story-orphan2", 300<<10, time.Hour),
	}
	held := filepath.Join(shm, "nccl-story-held")
	work := t.TempDir()
	precious := filepath.Join(work, "ncclwiz-fix.sh")
	if err := os.WriteFile(precious, []byte("# my own important script\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A python3 without torch, so that this story is about /dev/shm and
	// ranks, not about the CI machine's CPU-only torch (item 8's test).
	noTorch := noTorchPython(t)
	job, err := filepath.Abs(filepath.Join("testdata", "story", "job.py"))
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(work, "rank.ready")
	// The clock is 10 minutes ahead for ncclwiz: a leftover must be two
	// minutes old, and a test cannot wait that long (--clock-ahead is the
	// host's clock seam, hidden).
	inner := fmt.Sprintf("/usr/bin/python3 %s launcher %s %s && exec %s --shm-path %s --python %s --clock-ahead 10m",
		job, shm, ready, bin, shm, noTorch)
	env := []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + work, "NO_COLOR=1"}
	s := tmuxtest.Start(t, 80, 24, work, env, "unshare -fp --mount-proc tini -- sh -c '"+inner+"'")
	s.WaitFor(20*time.Second, "Diagnose this machine")
	rank := procWith(t, "job.py rank "+shm)
	t.Cleanup(func() { _ = syscall.Kill(rank, syscall.SIGKILL) })

	s.Keys("Enter")
	s.WaitFor(40*time.Second, "Findings (3/8)", "1 leftover rank", "2 orphaned NCCL segments")
	// Evidence for people: the segment's name first, its age in minutes.
	s.Keys("End")
	scr := s.WaitFor(5*time.Second, "- nccl-story-orphan1 — orphaned", "min old")
	for _, raw := range []string{"age_seconds", "allocated=", "inode"} {
		if strings.Contains(scr, raw) {
			t.Errorf("raw evidence %q on Findings:\n%s", raw, scr)
		}
	}

	s.Keys("Tab", "Tab")
	scr = s.WaitFor(40*time.Second, "Fixes for what was found", "End 1 leftover rank by PID")
	// proc.stale comes first (it frees what the cleanup removes), with the
	// rank's PID ticked under it; the cleanup takes the held segment after.
	if a, b := fixRow(scr, "End 1 leftover rank"), fixRow(scr, "Remove 2 orphaned segments"); a < 0 || b < 0 || a > b {
		t.Fatalf("proc.stale is not planned before the cleanup of 2 orphans and the rank's segment:\n%s", scr)
	}
	if r := fixRow(scr, "[x] pid "); r != fixRow(scr, "End 1 leftover rank")+1 {
		t.Errorf("the rank's PID is not ticked under proc.stale:\n%s", scr)
	}
	s.Keys("Space", "Down", "Down", "Space")
	s.WaitFor(5*time.Second, "[x] high", "[x] low")
	s.Keys("Enter")
	s.WaitFor(5*time.Second, "Apply 2 fixes?", "not yet shown")
	s.Keys("y")
	s.WaitFor(5*time.Second, "scroll to the end of the plan first")
	if !alive(rank) {
		t.Fatal("the rank ended before the plan was read")
	}
	s.Keys("End")
	s.WaitFor(5*time.Second, "only if proc.stale ends pid", "nccl-story-held", "end; pgup/home")
	s.Keys("y")
	// SIGTERM is ignored; after the 10 s grace the Apply screen asks, the
	// question whole.
	s.WaitFor(40*time.Second, "ignored", "Send SIGKILL (it cannot clean up)?", "y yes")
	if !alive(rank) {
		t.Fatal("the rank was killed before the user said yes")
	}
	s.Keys("y")
	scr = s.WaitFor(40*time.Second, "Applied: what happened", "killed (SIGKILL)", "removed 3 segments")
	for _, p := range append(orphans, held) {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s survived:\n%s", p, scr)
		}
	}
	for i := 0; alive(rank) && i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(rank) {
		t.Errorf("the leftover rank pid %d still runs", rank)
	}

	s.Keys("Enter")
	s.WaitFor(10*time.Second, "Validate (7/8)")
	s.Keys("Enter")
	scr = s.WaitFor(40*time.Second, "Summary (8/8)", "left: nothing")
	for _, want := range []string{"found: 2 problems at the start", "done: ok proc.stale", "done: ok shm.cleanup", "verified: 2 applied fixes"} {
		if !strings.Contains(scr, want) {
			t.Errorf("Summary lacks %q:\n%s", want, scr)
		}
	}
	// e writes ncclwiz-fix.sh, which exists: asked, n keeps it.
	s.Keys("e", "Enter")
	s.WaitFor(10*time.Second, "ncclwiz-fix.sh already exists", "y replace it")
	s.Keys("n")
	s.WaitFor(5*time.Second, "export to:")
	s.Keys("C-u")
	s.Type("story-fix.sh")
	s.Keys("Enter")
	s.WaitFor(20*time.Second, "exported story-fix.sh")
	if b, _ := os.ReadFile(precious); string(b) != "# my own important script\n" {
		t.Errorf("the existing script was replaced: %q", b)
	}
	script, err := os.ReadFile(filepath.Join(work, "story-fix.sh"))
	if err != nil || !strings.Contains(string(script), "Re-check with: ncclwiz check --shm-path "+shm) {
		t.Errorf("the exported script does not re-check %s (%v)", shm, err)
	}
	s.Keys("q")
	s.WaitFor(10*time.Second, "ncclwiz: no problems left. Fix script: story-fix.sh.", "NCCLWIZ-EXIT=0")
}

// procWith is the PID of the process whose command line holds s.
func procWith(t *testing.T, s string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
				return pid
			}
		}
	}
	t.Fatalf("no process runs %q", s)
	return 0
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
