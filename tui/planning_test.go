package tui

import (
	"bytes"
	"context"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/keytest"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// goid is the calling goroutine's number (from its stack header).
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	f := bytes.Fields(b)
	if len(f) < 2 {
		return ""
	}
	return string(f[1])
}

// asyncProgram runs the model like bubbletea does: Update on one goroutine
// (the test's), every command on a goroutine of its own, their messages
// back through a channel.
type asyncProgram struct {
	t    *testing.T
	m    Model
	msgs chan tea.Msg
}

func (p *asyncProgram) start(cmd tea.Cmd) {
	if cmd == nil || slices.Contains(timers, reflect.ValueOf(cmd).Pointer()) {
		return
	}
	go func() {
		msg := cmd()
		if b, ok := msg.(tea.BatchMsg); ok {
			for _, c := range b {
				p.start(c)
			}
			return
		}
		for _, out := range run(func() tea.Msg { return msg }) {
			p.msgs <- out
		}
	}()
}

func (p *asyncProgram) send(msg tea.Msg) {
	nm, cmd := p.m.Update(msg)
	p.m = nm.(Model)
	p.start(cmd)
}

// until handles messages until ok holds. The deadline only stops a hang;
// nothing is measured.
func (p *asyncProgram) until(what string, ok func(Model) bool) {
	p.t.Helper()
	deadline := time.After(30 * time.Second)
	for !ok(p.m) {
		select {
		case msg := <-p.msgs:
			p.send(msg)
		case <-deadline:
			p.t.Fatalf("never reached: %s\n%s", what, view(p.m))
		}
	}
}

// Planning reads the machine for a second or more (proc.stale's CPU
// sample): Update must never call PlanFixes. Here planning blocks until the
// test lets it finish; meanwhile the Fix step shows that it is planning and
// every key is handled at once, none applies anything, and the plan then
// appears.
func TestPlanningNeverBlocksUpdate(t *testing.T) {
	w := &longWorld{}
	d := w.deps()
	plan := d.PlanFixes
	release := make(chan struct{})
	var mu sync.Mutex
	var callers []string
	called := make(chan struct{}, 8)
	test := goid()
	d.PlanFixes = func(ctx context.Context, fs []checks.Finding) []FixView {
		mu.Lock()
		callers = append(callers, goid())
		mu.Unlock()
		called <- struct{}{}
		if goid() != test { // on the UI goroutine it must not block: fail instead
			<-release
		}
		return plan(ctx, fs)
	}
	p := &asyncProgram{t: t, m: New(context.Background(), d, Options{ASCII: true}), msgs: make(chan tea.Msg, 64)}
	p.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	p.send(keytest.Press("enter"))
	p.until("findings", func(m Model) bool { return m.Stage() == flow.Findings })
	<-called // planning has started, and blocks
	p.send(keytest.Press("tab"))
	p.until("explain", func(m Model) bool { return m.Stage() == flow.Explain })
	p.send(keytest.Press("tab"))
	p.until("fix", func(m Model) bool { return m.Stage() == flow.Fix })
	if p.m.Stage() != flow.Fix || !strings.Contains(view(p.m), "Planning fixes for what was found") {
		t.Fatalf("Fix while planning: stage %s\n%s", p.m.Stage(), view(p.m))
	}
	for _, k := range []string{"space", "down", "space", "enter", "y", "x", "e", "end", "y"} {
		p.send(keytest.Press(k))
	}
	if len(w.applied) > 0 || p.m.Stage() != flow.Fix || p.m.fix.confirming {
		t.Fatalf("keys while planning: stage %s, confirming %v, applied %v", p.m.Stage(), p.m.fix.confirming, w.applied)
	}
	close(release)
	p.until("the plan", func(m Model) bool { return !m.fix.planning })
	if v := view(p.m); !strings.Contains(v, "Remove 30 orphaned segments") || strings.Contains(v, "Planning fixes") {
		t.Errorf("after planning:\n%s", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(callers) == 0 {
		t.Fatal("PlanFixes never called")
	}
	for _, c := range callers {
		if c == test {
			t.Errorf("PlanFixes ran on the UI goroutine (%s): Update blocked while it planned", c)
		}
	}
}

// driveHolding is drive that holds back the messages hold picks.
func driveHolding(t testing.TB, m Model, msg tea.Msg, hold func(tea.Msg) bool) (Model, []tea.Msg) {
	t.Helper()
	var held []tea.Msg
	queue := []tea.Msg{msg}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		if hold(next) {
			held = append(held, next)
			continue
		}
		nm, cmd := m.Update(next)
		m = nm.(Model)
		queue = append(queue, run(cmd)...)
	}
	return m, held
}

// deliver hands a held message to the model, holding back the plans its
// commands produce.
func deliver(t testing.TB, m Model, msg tea.Msg) (Model, []tea.Msg) {
	t.Helper()
	nm, cmd := m.Update(msg)
	m = nm.(Model)
	var held []tea.Msg
	for _, next := range run(cmd) {
		var more []tea.Msg
		m, more = driveHolding(t, m, next, isPlan)
		held = append(held, more...)
	}
	return m, held
}

func isPlan(msg tea.Msg) bool { _, ok := msg.(plannedMsg); return ok }

// Every key on the Fix step while the plan is on its way: none applies,
// none opens the confirm step; esc goes back to where the user came from
// (the guides, reached by tab).
func TestEveryKeyWhilePlanning(t *testing.T) {
	keys := slices.DeleteFunc(keytest.All(), func(k string) bool { return k == "ctrl+c" || k == "q" })
	for _, k := range keys {
		w := &longWorld{}
		m := newTestModel(t, w.deps())
		m, held := driveHolding(t, m, keytest.Press("enter"), isPlan)
		if len(held) != 1 {
			t.Fatalf("%d plans held", len(held))
		}
		m = press(t, m, "tab", "tab")
		if m.Stage() != flow.Fix || !m.fix.planning {
			t.Fatalf("stage %s, planning %v", m.Stage(), m.fix.planning)
		}
		m = press(t, m, k)
		if len(w.applied) > 0 || m.fix.confirming {
			t.Fatalf("key %q while planning: applied %v, confirming %v", k, w.applied, m.fix.confirming)
		}
		if k == "esc" && m.Stage() != flow.Explain {
			t.Errorf("esc while planning: stage %s", m.Stage())
		}
		// The held plan still lands.
		m = drive(t, m, held[0])
		if m.fix.planning || len(m.fix.fixes) != 2 {
			t.Errorf("after key %q the plan did not land: planning %v, %d fixes", k, m.fix.planning, len(m.fix.fixes))
		}
	}
}

// A plan that arrives while the confirm step is open (a re-check finished
// behind it) changes neither the screen nor what y applies: y applies the
// views shown, from the plan shown; the new plan appears afterwards.
func TestLatePlanDoesNotChangeConfirm(t *testing.T) {
	w := &longWorld{}
	m := press(t, newTestModel(t, w.deps()), "enter", "tab", "tab", "space", "enter", "end")
	if !m.fix.confirming {
		t.Fatalf("not confirming:\n%s", view(m))
	}
	shownPlan := m.fix.shown[0].Plan
	before := view(m)
	// A check run finishes while the step is open; its plan is planned and
	// arrives (drive runs the planning command to the end).
	m = drive(t, m, recheckDoneMsg{results: checks.Run(context.Background(), m.c.deps.Host, m.c.deps.Checks, checks.Options{})})
	if w.plans < 2 {
		t.Fatalf("no new plan was made (%d)", w.plans)
	}
	if !m.fix.confirming || m.fix.pending == nil || view(m) != before {
		t.Fatalf("the late plan changed the confirm step (confirming %v, pending %v):\n%s\nwas:\n%s", m.fix.confirming, m.fix.pending != nil, view(m), before)
	}
	m = press(t, m, "y")
	if len(w.applied) != 1 || w.applied[0].ID != "shm.cleanup" || w.applied[0].Plan != shownPlan {
		t.Fatalf("y applied %+v, the screen showed shm.cleanup of plan %d", w.applied, shownPlan)
	}
	if m.fix.pending != nil || len(m.fix.fixes) == 0 || m.fix.fixes[0].Plan == shownPlan {
		t.Errorf("the new plan was not taken after the step closed: %+v", m.fix.fixes)
	}
}

// ApplyFix is told which other fixes of the plan are still open, so that
// steps.Judge does not hold /dev/shm still full against the cleanup while
// the remount is open; after the remount, nothing else is open.
func TestApplyTellsWhatIsOpen(t *testing.T) {
	w := &longWorld{}
	press(t, newTestModel(t, w.deps()), "enter", "tab", "tab", "space", "enter", "end", "y")
	if len(w.opens) != 1 || !slices.Equal(w.opens[0], []string{"shm.remount"}) {
		t.Fatalf("cleanup alone: open %q, want [shm.remount]", w.opens)
	}
	w2 := &longWorld{}
	press(t, newTestModel(t, w2.deps()), "enter", "tab", "tab", "space", "down", "space", "enter", "e", "end", "y")
	if len(w2.opens) != 2 || !slices.Equal(w2.opens[0], []string{"shm.remount"}) || len(w2.opens[1]) != 0 {
		t.Errorf("cleanup then remount: open %q, want [[shm.remount] []]", w2.opens)
	}
}
