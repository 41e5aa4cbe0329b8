package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/gobin"
	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// Issue 25 on practice servers in tmux, one session per server, run side by
// side. Each step names the item it shows.
func TestWizardFirstSessionInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (CI installs it)")
	}
	bin := tmuxtest.Build(t, "..")
	start := func(t *testing.T, w, h int, scenario string) (*tmuxtest.Session, string) {
		work := t.TempDir()
		env := []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + work, "NO_COLOR=1"}
		s := tmuxtest.Start(t, w, h, work, env, bin+" --scenario "+scenario)
		s.WaitFor(10*time.Second, "Diagnose this machine")
		return s, work
	}

	// A container without CAP_SYS_ADMIN at 60x15: only what can run here is
	// recommended, advice is never applied or "verified" (25.4); the Fix
	// list keeps its risk column (25.11); Validate's last sentence can be
	// read (25.11); the exit line's command keeps --scenario (25.6).
	t.Run("docker-small-shm at 60x15", func(t *testing.T) {
		t.Parallel()
		s, _ := start(t, 60, 15, "docker-small-shm")
		s.Keys("Enter")
		s.WaitFor(20*time.Second, "Findings (3/8)", "64 MiB")
		s.Keys("Tab", "Tab")
		scr := s.WaitFor(10*time.Second, "Fix (5/8)", " -  advice")
		if strings.Contains(scr, "Grow /dev/shm") || strings.Contains(scr, "(remount)") {
			t.Errorf("a remount is offered in a container without CAP_SYS_ADMIN:\n%s", scr)
		}
		s.Keys("Space")
		s.WaitFor(5*time.Second, "is advice: nothing runs")
		s.Keys("Tab")
		s.WaitFor(10*time.Second, "Validate (7/8)", "cannot run here")
		s.Keys("End")
		scr = s.WaitFor(5*time.Second, "end; pgup/home")
		if !strings.Contains(words(scr), "No fix was applied") || strings.Contains(scr, "re-running") {
			t.Errorf("Validate's sentence about the fixes:\n%s", scr)
		}
		s.Keys("Tab")
		scr = s.WaitFor(10*time.Second, "Summary (8/8)", "→ fix: container.shm")
		if strings.Contains(scr, "shm.remount") || !strings.Contains(scr, "verified: nothing") {
			t.Errorf("Summary recommends what cannot run here or claims a verification:\n%s", scr)
		}
		s.Resize(120, 15)
		s.Keys("q")
		s.WaitFor(10*time.Second, "run `ncclwiz check -v --scenario docker-small-shm` for details", "NCCLWIZ-EXIT=1")
	})

	// Orphans on a practice server at 80x24: q in an open guide goes back
	// (25.14); a 1x1 window on the Explain screen does not crash it
	// (22.18); the practice Summary does not tell to run its script with
	// --apply (25.15); r re-checks in place, and Diagnose from Start shows
	// the machine as it is now, not the first run (25.2).
	t.Run("shm-orphans at 80x24", func(t *testing.T) {
		t.Parallel()
		s, work := start(t, 80, 24, "shm-orphans")
		s.Keys("Enter")
		s.WaitFor(20*time.Second, "Findings (3/8)", "12 orphaned NCCL segments")
		s.Keys("g")
		s.WaitFor(10*time.Second, "ncclwiz guides ›")
		s.Keys("q")
		s.WaitFor(10*time.Second, "Findings (3/8)", "12 orphaned NCCL segments")
		s.Keys("Tab")
		s.WaitFor(10*time.Second, "Explain (4/8)")
		s.Resize(1, 1)
		time.Sleep(300 * time.Millisecond) // a frame at 1x1
		s.Resize(80, 24)
		scr := s.WaitFor(10*time.Second, "Explain (4/8)")
		if strings.Contains(scr, "NCCLWIZ-EXIT") || strings.Contains(scr, "panic") {
			t.Fatalf("the wizard died at 1x1:\n%s", scr)
		}
		s.Keys("Tab")
		s.WaitFor(10*time.Second, "Fix (5/8)", "Remove 13 orphaned")
		s.Keys("Space", "Enter")
		s.WaitFor(5*time.Second, "Apply 1 fix?")
		s.Keys("End")
		s.WaitFor(5*time.Second, "end; pgup/home")
		s.Keys("y")
		s.WaitFor(20*time.Second, "Applied: what happened", "removed 13 segments")
		s.Keys("Enter")
		s.WaitFor(10*time.Second, "Validate (7/8)")
		s.Keys("Enter")
		s.WaitFor(10*time.Second, "Summary (8/8)")
		s.Keys("e", "Enter")
		scr = s.WaitFor(10*time.Second, "exported ncclwiz-fix.sh", "a practice script")
		if strings.Contains(scr, "--apply") && !strings.Contains(scr, "refuses --apply") {
			t.Errorf("the practice Summary says to run its script with --apply:\n%s", scr)
		}
		if _, err := os.Stat(filepath.Join(work, "ncclwiz-fix.sh")); err != nil {
			t.Error(err)
		}
		s.Keys("r")
		s.WaitFor(20*time.Second, "Summary (8/8)", "exported ncclwiz-fix.sh")
		// Back to Start, Diagnose again: the cleanup's result, not the
		// first run's 12 orphans.
		for i := 0; i < 10 && !strings.Contains(s.Screen(), "Start (1/8)"); i++ {
			s.Keys("Escape")
			time.Sleep(300 * time.Millisecond) // one step back at a time
		}
		s.WaitFor(10*time.Second, "Start (1/8)")
		s.Keys("1")
		scr = s.WaitFor(20*time.Second, "Findings (3/8)")
		if strings.Contains(scr, "12 orphaned") || strings.Contains(scr, "done in") {
			t.Errorf("Diagnose again shows the first run:\n%s", scr)
		}
		s.Keys("Tab")
		scr = s.WaitUntil(10*time.Second, func(scr string) bool { return !strings.Contains(scr, "Findings (3/8)") })
		if strings.Contains(scr, "Apply") && strings.Contains(scr, "Applied") {
			t.Errorf("tab leads to the previous round's Apply:\n%s", scr)
		}
		s.Keys("q")
		s.WaitFor(10*time.Second, "NCCLWIZ-EXIT=")
	})

	// A healthy server: the next steps, not a dead end (25.13); the help
	// bar keeps "? more keys" at 80 columns (25.11).
	t.Run("healthy-h100", func(t *testing.T) {
		t.Parallel()
		s, _ := start(t, 80, 24, "healthy-h100")
		s.Keys("Enter")
		scr := s.WaitFor(20*time.Second, "No problems found", "explain the job's log", "my job is hanging", "check this machine again")
		lines := strings.Split(strings.TrimRight(scr, "\n"), "\n")
		if last := strings.TrimSpace(lines[len(lines)-1]); !strings.HasSuffix(last, "? more keys") {
			t.Errorf("the help bar hides '? more keys': %q", last)
		}
		s.Keys("h")
		s.WaitFor(15*time.Second, "My job is hanging")
		s.Keys("q")
		s.WaitFor(10*time.Second, "NCCLWIZ-EXIT=")
	})
}

// Issue 22 item 1 and issue 25 item 7 in tmux: the Summary's e never
// writes through a symlink, never replaces a file without asking (a file
// nobody planted, mode 0666, is replaced only after y, by a new file
// root owns), and as nobody in a directory it cannot write names the
// directory and writes where it can after one enter. The CLI's
// fix --export does not replace a file either without --yes.
func TestWizardExportsInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (CI installs it)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: a file planted by nobody, and the wizard run as nobody (CI runs as root)")
	}
	bin := gobin.Reachable(t, tmuxtest.Build(t, ".."))
	toSummary := func(s *tmuxtest.Session) {
		s.WaitFor(10*time.Second, "Diagnose this machine")
		s.Keys("Enter")
		s.WaitFor(20*time.Second, "Findings (3/8)")
		for range 4 {
			s.Keys("Tab")
			time.Sleep(150 * time.Millisecond) // pacing
		}
		s.WaitFor(10*time.Second, "Summary (8/8)")
	}

	t.Run("root: symlink and a planted file", func(t *testing.T) {
		t.Parallel()
		work := t.TempDir()
		victim := filepath.Join(work, "victim")
		if err := os.WriteFile(victim, []byte("victim\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(work, "ncclwiz-fix.sh")); err != nil {
			t.Fatal(err)
		}
		planted := filepath.Join(work, "planted.sh")
		if err := os.WriteFile(planted, []byte("# nobody's\n"), 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(planted, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(planted, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		s := tmuxtest.Start(t, 80, 24, work, []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + work, "NO_COLOR=1"}, bin+" --scenario docker-small-shm")
		toSummary(s)
		s.Keys("e", "Enter")
		s.WaitFor(10*time.Second, "export failed", "symbolic link")
		if b, _ := os.ReadFile(victim); string(b) != "victim\n" {
			t.Fatalf("the export wrote through the symlink: %q", b)
		}
		s.Keys("e", "C-u")
		s.Type("planted.sh")
		s.Keys("Enter")
		s.WaitFor(10*time.Second, "planted.sh already exists", "y replace it")
		if b, _ := os.ReadFile(planted); string(b) != "# nobody's\n" {
			t.Fatalf("replaced before the answer: %q", b)
		}
		s.Keys("y")
		s.WaitFor(10*time.Second, "exported planted.sh")
		var st syscall.Stat_t
		if err := syscall.Stat(planted, &st); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(planted); st.Uid != 0 || st.Mode&0o022 != 0 || !strings.Contains(string(b), "ncclwiz-practice-scenario") {
			t.Errorf("the replaced script: uid %d, mode %o, content %.60q", st.Uid, st.Mode&0o777, b)
		}

		// fix --export: no TTY, an existing file, no --yes: refused.
		r := runBin(t, bin, nil, "--scenario", "docker-small-shm", "fix", "--export", victim)
		if b, _ := os.ReadFile(victim); r.code != 2 || !strings.Contains(r.stderr, "already exists") || string(b) != "victim\n" {
			t.Errorf("fix --export over a file: exit %d, %q; file %q", r.code, r.stderr, b)
		}
	})

	t.Run("nobody in a directory it cannot write", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("setpriv not installed")
		}
		work, home := t.TempDir(), t.TempDir()
		for _, d := range []string{filepath.Dir(work), work} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(filepath.Dir(home), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(home, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		s := tmuxtest.Start(t, 100, 24, work, []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + home, "NO_COLOR=1"},
			"setpriv --reuid 65534 --regid 65534 --clear-groups "+bin+" --scenario docker-small-shm")
		toSummary(s)
		s.Keys("e", "Enter")
		scr := s.WaitUntil(10*time.Second, func(scr string) bool { return strings.Contains(words(scr), "export failed: cannot write in") })
		if !strings.Contains(words(scr), "try "+filepath.Join(home, "ncclwiz-fix.sh")) {
			t.Errorf("no directory named or no alternative offered:\n%s", scr)
		}
		s.Keys("Enter") // the field holds the alternative
		s.WaitFor(10*time.Second, "exported ")
		if _, err := os.Stat(filepath.Join(home, "ncclwiz-fix.sh")); err != nil {
			t.Errorf("not written where offered: %v", err)
		}
	})
}

// Issue 25 item 12 in tmux: the log field takes a quoted path (as a
// terminal drops a file), Tab completes a path with a space, and a glob or
// a torchrun log directory is read as its logs.
func TestWizardLogPathsInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	bin := tmuxtest.Build(t, "..")
	src, err := os.ReadFile("testdata/paste-nodevice.log")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	for _, rel := range []string{"my run.log", "logs/rank1.log", "tlogs/run1/attempt_0/1/stderr.log"} {
		p := filepath.Join(work, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := tmuxtest.Start(t, 80, 24, work, []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + work}, bin)
	s.WaitFor(10*time.Second, "Diagnose this machine")
	s.Keys("2")
	s.WaitFor(5*time.Second, "log file:")
	const cause = "Root cause: CUDA could not initialise"
	s.Type("'" + filepath.Join(work, "my run.log") + "'")
	s.Keys("Enter")
	// The evidence line whole, wrapped (25.11), not cut with "…".
	s.WaitFor(15*time.Second, cause, "my run.log:4", "CUDA-capable device is detected'")
	s.Keys("o", "C-u")
	s.Type("./my")
	s.Keys("Tab")
	s.WaitFor(5*time.Second, `log file: ./my\ run.log`)
	s.Keys("Enter")
	s.WaitFor(15*time.Second, cause)
	s.Keys("o", "C-u")
	s.Type("tlogs")
	s.Keys("Enter")
	s.WaitFor(15*time.Second, cause, "Evidence: stderr.log:4")
	s.Keys("o", "C-u")
	s.Type("logs/*.log")
	s.Keys("Enter")
	s.WaitFor(15*time.Second, cause, "rank1.log:4")
}
