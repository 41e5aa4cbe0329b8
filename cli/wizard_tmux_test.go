package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/shmtest"
	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// The real binary in a real terminal: diagnose a real tmpfs full of
// orphaned segments, read the guide, apply the cleanup, see the re-check
// pass, reach the summary and export the fix script. Run twice: in colour,
// and with NO_COLOR=1 (no colour escapes on screen), with a resize to 80x24
// in the middle.
func TestWizardEndToEndInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	bin := tmuxtest.Build(t, "..")
	for _, noColor := range []bool{false, true} {
		name := "colour"
		if noColor {
			name = "no-color"
		}
		t.Run(name, func(t *testing.T) {
			dir := shmtest.MountTmpfs(t, "512M")
			var orphans []string
			for _, n := range []string{"nccl-e2eA01", "nccl-e2eB02", "nccl-e2eC03"} {
				orphans = append(orphans, shmtest.MakeSegment(t, dir, n, 1<<20, time.Hour))
			}
			work := t.TempDir()
			env := []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + work}
			if noColor {
				env = append(env, "NO_COLOR=1")
			}
			s := tmuxtest.Start(t, 100, 30, work, env, bin+" --shm-path "+dir+" --python "+noTorchPython(t))
			s.WaitFor(10*time.Second, "Diagnose this machine")
			s.Keys("Enter")
			scr := s.WaitFor(30*time.Second, "[Findings]", "3 orphaned NCCL segment") // the Detect screen lists the finding too
			if !strings.Contains(scr, "shm.segments") {
				t.Errorf("findings screen:\n%s", scr)
			}
			s.Resize(80, 24) // re-layout mid-run
			s.Keys("g")      // the finding's guide
			s.WaitFor(10*time.Second, "Orphaned NCCL segments", "## Symptom")
			s.Keys("Tab") // on to the fixes
			s.WaitFor(10*time.Second, "Remove 3 orphaned")
			s.Keys("Space")
			s.Keys("Enter")
			s.WaitFor(5*time.Second, "Apply 1 fix?")
			for _, p := range orphans {
				if _, err := os.Stat(p); err != nil {
					t.Fatalf("%s removed before consent", p)
				}
			}
			s.Keys("End") // y needs every line of the plan seen
			s.WaitFor(5*time.Second, "y apply it")
			s.Keys("y")
			s.WaitFor(20*time.Second, "re-check passed")
			for _, p := range orphans {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s survived the cleanup", p)
				}
			}
			s.Keys("Enter") // validate
			s.WaitFor(10*time.Second, "Validate with a small collective test")
			s.Keys("Enter") // summary
			s.WaitFor(10*time.Second, "Summary", "shm.cleanup")
			s.Keys("e")
			s.WaitFor(5*time.Second, "export to:")
			s.Keys("Enter")
			s.WaitFor(10*time.Second, "exported ncclwiz-fix.sh")
			if noColor {
				esc := s.ScreenEscapes()
				// Foreground/background colours (30-38, 40-48, 90-97, 100-107);
				// 39/49 only reset to the terminal's default.
				if regexp.MustCompile(`\x1b\[(?:[0-9]*;)*(?:3[0-8]|4[0-8]|9[0-7]|10[0-7])(?:;[0-9;]*)?m`).MatchString(esc) {
					t.Errorf("colour escapes with NO_COLOR=1:\n%q", esc)
				}
			}
			s.Keys("q")
			s.WaitFor(10*time.Second, "NCCLWIZ-EXIT=")
			script, err := os.ReadFile(filepath.Join(work, "ncclwiz-fix.sh"))
			if err != nil || !strings.Contains(string(script), "set -euo pipefail") {
				t.Errorf("exported script: %v\n%s", err, script)
			}
		})
	}
}

// Piped, with no TTY, the binary prints the report and exits with the
// check's exit code instead of failing to open a terminal.
func TestNoTTYPrintsReport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := tmuxtest.Build(t, "..")
	s := tmuxtest.Start(t, 100, 60, "", []string{"TERM=xterm-256color"}, bin+" --scenario shm-orphans </dev/null | cat")
	scr := s.WaitFor(30*time.Second, "NCCLWIZ-EXIT=")
	if !strings.Contains(scr, "ncclwiz check") || !strings.Contains(scr, "orphaned") || strings.Contains(scr, "TTY") {
		t.Errorf("screen:\n%s", scr)
	}
}
