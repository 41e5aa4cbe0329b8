package tui

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/keytest"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// longWorld is the layout: 30 orphaned segments in a small /dev/shm,
// so the plan has a cleanup with 30 rm lines and a remount. Every call that
// acts is recorded.
type longWorld struct {
	applied []FixView
	// opens are the open fixes each apply was told about.
	opens    [][]string
	exported []string
	tested   int
	plans    int
	// kept is what the cleanup reports it left alone.
	kept []string
}

func (w *longWorld) deps() Deps {
	segs := checks.Check{ID: "shm.segments", Title: "Shared-memory segments", Run: func(context.Context, *host.Host) ([]checks.Finding, error) {
		return []checks.Finding{{Severity: checks.Warn, Title: "30 orphaned NCCL segments hold 30 MiB in /dev/shm", Guide: "shm-stale-segments",
			Fixes: []string{"shm.cleanup"}, Detail: "Left behind by a crashed job.", Evidence: evidence(30)}}, nil
	}}
	mount := checks.Check{ID: "shm.mount", Title: "/dev/shm", Run: func(context.Context, *host.Host) ([]checks.Finding, error) {
		return []checks.Finding{{Severity: checks.Error, Title: "/dev/shm is full", Guide: "shm-no-space", Fixes: []string{"shm.cleanup", "shm.remount"}}}, nil
	}}
	var rm []string
	for i := range 30 {
		rm = append(rm, fmt.Sprintf("rm -- /dev/shm/nccl-seg%02d   # 1.0 MiB, 2 h old", i))
	}
	return withSideTrips(withGuides(Deps{
		Host:   &host.Host{Kind: "fixture", Name: "practice", Simulated: true, EUID: 1000},
		Checks: []checks.Check{segs, mount},
		PlanFixes: func(context.Context, []checks.Finding) []FixView {
			w.plans++
			return []FixView{
				{ID: "shm.cleanup", Title: "Remove 30 orphaned segments (30 MiB) from /dev/shm", Summary: "Removes 30 files no process holds.",
					Risk: "low", Preview: append([]string{"# yours"}, rm...), Answers: []string{"shm.segments"}, Plan: w.plans},
				{ID: "shm.remount", Title: "Remount /dev/shm with size=11g", Summary: "Remounts /dev/shm bigger.", Risk: "medium", NeedsRoot: true,
					Preview: []string{"mount -o remount,size=11g /dev/shm"}, Answers: []string{"shm.mount"}, Plan: w.plans},
			}
		},
		ApplyFix: func(_ context.Context, f FixView, open []string, progress func(string), _ func(string) bool) FixResult {
			w.opens = append(w.opens, open)
			w.applied = append(w.applied, f)
			progress("applying " + f.ID)
			if f.ID == "shm.cleanup" {
				return FixResult{Summary: "removed 29 segments, 29 MiB freed; 1 left alone", Changed: []string{"removed /dev/shm/nccl-seg00"},
					Skipped: w.kept, Verdict: VerdictPassed}
			}
			return FixResult{Summary: "remounted /dev/shm: 8 MiB → 11 GiB", Verdict: VerdictPassed}
		},
		ExportScript: func(path string, ids []string, _ []checks.Finding, _ bool) error {
			w.exported = append(w.exported, path)
			return nil
		},
		ExplainLog: func(context.Context, string) (LogResult, error) {
			return LogResult{Summary: "Root cause: /dev/shm too small"}, nil
		},
		CanValidate: func(context.Context) (bool, string) { return true, "" },
		Validate: func(context.Context, func(string)) (ValidationResult, error) {
			w.tested++
			return ValidationResult{Pass: true, Verdict: "passed"}, nil
		},
	}))
}

func evidence(n int) map[string]any {
	ev := map[string]any{}
	for i := range n {
		ev[fmt.Sprintf("segment_%02d", i)] = fmt.Sprintf("/dev/shm/nccl-seg%02d", i)
	}
	return ev
}

func press(t testing.TB, m Model, keys ...string) Model {
	t.Helper()
	for _, k := range keys {
		m = drive(t, m, keytest.Press(k))
	}
	return m
}

// confirmReady reports whether the confirm step shows a plan that has been
// on screen in full: the only state in which y may apply.
func confirmReady(m Model) bool {
	return m.stage == flow.Fix && m.fix.confirming && m.fix.plan.unseen() == 0
}

// The wizard in each of its states, reached the way a user reaches it.
var wizardStates = []struct {
	name  string
	keys  []string
	stage flow.Stage
}{
	{"start", nil, flow.Start},
	{"findings", []string{"enter"}, flow.Findings},
	{"explain", []string{"enter", "tab"}, flow.Explain},
	{"fix", []string{"enter", "tab", "tab"}, flow.Fix},
	{"fix, cleanup chosen", []string{"enter", "tab", "tab", "space"}, flow.Fix},
	{"fix, both chosen", []string{"enter", "tab", "tab", "space", "down", "space"}, flow.Fix},
	{"confirm, not read", []string{"enter", "tab", "tab", "space", "down", "space", "enter"}, flow.Fix},
	{"confirm, read to the end", []string{"enter", "tab", "tab", "space", "down", "space", "enter", "end"}, flow.Fix},
	{"apply, done", []string{"enter", "tab", "tab", "space", "enter", "end", "y"}, flow.Apply},
	{"fix, after applying", []string{"enter", "tab", "tab", "space", "enter", "end", "y", "shift+tab"}, flow.Fix},
	{"validate", []string{"enter", "tab", "tab", "tab"}, flow.Validate},
	{"summary", []string{"enter", "tab", "tab", "tab", "tab"}, flow.Summary},
	{"summary, after applying", []string{"enter", "tab", "tab", "space", "enter", "end", "y", "enter", "enter"}, flow.Summary},
	{"summary, export prompt", []string{"enter", "tab", "tab", "tab", "tab", "e"}, flow.Summary},
	// esc walks back Summary → Validate → Fix → Explain (its list) →
	// Findings → Start; Diagnose again runs the checks afresh.
	{"findings, second round", []string{"enter", "tab", "tab", "tab", "tab", "esc", "esc", "esc", "esc", "esc", "enter"}, flow.Findings},
	{"log", []string{"2"}, flow.Log},
	{"learn", []string{"4"}, flow.Learn},
	{"guides", []string{"5"}, flow.Guides},
	{"hang, verdict", []string{"3"}, flow.Hang},
	{"hang, verdict scrolled", []string{"3", "end"}, flow.Hang},
	{"hang, guide", []string{"3", "g"}, flow.Explain},
	{"nodes, list", []string{"enter", "n"}, flow.Nodes},
	{"nodes, table", []string{"enter", "n", "enter"}, flow.Nodes},
	{"nodes, table scrolled", []string{"enter", "n", "enter", "end"}, flow.Nodes},
}

// Every key on every screen: only y on a confirm step whose plan has been
// displayed in full applies anything, and then exactly the fixes shown,
// from the plan shown. No single key exports or runs the collective test
// except e+enter and r where they are offered.
func TestNoKeyButConfirmedYApplies(t *testing.T) {
	keys := slices.DeleteFunc(keytest.All(), func(k string) bool { return k == "ctrl+c" })
	for _, st := range wizardStates {
		t.Run(st.name, func(t *testing.T) {
			for _, k := range keys {
				w := &longWorld{}
				m := press(t, newTestModel(t, w.deps()), st.keys...)
				if m.Stage() != st.stage {
					t.Fatalf("reached %s, not %s", m.Stage(), st.stage)
				}
				before := len(w.applied)
				ready := confirmReady(m)
				shown := m.fix.shown
				m = press(t, m, k)
				got := w.applied[before:]
				switch {
				case ready && k == "y":
					if len(got) != len(shown) {
						t.Fatalf("y on a read plan applied %d fixes, want %d", len(got), len(shown))
					}
					for i := range got {
						if got[i].ID != shown[i].ID || got[i].Plan != shown[i].Plan {
							t.Errorf("applied %s of plan %d, the screen showed %s of plan %d", got[i].ID, got[i].Plan, shown[i].ID, shown[i].Plan)
						}
					}
					if m.Stage() != flow.Apply {
						t.Errorf("after y: stage %s", m.Stage())
					}
				case len(got) > 0:
					t.Fatalf("key %q applied %v", k, got)
				}
				if len(w.exported) > 0 && (st.name != "summary, export prompt" || k != "enter") {
					t.Errorf("key %q exported a script", k)
				}
				if w.tested > 0 && (st.name != "validate" || k != "r") {
					t.Errorf("key %q ran the collective test", k)
				}
				if m.Stage() == flow.Apply && len(m.apply.results) == 0 {
					t.Errorf("key %q reached Apply with nothing applied", k)
				}
			}
		})
	}
}

// While the confirmed fixes run, no key starts another run or leaves the
// Apply screen by Tab.
func TestKeysWhileApplying(t *testing.T) {
	keys := slices.DeleteFunc(keytest.All(), func(k string) bool { return k == "ctrl+c" })
	for _, k := range keys {
		w := &longWorld{}
		d := w.deps()
		called := make(chan struct{}, 1)
		apply := d.ApplyFix
		d.ApplyFix = func(ctx context.Context, f FixView, open []string, progress func(string), _ func(string) bool) FixResult {
			defer func() { called <- struct{}{} }()
			return apply(ctx, f, open, progress, nil)
		}
		m := press(t, newTestModel(t, d), "enter", "tab", "tab", "space", "enter", "end")
		// y, without running the command that reads the run's progress: the
		// run stays in flight for the model.
		nm, cmd := m.Update(keytest.Press("y"))
		nm, _ = nm.Update(cmd())
		m = nm.(Model)
		if !m.apply.running || m.Stage() != flow.Apply {
			t.Fatalf("not applying: stage %s", m.Stage())
		}
		<-called
		m = press(t, m, k)
		if len(w.applied) != 1 {
			t.Fatalf("key %q during the run: applied %d fixes, want the 1 confirmed", k, len(w.applied))
		}
		if (k == "tab" || k == "shift+tab") && m.Stage() != flow.Apply {
			t.Errorf("%s left Apply while applying: %s", k, m.Stage())
		}
	}
}

// Random walks over every key, each starting from one of the wizard's
// states: an apply happens only on y with the whole plan displayed.
func TestRandomKeysNeverApplyWithoutConsent(t *testing.T) {
	keys := slices.DeleteFunc(keytest.All(), func(k string) bool { return k == "ctrl+c" || k == "q" })
	// Half the presses are the keys that move through the wizard, so the
	// walks keep reaching the confirm step; the other half are any key.
	nav := []string{"enter", "tab", "shift+tab", "space", "down", "y", "y", "end", "pgdown", "e", "esc"}
	r := rand.New(rand.NewPCG(13, 1))
	applies, refused := 0, 0
	for walk := range 300 {
		st := wizardStates[r.IntN(len(wizardStates))]
		w := &longWorld{}
		m := press(t, newTestModel(t, w.deps()), st.keys...)
		var trail []string
		for range 25 {
			k := keys[r.IntN(len(keys))]
			if r.IntN(2) == 0 {
				k = nav[r.IntN(len(nav))]
			}
			trail = append(trail, k)
			ready := confirmReady(m)
			if k == "y" && m.stage == flow.Fix && m.fix.confirming && !ready {
				refused++
			}
			before := len(w.applied)
			m = drive(t, m, keytest.Press(k))
			if len(w.applied) > before {
				applies++
				if !ready || k != "y" {
					t.Fatalf("walk %d from %s, keys %q: the last applied %v", walk, st.name, trail, w.applied[before:])
				}
			}
		}
	}
	t.Logf("%d confirmed applies, %d refused y", applies, refused)
	if applies == 0 || refused == 0 {
		t.Errorf("the walks never applied (%d) or never had y refused (%d): they prove little", applies, refused)
	}
}

// The sequence: Enter, Tab, Tab, Space, Tab — and Tab from the
// confirm screen — must not apply anything or open Apply.
func TestTabDoesNotApply(t *testing.T) {
	w := &longWorld{}
	m := press(t, newTestModel(t, w.deps()), "enter", "tab", "tab", "space", "tab")
	if len(w.applied) > 0 || m.Stage() == flow.Apply {
		t.Fatalf("tab from Fix: stage %s, applied %v", m.Stage(), w.applied)
	}
	m = press(t, m, "shift+tab", "enter")
	if !strings.Contains(view(m), "Apply 1 fix?") {
		t.Fatalf("confirm:\n%s", view(m))
	}
	m = press(t, m, "tab")
	if len(w.applied) > 0 || m.Stage() != flow.Validate {
		t.Fatalf("tab from confirm: stage %s, applied %v", m.Stage(), w.applied)
	}
	m = press(t, m, "shift+tab")
	if m.Stage() != flow.Fix || m.fix.confirming {
		t.Errorf("back to Fix: stage %s, still confirming %v", m.Stage(), m.fix.confirming)
	}
}

// At 80x24 the expanded plan is longer than the screen: the prompt stays
// visible, y is refused with the number of lines not yet shown, and after
// scrolling to the end y applies and Apply lists what was kept.
func TestConfirmNeedsWholePlanShown(t *testing.T) {
	w := &longWorld{kept: []string{"nccl-seg07: now in use by pid 4242 (python)"}}
	m := press(t, newTestModel(t, w.deps()), "enter", "tab", "tab", "space", "down", "space", "enter")
	v := view(m)
	// Every line is listed from the start (22.8: no count to say y to).
	for _, want := range []string{"Apply 2 fixes?", "Remove 30 orphaned segments", "risk: low", "nccl-seg00", "y apply all 2", "lines not yet shown"} {
		if !strings.Contains(v, want) {
			t.Errorf("plan lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "commands") || strings.Contains(v, "Remount /dev/shm") {
		t.Fatalf("plan at 80x24 (prompt must show, remount below):\n%s", v)
	}
	m = press(t, m, "y")
	if len(w.applied) > 0 {
		t.Fatal("y applied a plan that was not all shown")
	}
	if !strings.Contains(m.status, "scroll to the end of the plan first (") || !strings.Contains(view(m), "lines not yet shown") {
		t.Errorf("status %q\n%s", m.status, view(m))
	}
	m = press(t, m, "pgdown")
	if len(w.applied) > 0 || m.fix.plan.unseen() == 0 {
		t.Fatalf("one page should not reach the end of a 30-line list (unseen %d)", m.fix.plan.unseen())
	}
	m = press(t, m, "end")
	if v := view(m); !strings.Contains(v, "Remount /dev/shm with size=11g") || !strings.Contains(v, "risk: medium (needs root)") {
		t.Fatalf("end of plan:\n%s", v)
	}
	// A resize changes what is on screen: the plan must be read again.
	m = drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 20})
	if m.fix.plan.unseen() == 0 {
		t.Error("a resize kept the plan marked as read")
	}
	m = press(t, m, "G", "y")
	if len(w.applied) != 2 || m.Stage() != flow.Apply {
		t.Fatalf("applied %v, stage %s", w.applied, m.Stage())
	}
	v = view(m)
	for _, want := range []string{"Applied: what happened", "removed 29 segments", "left alone (1):", "nccl-seg07: now in use by pid 4242"} {
		if !strings.Contains(v, want) {
			t.Errorf("apply view lacks %q:\n%s", want, v)
		}
	}
}

// Findings' evidence and the Fix preview scroll to their last line.
func TestEvidenceAndPreviewScroll(t *testing.T) {
	w := &longWorld{}
	m := press(t, newTestModel(t, w.deps()), "enter", "down")
	if strings.Contains(view(m), "segment 29") {
		t.Fatalf("all evidence fits? test needs a longer list:\n%s", view(m))
	}
	m = press(t, m, "end")
	if v := view(m); !strings.Contains(v, "segment 29: /dev/shm/nccl-seg29") || !strings.Contains(v, "fixes: shm.cleanup") {
		t.Errorf("end of the evidence:\n%s", v)
	}
	m = press(t, m, "tab", "tab")
	if strings.Contains(view(m), "nccl-seg29") {
		t.Fatalf("whole preview fits? test needs a longer list:\n%s", view(m))
	}
	m = press(t, m, "pgdown", "pgdown", "end")
	if v := view(m); !strings.Contains(v, "nccl-seg29") {
		t.Errorf("end of the preview:\n%s", v)
	}
}

// With nothing applied, no screen claims a fix was verified.
func TestNoClaimsWithoutApplying(t *testing.T) {
	w := &longWorld{}
	d := w.deps()
	d.CanValidate = func(context.Context) (bool, string) { return false, "no NVIDIA GPU found" }
	m := press(t, newTestModel(t, d), "enter", "tab", "tab", "tab")
	if v := view(m); strings.Contains(v, "were verified") || !strings.Contains(v, "No fix was applied") {
		t.Errorf("validate:\n%s", v)
	}
	m = press(t, m, "enter")
	if v := view(m); strings.Contains(v, "by re-running the checks") || !strings.Contains(v, "no fix was applied") {
		t.Errorf("summary:\n%s", v)
	}
}

func TestRecheckedSentence(t *testing.T) {
	passed := func(id string) FixResult { return FixResult{ID: id, Verdict: VerdictPassed} }
	for _, c := range []struct {
		rs   []FixResult
		want string
	}{
		{nil, "No fix was applied"},
		{[]FixResult{passed("shm.cleanup")}, "The fix applied (shm.cleanup) was checked"},
		{[]FixResult{passed("shm.cleanup"), passed("shm.remount")}, "The fixes applied (shm.cleanup, shm.remount) were checked"},
		// Issue 25 item 4: advice is never "checked".
		{[]FixResult{{ID: "container.shm", Verdict: VerdictUnproven}}, "container.shm was done, but no check here can prove it"},
	} {
		if got := recheckedSentence(c.rs); !strings.HasPrefix(got, c.want) {
			t.Errorf("%v: %q", c.rs, got)
		}
	}
}

// Every state fits the terminal exactly, at 80x24 and smaller.
func TestEveryStateFits(t *testing.T) {
	for _, st := range wizardStates {
		for _, size := range [][2]int{{80, 24}, {60, 15}} {
			w := &longWorld{kept: []string{"nccl-seg07: now in use by pid 4242 (python)"}}
			m := press(t, newTestModel(t, w.deps()), st.keys...)
			m = drive(t, m, tea.WindowSizeMsg{Width: size[0], Height: size[1]})
			lines := strings.Split(view(m), "\n")
			if len(lines) != size[1] {
				t.Errorf("%s at %dx%d: %d lines", st.name, size[0], size[1], len(lines))
			}
			for i, l := range lines {
				if n := ansi.StringWidth(l); n > size[0] {
					t.Errorf("%s at %dx%d: line %d is %d cells: %q", st.name, size[0], size[1], i, n, l)
				}
			}
		}
	}
}

// Random walks in which every plan arrives late, at a random later key:
// y applies only on a read confirm step, and exactly the views that step
// showed, from the plan it showed, however many plans landed meanwhile.
func TestRandomKeysWithLatePlans(t *testing.T) {
	nav := []string{"enter", "enter", "tab", "shift+tab", "space", "down", "y", "y", "end", "e", "esc", "n"}
	r := rand.New(rand.NewPCG(13, 2))
	applies, late, afterLate := 0, 0, 0
	for walk := range 200 {
		lateOpen := false // a plan landed on the confirm step still open
		st := wizardStates[r.IntN(len(wizardStates))]
		w := &longWorld{}
		m := press(t, newTestModel(t, w.deps()), st.keys...)
		var held []tea.Msg
		trail := []string{st.name + ":"}
		for range 30 {
			checksEvery := 6
			if m.fix.confirming {
				checksEvery = 3 // the case under test: a run lands behind the confirm step
			}
			if r.IntN(checksEvery) == 0 {
				// A check run finishes behind whatever is on screen; its
				// plan is held back.
				rs := checks.Run(context.Background(), m.c.deps.Host, m.c.deps.Checks, checks.Options{})
				var more []tea.Msg
				m, more = driveHolding(t, m, recheckDoneMsg{results: rs}, isPlan)
				held = append(held, more...)
				trail = append(trail, "<checks>")
				continue
			}
			if len(held) > 0 && r.IntN(3) == 0 {
				if m.fix.confirming {
					late++
					lateOpen = true
				}
				var more []tea.Msg
				m, more = deliver(t, m, held[0])
				held = append(held[1:], more...)
				trail = append(trail, "<plan>")
				continue
			}
			k := nav[r.IntN(len(nav))]
			if m.fix.confirming && r.IntN(2) == 0 {
				// On the confirm step, read the plan and say y more often.
				k = map[bool]string{false: "end", true: "y"}[confirmReady(m)]
			}
			trail = append(trail, k)
			ready, shown := confirmReady(m), slices.Clone(m.fix.shown)
			before := len(w.applied)
			var more []tea.Msg
			m, more = driveHolding(t, m, keytest.Press(k), isPlan)
			held = append(held, more...)
			got := w.applied[before:]
			if len(got) == 0 {
				if !m.fix.confirming {
					lateOpen = false
				}
				continue
			}
			applies++
			if lateOpen {
				afterLate++
			}
			lateOpen = false
			if !ready || k != "y" || len(got) != len(shown) {
				t.Fatalf("walk %d, keys %q: applied %v (ready %v, shown %v)", walk, trail, got, ready, shown)
			}
			for i := range got {
				if got[i].ID != shown[i].ID || got[i].Plan != shown[i].Plan {
					t.Fatalf("walk %d, keys %q: applied %s of plan %d, the screen showed %s of plan %d", walk, trail, got[i].ID, got[i].Plan, shown[i].ID, shown[i].Plan)
				}
			}
		}
	}
	t.Logf("%d confirmed applies, %d plans landed on an open confirm step, %d applies from such a step", applies, late, afterLate)
	if applies == 0 || afterLate == 0 {
		t.Errorf("the walks never applied (%d) or never applied after a plan landed on the confirm step (%d): they prove little", applies, afterLate)
	}
}
