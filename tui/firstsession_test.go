package tui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/keytest"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// Issue 22 item 18: no window size panics any screen, 1x1 included.
func TestTinyWindowsNeverPanic(t *testing.T) {
	for _, st := range wizardStates {
		for _, size := range [][2]int{{1, 1}, {2, 1}, {1, 3}, {5, 2}, {12, 4}} {
			w := &longWorld{}
			m := press(t, newTestModel(t, w.deps()), st.keys...)
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s at %dx%d: panic %v", st.name, size[0], size[1], r)
					}
				}()
				m = drive(t, m, tea.WindowSizeMsg{Width: size[0], Height: size[1]})
				if n := len(strings.Split(view(m), "\n")); n != size[1] {
					t.Errorf("%s at %dx%d: %d lines", st.name, size[0], size[1], n)
				}
				m = press(t, m, "down", "end")
				_ = view(m)
			}()
		}
	}
}

// Issue 22 item 7: a paste whose text holds the end marker (\e[201~y)
// arrives as paste start, paste, paste end, the key y, then a stray end:
// at a read confirm step the y is pasted text, not consent. Keys stay
// ignored while they stream in right after a paste; a key half a second
// after the last one is a key again.
func TestPastedEndMarkerIsNeverAKey(t *testing.T) {
	w := &longWorld{}
	m := press(t, newTestModel(t, w.deps()), "enter", "tab", "tab", "space", "enter", "end")
	if !confirmReady(m) {
		t.Fatalf("not a read confirm step:\n%s", view(m))
	}
	now := time.Unix(1_900_000_000, 0)
	m.c.now = func() time.Time { return now }
	for _, msg := range []tea.Msg{tea.PasteStartMsg{}, tea.PasteMsg{}, tea.PasteEndMsg{}, keytest.Press("y"), tea.PasteMsg{}, tea.PasteEndMsg{}} {
		m = drive(t, m, msg)
		now = now.Add(time.Millisecond)
	}
	// The rest of a long paste keeps coming as keys: still not keys.
	for range 20 {
		now = now.Add(250 * time.Millisecond)
		m = press(t, m, "y")
	}
	if len(w.applied) > 0 || m.Stage() != flow.Fix {
		t.Fatalf("a pasted y applied %v (stage %s)", w.applied, m.Stage())
	}
	if !strings.Contains(view(m), "ignored keys that arrived with a paste") {
		t.Errorf("the screen does not say the keys were ignored:\n%s", view(m))
	}
	now = now.Add(time.Second)
	m = press(t, m, "y")
	if len(w.applied) != 1 {
		t.Fatalf("a typed y a second after the paste applied %v", w.applied)
	}
}

// Issue 25 item 1: a fix that asks before going beyond the plan (SIGKILL
// of a rank that ignored SIGTERM) asks on the Apply screen, the question
// whole at 80 and 60 columns, and gets the user's answer.
func TestApplyAsksForSIGKILL(t *testing.T) {
	const q = "pid 257 (python3 /home/ada/train.py --config configs/a-rather-long-config-name.yaml (rank 0)) ignored SIGTERM for 10s. Send SIGKILL (it cannot clean up)?"
	for _, c := range []struct {
		answer string
		want   bool
		width  int
	}{{"y", true, 80}, {"n", false, 60}, {"esc", false, 80}} {
		w := &longWorld{}
		d := w.deps()
		var got []bool
		d.ApplyFix = func(_ context.Context, f FixView, _ []string, _ func(string), ask func(string) bool) FixResult {
			got = append(got, ask(q))
			return FixResult{ID: f.ID, Summary: "ended 1 of 1 leftover rank", Verdict: VerdictPassed}
		}
		m := press(t, newTestModel(t, d), "enter", "tab", "tab", "space", "enter", "end", "y")
		m = drive(t, m, tea.WindowSizeMsg{Width: c.width, Height: 24})
		v := view(m)
		var joined strings.Builder
		for _, l := range strings.Split(v, "\n") {
			joined.WriteString(strings.TrimSpace(l) + " ")
		}
		if m.Stage() != flow.Apply || !strings.Contains(joined.String(), q) || !strings.Contains(v, "y yes") {
			t.Fatalf("%s at %d columns: the question is not on the Apply screen whole:\n%s", c.answer, c.width, v)
		}
		for _, l := range strings.Split(v, "\n") {
			if ansi.StringWidth(l) > c.width {
				t.Errorf("line wider than %d: %q", c.width, l)
			}
		}
		m = press(t, m, "tab") // tab while asking goes nowhere
		if m.Stage() != flow.Apply || m.apply.asking == nil {
			t.Fatalf("tab left the question (stage %s)", m.Stage())
		}
		m = press(t, m, c.answer)
		if len(got) != 1 || got[0] != c.want {
			t.Fatalf("answer %q reached the fix as %v", c.answer, got)
		}
		if m.apply.asking != nil || strings.Contains(view(m), "Send SIGKILL") {
			t.Errorf("the question stayed after the answer:\n%s", view(m))
		}
	}
}

// countingWorld changes between check runs: each run sees one more orphan.
type countingWorld struct{ runs int }

func (w *countingWorld) deps() Deps {
	segs := checks.Check{ID: "shm.segments", Title: "Shared-memory segments", Run: func(context.Context, *host.Host) ([]checks.Finding, error) {
		w.runs++
		return []checks.Finding{{Severity: checks.Warn, Title: strings.Repeat("I", w.runs) + " orphaned NCCL segments", Fixes: []string{"shm.cleanup"}}}, nil
	}}
	return withGuides(Deps{
		Host:   &host.Host{Kind: "fixture", Name: "practice", Simulated: true, EUID: 1000},
		Checks: []checks.Check{segs},
		PlanFixes: func(context.Context, []checks.Finding) []FixView {
			return []FixView{{ID: "shm.cleanup", Title: "Remove orphaned segments", Risk: "low", Preview: []string{"rm -- /dev/shm/nccl-a"}}}
		},
		ApplyFix: func(_ context.Context, f FixView, _ []string, _ func(string), _ func(string) bool) FixResult {
			return FixResult{ID: f.ID, Summary: "removed", Verdict: VerdictPassed}
		},
	})
}

// Issue 25 item 2: Diagnose from Start runs the checks again (a new round:
// no Apply of the previous one), and r re-checks where results are shown,
// coming back to the same screen with the machine as it is now.
func TestDiagnoseAgainAndRecheck(t *testing.T) {
	w := &countingWorld{}
	m := press(t, newTestModel(t, w.deps()), "enter")
	if !strings.Contains(view(m), "I orphaned") {
		t.Fatalf("first run:\n%s", view(m))
	}
	m = press(t, m, "tab", "space", "enter", "y")
	if m.Stage() != flow.Apply || !m.state.Applied {
		t.Fatalf("not applied: %s", m.Stage())
	}
	m = press(t, m, "esc", "esc", "esc", "esc")
	if m.Stage() != flow.Start {
		t.Fatalf("esc did not reach Start: %s", m.Stage())
	}
	m = press(t, m, "enter")
	if m.Stage() != flow.Findings || !strings.Contains(view(m), "II orphaned") {
		t.Fatalf("Diagnose again shows the old results:\n%s", view(m))
	}
	if m.state.Applied || len(m.apply.results) > 0 {
		t.Errorf("a new round kept the previous round's Apply")
	}
	if got := m.state.Next(flow.Fix); got == flow.Apply {
		t.Errorf("tab from Fix leads to the old Apply")
	}
	// r on a finished Detect screen runs once and moves on to Findings.
	m = drive(t, m, gotoMsg{flow.Findings})
	m.stage = flow.Detect
	before := w.runs
	m = press(t, m, "r")
	if w.runs != before+1 || m.Stage() != flow.Findings {
		t.Errorf("r on Detect: %d runs, now on %s", w.runs-before, m.Stage())
	}
	for _, st := range []flow.Stage{flow.Findings, flow.Fix, flow.Summary} {
		m = drive(t, m, gotoMsg{st})
		before := w.runs
		m = press(t, m, "r")
		if w.runs != before+1 || m.Stage() != st {
			t.Errorf("r on %s: %d new runs, back on %s", st, w.runs-before, m.Stage())
		}
		if !strings.Contains(view(m), "r re-check") {
			t.Errorf("%s's help bar does not offer r:\n%s", st, view(m))
		}
	}
}

// Issue 25 items 13 and 14: a healthy result offers the next steps; enter
// on a Fix list with nothing ticked says so instead of moving on; the
// "scroll to the end" hint goes once the end is reached; q in an open
// guide goes back, as in `ncclwiz guides`.
func TestHealthyNextStepsAndKeys(t *testing.T) {
	healthy := withSideTrips(withGuides(Deps{
		Host: &host.Host{Kind: "fixture", Name: "practice", Simulated: true, EUID: 1000},
		Checks: []checks.Check{{ID: "shm.segments", Title: "Shared-memory segments", Run: func(context.Context, *host.Host) ([]checks.Finding, error) {
			return []checks.Finding{{Severity: checks.OK, Title: "no orphaned segments"}}, nil
		}}},
		ExplainLog: func(context.Context, string) (LogResult, error) { return LogResult{}, nil },
	}))
	m := press(t, newTestModel(t, healthy), "enter")
	v := view(m)
	for _, want := range []string{"No problems found", "explain the job's log", "my job is hanging", "check the other nodes", "check this machine again"} {
		if !strings.Contains(v, want) {
			t.Errorf("healthy findings lack %q:\n%s", want, v)
		}
	}
	if m = press(t, m, "l"); m.Stage() != flow.Log {
		t.Errorf("l: %s", m.Stage())
	}

	w := &longWorld{}
	m = press(t, newTestModel(t, w.deps()), "enter", "tab", "tab", "enter")
	if m.Stage() != flow.Fix || !strings.Contains(view(m), "no fix is chosen") {
		t.Errorf("enter with nothing ticked:\n%s", view(m))
	}
	m = press(t, m, "space", "enter", "y")
	if !strings.Contains(view(m), "scroll to the end of the plan first") {
		t.Fatalf("no hint:\n%s", view(m))
	}
	m = press(t, m, "end")
	if strings.Contains(view(m), "scroll to the end of the plan first") {
		t.Errorf("the hint stayed after the end was reached:\n%s", view(m))
	}

	m = press(t, newTestModel(t, (&fakeWorld{}).deps()), "enter", "g")
	if m.Stage() != flow.Explain || !m.guides.Viewing() {
		t.Fatalf("g did not open the guide: %s", m.Stage())
	}
	if _, cmd := m.Update(keytest.Press("q")); quits(cmd) {
		t.Fatal("q in an open guide quits the wizard")
	}
	m = press(t, m, "q")
	if m.Stage() == flow.Explain && m.guides.Viewing() {
		t.Errorf("q did not close the guide")
	}
}

// quits reports whether cmd, run, quits the program.
func quits(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	switch x := cmd().(type) {
	case tea.QuitMsg:
		return true
	case tea.BatchMsg:
		for _, c := range x {
			if quits(c) {
				return true
			}
		}
	}
	return false
}

// Issue 25 item 11: the Check-all-nodes screen says its keys once (the
// help bar), and a table row wider than the window ends in "…" instead of
// being cut mid-word.
func TestNodesScreenTextNotCut(t *testing.T) {
	w := &nodesWorld{}
	d := w.deps("Slurm node list gpu[01-03]", "gpu[01-03]")
	d.ClusterCheck = func(context.Context, string, func(string)) (ClusterReport, error) {
		return ClusterReport{}, errors.New("gpu02: ssh: connect to host gpu02 port 22: Connection refused")
	}
	m := press(t, newTestModel(t, d), "enter", "n", "enter")
	v := view(m)
	if !strings.Contains(v, "Connection refused") || strings.Count(v, "other nodes") != 1 {
		t.Errorf("nodes error screen (keys said once):\n%s", v)
	}
	p := newPager()
	p.set("node   fact                    value\n"+strings.Repeat("gpu01  NCCL_SOCKET_IFNAME      eth0 ", 4), 40, 5)
	for _, l := range strings.Split(p.view(), "\n") {
		if ansi.StringWidth(l) > 40 || (ansi.StringWidth(l) == 40 && !strings.HasSuffix(l, "…")) {
			t.Errorf("a wide row is cut without …: %q", l)
		}
	}

}
