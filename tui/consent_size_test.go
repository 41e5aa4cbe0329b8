package tui

import (
	"context"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// Consent needs the lines on screen, whole, at every window size: the
// confirm step's pager counted a line as read when it was cut by the
// window (80x4: no line of the plan on screen; 12 columns: every line
// ending in "…"; the full help laid over its bottom) and y applied; the
// SIGKILL question at 34x9 showed "pid 4 (/usr/bin/python3" and y
// killed the rank.
func TestConsentNeedsLinesWholeOnScreen(t *testing.T) {
	for _, size := range [][2]int{{80, 4}, {80, 5}, {80, 6}, {12, 40}, {16, 40}} {
		w := &longWorld{}
		m := press(t, newTestModel(t, w.deps()), "enter", "tab", "tab", "space", "enter")
		m = drive(t, m, tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		for range 80 {
			m = press(t, m, "pgdown")
		}
		m = press(t, m, "end", "y")
		if len(w.applied) > 0 {
			t.Errorf("%dx%d: y applied a plan never on screen whole:\n%s", size[0], size[1], view(m))
		}
		if !strings.Contains(m.status, "too small") {
			t.Errorf("%dx%d: y refused without saying why: %q", size[0], size[1], m.status)
		}
		// Made large enough, the plan is read again and y applies.
		m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
		m = press(t, m, "end", "y")
		if len(w.applied) != 1 {
			t.Errorf("%dx%d then 80x24: applied %d", size[0], size[1], len(w.applied))
		}
	}
	// The smallest window that shows a line of the plan and the prompt.
	w := &longWorld{}
	m := press(t, newTestModel(t, w.deps()), "enter", "tab", "tab", "space", "enter")
	m = drive(t, m, tea.WindowSizeMsg{Width: 60, Height: 7})
	for m.fix.plan.unseen() > 0 {
		m = press(t, m, "pgdown")
	}
	if m = press(t, m, "y"); len(w.applied) != 1 {
		t.Errorf("60x7, every line paged through: applied %d\n%s", len(w.applied), view(m))
	}
	// The full help never covers a plan being consented to.
	w = &longWorld{}
	m = press(t, newTestModel(t, w.deps()), "enter", "tab", "tab", "space", "down", "space", "enter", "?", "end")
	if v := view(m); !strings.Contains(v, "Remount /dev/shm with size=11g") || !strings.Contains(v, "y apply all 2") {
		t.Errorf("the plan's end is covered:\n%s", v)
	}
}

func TestSIGKILLQuestionNeedsWholeView(t *testing.T) {
	const q = "pid 4 (/usr/bin/python3 /tmp/story/job.py rank /tmp/shm /tmp/story/rank.ready) ignored SIGTERM for 10s. Send SIGKILL (it cannot clean up)?"
	for _, size := range [][2]int{{34, 9}, {80, 5}, {16, 30}} {
		w := &longWorld{}
		d := w.deps()
		var got []bool
		d.ApplyFix = func(_ context.Context, f FixView, _ []string, _ func(string), ask func(string) bool) FixResult {
			got = append(got, ask(q))
			return FixResult{ID: f.ID, Summary: "ended 1 of 1 leftover rank", Verdict: VerdictPassed}
		}
		m := press(t, newTestModel(t, d), "enter", "tab", "tab", "space", "enter", "end", "y")
		if m.Stage() != flow.Apply || m.apply.asking == nil {
			t.Fatalf("not asking: stage %s", m.Stage())
		}
		m = drive(t, m, tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		m = press(t, m, "y")
		if len(got) > 0 {
			t.Errorf("%dx%d: y answered a question not on screen whole:\n%s", size[0], size[1], view(m))
		}
		if !strings.Contains(m.status, "too small") {
			t.Errorf("%dx%d: y refused without saying why: %q", size[0], size[1], m.status)
		}
		m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
		v := view(m)
		var joined strings.Builder
		for _, l := range strings.Split(v, "\n") {
			joined.WriteString(strings.TrimSpace(l) + " ")
			if ansi.StringWidth(l) > 80 {
				t.Errorf("line wider than 80: %q", l)
			}
		}
		if !strings.Contains(joined.String(), q) {
			t.Fatalf("80x24: the question is not whole:\n%s", v)
		}
		if m = press(t, m, "y"); len(got) != 1 || !got[0] {
			t.Errorf("%dx%d then 80x24: answers %v", size[0], size[1], got)
		}
		_ = m
	}
}
