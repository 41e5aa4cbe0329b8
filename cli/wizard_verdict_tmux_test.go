package cli

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/shmtest"
	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// oneLine collapses the whitespace of a screen or an output, so that a
// sentence wrapped at 80 columns reads as one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// One verdict rule (steps.Judge), seen from both front ends on a real
// tmpfs: 16 MiB, a live rank's 10 MiB segment and a 4 MiB orphan. The
// cleanup frees 4 MiB, yet /dev/shm is still full (6 MiB free, less than
// one NCCL segment); the remount, not applied, answers that. Both
// `ncclwiz fix --apply shm.cleanup` and the wizard at 80x24 say so in the
// same words and neither calls the cleanup failed.
func TestFixVerdictSameInCLIAndWizard(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	shmtest.RequireRoot(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (CI installs it)")
	}
	dir := shmtest.MountTmpfs(t, "16M")
	held := shmtest.MakeSegment(t, dir, "nccl-live01", 10<<20, time.Hour)
	holdOpen(t, held)
	orphan := shmtest.MakeSegment(t, dir, "nccl-gone01", 4<<20, time.Hour)
	// Which fixes answer it depends on where ncclwiz runs (a container
	// names container.shm first): shm.remount is among them here.
	want := "done; the re-check still reports " + dir + " is full: 6 MiB free, less than one NCCL segment (9.2 MiB), which "
	wantRe := regexp.MustCompile(regexp.QuoteMeta(want) + `(?:[a-z.]+ or )*shm\.remount`)

	out, errs, code := runIn(t, "", "--shm-path", dir, "fix", "--apply", "shm.cleanup", "--yes")
	if code != 0 || fileExists(orphan) || !wantRe.MatchString(oneLine(out)) || strings.Contains(out, "still reported:") {
		t.Fatalf("fix --apply shm.cleanup: exit %d, orphan left %v; want %q\n%s\n%s", code, fileExists(orphan), want, out, errs)
	}

	orphan = shmtest.MakeSegment(t, dir, "nccl-gone02", 4<<20, time.Hour)
	bin := tmuxtest.Build(t, "..")
	work := t.TempDir()
	s := tmuxtest.Start(t, 80, 24, work, []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + work, "NO_COLOR=1"}, bin+" --shm-path "+dir)
	s.WaitFor(10*time.Second, "Diagnose this machine")
	s.Keys("Enter")
	s.WaitFor(30*time.Second, "Findings (3/8)", "is full")
	s.Keys("Tab")
	s.WaitFor(10*time.Second, "Explain (4/8)")
	s.Keys("Tab")
	s.WaitFor(30*time.Second, "Fixes for what was found", "Remove 1 orphaned segment")
	s.Keys("Space")
	s.WaitFor(5*time.Second, "[x] low")
	s.Keys("Enter")
	s.WaitFor(5*time.Second, "Apply 1 fix?")
	s.Keys("End")
	s.Keys("y")
	scr := s.WaitFor(60*time.Second, "Applied: what happened")
	if fileExists(orphan) || !fileExists(held) {
		t.Errorf("wizard cleanup: orphan left %v, live segment kept %v", fileExists(orphan), fileExists(held))
	}
	if !wantRe.MatchString(oneLine(scr)) || strings.Contains(scr, "re-check still reports:") {
		t.Errorf("the wizard's verdict differs from the CLI's %q:\n%s", want, scr)
	}
}
