package cli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// navSession starts the real binary at 80×24 on the watchdog-timeout
// practice server (two problems, a suggested log, 23 check results), in a
// Slurm job's environment so that Findings offers "Check all nodes".
func navSession(t *testing.T) *tmuxtest.Session {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	bin := tmuxtest.Build(t, "..")
	work := t.TempDir()
	s := tmuxtest.Start(t, 80, 24, work, []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + work, "SLURM_JOB_NODELIST=gpu01,gpu02"}, bin+" --scenario watchdog-timeout")
	fits(t, s.WaitFor(10*time.Second, "Diagnose this machine"))
	return s
}

// fits checks a frame: the header on the first line, no line wider than
// 80 cells, the help bar on the last of the 24 lines (a frame taller than
// the window would push one of them off).
func fits(t *testing.T, screen string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	if len(lines) != 24 || !strings.HasPrefix(lines[0], "ncclwiz") || strings.TrimSpace(lines[23]) == "" {
		t.Errorf("the frame does not fit 80×24 (%d lines):\n%s", len(lines), screen)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("line %d is %d cells wide:\n%s", i+1, w, screen)
		}
	}
	return screen
}

// waitWithout polls until the screen no longer shows marker.
func waitWithout(t *testing.T, s *tmuxtest.Session, timeout time.Duration, marker string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		scr := s.Screen()
		if !strings.Contains(scr, marker) {
			return scr
		}
		if time.Now().After(deadline) {
			t.Fatalf("still showing %q:\n%s", marker, scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Esc goes back to where the user came from, on every stage: a finding's
// guide returns to Findings with the cursor on that finding (its search
// closes first), a log result's guide to the log result, Summary to
// Validate to Fix to the guides it was reached from, side stages (log,
// Learn, guides, hang, Detect) to Start; on Start it stays and says that
// q quits.
func TestWizardEscGoesBackInTmux(t *testing.T) {
	s := navSession(t)
	start := []string{"Start (1/8)", "Diagnose this machine"}

	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, "this is the start; q quits"))

	s.Keys("Enter")
	fits(t, s.WaitFor(30*time.Second, "Findings (3/8)", "2 problems"))
	s.Keys("Down")
	fits(t, s.WaitFor(5*time.Second, "› ! gpu.processes"))
	s.Keys("g") // the selected finding's guide
	fits(t, s.WaitFor(10*time.Second, "ncclwiz guides › stale-ranks", "## Symptom"))
	s.Keys("/")
	s.Type("rank")
	s.Keys("Enter")
	fits(t, s.WaitFor(5*time.Second, "match 1/"))
	s.Keys("Escape") // closes the search, stays in the guide
	scr := waitWithout(t, s, 5*time.Second, "match 1/")
	if !strings.Contains(scr, "ncclwiz guides › stale-ranks") {
		t.Fatalf("esc with a search open left the guide:\n%s", scr)
	}
	s.Keys("Escape") // back to Findings, on the same finding
	fits(t, s.WaitFor(5*time.Second, "Findings (3/8)", "› ! gpu.processes"))
	s.Keys("n") // Check all nodes, and back
	fits(t, s.WaitFor(5*time.Second, "Check all nodes", "gpu01,gpu02"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, "Findings (3/8)", "› ! gpu.processes"))

	s.Keys("Tab") // Explain: the one guide for what was found
	fits(t, s.WaitFor(10*time.Second, "Explain (4/8)", "ncclwiz guides › stale-ranks"))
	s.Keys("Tab") // Fix
	fits(t, s.WaitFor(10*time.Second, "Fix (5/8)"))
	s.Keys("Tab") // Validate (nothing chosen: Apply is skipped)
	fits(t, s.WaitFor(10*time.Second, "Validate (7/8)"))
	s.Keys("Tab")
	fits(t, s.WaitFor(10*time.Second, "Summary (8/8)"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, "Validate (7/8)"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, "Fix (5/8)"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, "Explain (4/8)", "ncclwiz guides › stale-ranks"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, "Findings (3/8)", "› ! gpu.processes"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, start...))

	s.Keys("2") // Explain a log: the scenario's log is suggested
	fits(t, s.WaitFor(5*time.Second, "Explain a failing log", "log file:"))
	s.Keys("Enter")
	fits(t, s.WaitFor(15*time.Second, "Root cause:", "› A collective timed out"))
	s.Keys("g")
	fits(t, s.WaitFor(10*time.Second, "ncclwiz guides › watchdog-timeout"))
	s.Keys("Escape") // back to the log result, not to Findings
	fits(t, s.WaitFor(5*time.Second, "Explain a failing log", "Root cause:", "› A collective timed out"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, start...))

	s.Keys("4") // Learn: the track, a step, back to the track, back to Start
	fits(t, s.WaitFor(10*time.Second, "Learn: 7 steps"))
	s.Keys("Enter")
	fits(t, s.WaitFor(10*time.Second, "Learn 1/7"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, "Learn: 7 steps"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, start...))

	s.Keys("5") // Browse guides: a filter, cleared by esc, then back
	fits(t, s.WaitFor(10*time.Second, "ncclwiz guides ("))
	s.Keys("/")
	s.Type("sigbus")
	s.Keys("Enter")
	fits(t, s.WaitFor(5*time.Second, "Bus error"))
	s.Keys("Escape")
	waitWithout(t, s, 5*time.Second, "“sigbus”")
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, start...))

	s.Keys("3") // My job is hanging: nothing runs in a practice scenario
	fits(t, s.WaitFor(15*time.Second, "My job is hanging"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, start...))

	s.Keys("1") // Detect, its checks already run: back to Start
	fits(t, s.WaitFor(5*time.Second, "Detect (2/8)", "done in"))
	s.Keys("Escape")
	fits(t, s.WaitFor(5*time.Second, start...))

	s.Keys("q")
	s.WaitFor(10*time.Second, "NCCLWIZ-EXIT=")
}

// A long list scrolls in 80×24: every check result (a) is reachable with
// the cursor, down to the last and back to the first, and every frame
// fits the window.
func TestWizardLongListScrollsInTmux(t *testing.T) {
	s := navSession(t)
	s.Keys("Enter")
	fits(t, s.WaitFor(30*time.Second, "Findings (3/8)", "2 problems"))
	s.Keys("a")
	scr := fits(t, s.WaitFor(5*time.Second, "(1 of "))
	m := regexp.MustCompile(`\(1 of (\d+)\)`).FindStringSubmatch(scr)
	n, _ := strconv.Atoi(m[1])
	if n < 20 {
		t.Fatalf("only %d results listed: not a long list at 80×24:\n%s", n, scr)
	}
	// The position line shows only when the list does not fit: it pages.
	selected := regexp.MustCompile(`(?m)^› (.+)$`)
	seen := map[string]bool{}
	for i := 1; i <= n; i++ {
		if i > 1 {
			s.Keys("Down")
		}
		scr = fits(t, s.WaitFor(5*time.Second, fmt.Sprintf("(%d of %d)", i, n)))
		sel := selected.FindStringSubmatch(scr)
		if sel == nil {
			t.Fatalf("result %d of %d: the selected row is not on screen:\n%s", i, n, scr)
		}
		seen[sel[1]] = true
	}
	// Down at the end stays on the last result.
	s.Keys("Down")
	time.Sleep(200 * time.Millisecond)
	fits(t, s.WaitFor(5*time.Second, fmt.Sprintf("(%d of %d)", n, n)))
	if len(seen) != n {
		t.Errorf("the cursor reached %d distinct results of %d: %v", len(seen), n, seen)
	}
	for range n {
		s.Keys("Up")
	}
	fits(t, s.WaitFor(10*time.Second, fmt.Sprintf("(1 of %d)", n)))
}
