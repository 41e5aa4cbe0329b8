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

// fitsOK checks a frame: the header on the first line, no line wider than
// 80 cells, the help bar on the last of the 24 lines (a frame taller than
// the window would push one of them off).
func fitsOK(t *testing.T, screen string) bool {
	t.Helper()
	ok := true
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	if len(lines) != 24 || !strings.HasPrefix(lines[0], "ncclwiz") || strings.TrimSpace(lines[23]) == "" {
		t.Errorf("the frame does not fit 80×24 (%d lines):\n%s", len(lines), screen)
		ok = false
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("line %d is %d cells wide:\n%s", i+1, w, screen)
			ok = false
		}
	}
	return ok
}

// fits is fitsOK for a screen a test goes on reading.
func fits(t *testing.T, screen string) string {
	t.Helper()
	fitsOK(t, screen)
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
	findings := []string{"Findings (3/8)", "› ! gpu.processes"}
	guide := []string{"Explain (4/8)", "ncclwiz guides › stale-ranks"}
	logResult := []string{"Explain a failing log", "Root cause:", "g opens the guide watchdog-timeout"}
	// Each step: keys (tmux names), then text typed, then what the screen
	// must show, or (gone) must stop showing.
	steps := []struct {
		keys       []string
		text       string
		want       []string
		gone       string
		timeoutSec int
	}{
		{keys: []string{"Escape"}, want: []string{"this is the start; q quits"}},
		{keys: []string{"Enter"}, want: []string{"Findings (3/8)", "2 problems"}, timeoutSec: 30},
		{keys: []string{"Down"}, want: findings},
		{keys: []string{"g"}, want: []string{"ncclwiz guides › stale-ranks", "## Symptom"}}, // the finding's guide
		{keys: []string{"/"}, text: "rank", want: []string{"/rank"}},
		{keys: []string{"Enter"}, want: []string{"match 1/"}},
		{keys: []string{"Escape"}, gone: "match 1/"}, // closes the search, stays in the guide
		{want: []string{"ncclwiz guides › stale-ranks"}},
		{keys: []string{"Escape"}, want: findings}, // back on the same finding
		{keys: []string{"n"}, want: []string{"Check all nodes", "gpu01,gpu02"}},
		{keys: []string{"Escape"}, want: findings},
		{keys: []string{"Tab"}, want: guide}, // the one guide for what was found
		{keys: []string{"Tab"}, want: []string{"Fix (5/8)"}},
		{keys: []string{"Tab"}, want: []string{"Validate (7/8)"}}, // nothing chosen: no Apply
		{keys: []string{"Tab"}, want: []string{"Summary (8/8)"}},
		{keys: []string{"Escape"}, want: []string{"Validate (7/8)"}},
		{keys: []string{"Escape"}, want: []string{"Fix (5/8)"}},
		{keys: []string{"Escape"}, want: guide},
		{keys: []string{"Escape"}, want: findings},
		{keys: []string{"Escape"}, want: start},
		{keys: []string{"2"}, want: []string{"Explain a failing log", "log file:"}}, // the scenario's log
		{keys: []string{"Enter"}, want: logResult, timeoutSec: 15},
		{keys: []string{"g"}, want: []string{"ncclwiz guides › watchdog-timeout"}},
		{keys: []string{"Escape"}, want: logResult}, // the log result, not Findings
		{keys: []string{"Escape"}, want: start},
		{keys: []string{"4"}, want: []string{"Learn: 7 steps"}},
		{keys: []string{"Enter"}, want: []string{"Learn 1/7"}},
		{keys: []string{"Escape"}, want: []string{"Learn: 7 steps"}},
		{keys: []string{"Escape"}, want: start},
		{keys: []string{"5"}, want: []string{"ncclwiz guides ("}},
		{keys: []string{"/"}, text: "sigbus", want: []string{"Filter: sigbus"}},
		{keys: []string{"Enter"}, want: []string{"“sigbus”", "Bus error"}},
		{keys: []string{"Escape"}, gone: "“sigbus”"}, // clears the filter
		{keys: []string{"Escape"}, want: start},
		{keys: []string{"3"}, want: []string{"My job is hanging"}, timeoutSec: 15}, // a practice server: no live job
		{keys: []string{"Escape"}, want: start},
		// Diagnose again runs the checks again (issue 25 item 2): never the
		// earlier run's "done" screen.
		{keys: []string{"1"}, want: findings, timeoutSec: 30},
		{keys: []string{"Escape"}, want: start},
	}
	for i, st := range steps {
		s.Keys(st.keys...)
		if st.text != "" {
			s.Type(st.text)
		}
		timeout := time.Duration(max(st.timeoutSec, 10)) * time.Second
		var scr string
		if st.gone != "" {
			scr = waitWithout(t, s, timeout, st.gone)
		}
		if len(st.want) > 0 {
			scr = s.WaitFor(timeout, st.want...)
		}
		if !fitsOK(t, scr) {
			t.Fatalf("step %d (%v) left a frame that does not fit", i, st.keys)
		}
	}
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
