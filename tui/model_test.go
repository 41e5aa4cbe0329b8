package tui

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"charm.land/bubbles/v2/cursor"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/keytest"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// key names a key press as bubbletea v2 reports it.
func keyPress(s string) tea.KeyPressMsg { return keytest.Press(s) }

// drive feeds msg to the model and runs the commands it returns (and the
// commands those return) until quiet, like a program would, skipping ticks.
func drive(t testing.TB, m Model, msg tea.Msg) Model {
	t.Helper()
	queue := []tea.Msg{msg}
	for steps := 0; len(queue) > 0; steps++ {
		if steps > 500 {
			t.Fatal("model did not settle")
		}
		next := queue[0]
		queue = queue[1:]
		nm, cmd := m.Update(next)
		m = nm.(Model)
		queue = append(queue, run(cmd)...)
	}
	return m
}

// timers are the code of commands that only wait and then animate (tea.Tick
// for spinners, the text cursor's blink): drive skips them rather than
// sleeping through them. Closures of one function literal share their code.
var timers = func() []uintptr {
	c := cursor.New()
	return []uintptr{
		reflect.ValueOf(tea.Tick(time.Hour, func(time.Time) tea.Msg { return nil })).Pointer(),
		reflect.ValueOf(c.Blink()).Pointer(),
	}
}()

func run(cmd tea.Cmd) []tea.Msg {
	if cmd == nil || slices.Contains(timers, reflect.ValueOf(cmd).Pointer()) {
		return nil
	}
	msg := cmd()
	switch x := msg.(type) {
	case nil:
		return nil
	case tea.BatchMsg:
		var out []tea.Msg
		for _, c := range x {
			out = append(out, run(c)...)
		}
		return out
	case tea.QuitMsg:
		return nil
	}
	// Animation ticks and terminal requests are not part of the flow.
	name := strings.ToLower(typeName(msg))
	if strings.Contains(name, "tick") || strings.Contains(name, "frame") || strings.Contains(name, "windowsize") || strings.Contains(name, "clipboard") ||
		strings.Contains(name, "sequencemsg") || strings.Contains(name, "blink") {
		return nil
	}
	return []tea.Msg{msg}
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

func view(m Model) string { return ansi.Strip(m.View().Content) }

// fakeWorld is a machine with one orphaned-segment problem and a fix for it.
type fakeWorld struct {
	fixed   bool
	applied []string
	export  string
}

func (w *fakeWorld) deps() Deps {
	shm := checks.Check{ID: "shm.segments", Title: "Shared-memory segments", Run: func(context.Context, *host.Host) ([]checks.Finding, error) {
		if w.fixed {
			return []checks.Finding{{Severity: checks.OK, Title: "no orphaned segments"}}, nil
		}
		return []checks.Finding{{Severity: checks.Warn, Title: "3 orphaned NCCL segments hold 27.6 MiB", Guide: "shm-stale-segments", Fixes: []string{"shm.cleanup"},
			Detail: "Left behind by a crashed job.", Evidence: map[string]any{"orphaned": 3}}}, nil
	}}
	env := checks.Check{ID: "env.nccl", Title: "Environment", Run: func(context.Context, *host.Host) ([]checks.Finding, error) {
		return []checks.Finding{{Severity: checks.OK, Title: "fine"}}, nil
	}}
	return withGuides(Deps{
		Host:   &host.Host{Kind: "fixture", Name: "practice", Simulated: true, EUID: 1000},
		Checks: []checks.Check{shm, env},
		PlanFixes: func(_ context.Context, fs []checks.Finding) []FixView {
			for _, f := range fs {
				if f.Check == "shm.segments" {
					return []FixView{{ID: "shm.cleanup", Title: "Remove orphaned segments", Summary: "Removes 3 files no process holds.", Risk: "low",
						Preview: []string{"rm -- /dev/shm/nccl-AbC123"}}}
				}
			}
			return nil
		},
		ApplyFix: func(_ context.Context, f FixView, _ []string, progress func(string), _ func(string) bool) FixResult {
			progress("removing /dev/shm/nccl-AbC123")
			w.fixed = true
			w.applied = append(w.applied, f.ID)
			return FixResult{Summary: "removed 3 segments, freed 27.6 MiB", Changed: []string{"/dev/shm/nccl-AbC123"},
				Recheck: []checks.Result{{ID: "shm.segments", Findings: []checks.Finding{{Severity: checks.OK}}}}}
		},
		ExportScript: func(path string, ids []string, _ []checks.Finding, _ bool) error {
			w.export = path + ":" + strings.Join(ids, ",")
			return nil
		},
		EnvSnippet:  func([]checks.Finding) string { return "export NCCL_DEBUG=INFO\n" },
		CanValidate: func(context.Context) (bool, string) { return false, "no NVIDIA GPU found" },
	})
}

func newTestModel(t testing.TB, d Deps) Model {
	m := New(context.Background(), d, Options{ASCII: true})
	// A second passes between any two looks at the clock, as between a
	// person's paste and their next key: paste_quiet_test.go pins it.
	clock := time.Unix(1_800_000_000, 0)
	m.c.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	return drive(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
}

func TestWizardFullFlow(t *testing.T) {
	w := &fakeWorld{}
	m := newTestModel(t, w.deps())
	if !strings.Contains(view(m), "SIMULATED") || !strings.Contains(view(m), "Diagnose this machine") {
		t.Fatalf("start screen:\n%s", view(m))
	}
	m = drive(t, m, keyPress("enter")) // diagnose → detect → findings
	if m.Stage() != flow.Findings {
		t.Fatalf("stage %s after detect, want findings", m.Stage())
	}
	v := view(m)
	for _, want := range []string{"1 problem", "3 orphaned NCCL segments", "g: guide shm-stale-segments", "fixes: shm.cleanup"} {
		if !strings.Contains(v, want) {
			t.Errorf("findings view lacks %q:\n%s", want, v)
		}
	}
	m = drive(t, m, keyPress("enter")) // → explain
	if m.Stage() != flow.Explain || !strings.Contains(view(m), "Orphaned segments in /dev/shm") {
		t.Fatalf("explain:\n%s", view(m))
	}
	m = drive(t, m, keyPress("/"))
	for _, r := range "needle" {
		m = drive(t, m, keyPress(string(r)))
	}
	m = drive(t, m, keyPress("enter"))
	if !strings.Contains(view(m), `match 1/1 for "needle"`) {
		t.Errorf("in-page search:\n%s", view(m))
	}
	m = drive(t, m, keyPress("tab")) // → fix
	if m.Stage() != flow.Fix || !strings.Contains(view(m), "rm -- /dev/shm/nccl-AbC123") {
		t.Fatalf("fix:\n%s", view(m))
	}
	m = drive(t, m, keyPress("space"))
	m = drive(t, m, keyPress("enter"))
	if !strings.Contains(view(m), "Apply 1 fix?") {
		t.Fatalf("confirm:\n%s", view(m))
	}
	if len(w.applied) != 0 {
		t.Fatal("a fix ran before confirmation")
	}
	m = drive(t, m, keyPress("y"))
	if m.Stage() != flow.Apply || len(w.applied) != 1 {
		t.Fatalf("stage %s, applied %v", m.Stage(), w.applied)
	}
	if v := view(m); !strings.Contains(v, "removed 3 segments") || !strings.Contains(v, "re-check passed (shm.segments)") {
		t.Errorf("apply view:\n%s", v)
	}
	m = drive(t, m, keyPress("enter")) // → validate (cannot run here)
	if m.Stage() != flow.Validate || !strings.Contains(view(m), "no NVIDIA GPU found") {
		t.Fatalf("validate:\n%s", view(m))
	}
	m = drive(t, m, keyPress("enter")) // → summary
	v = view(m)
	for _, want := range []string{"found: 1 problem", "shm.cleanup", "nothing", "no warnings or errors remain"} {
		if !strings.Contains(v, want) {
			t.Errorf("summary lacks %q:\n%s", want, v)
		}
	}
	m = drive(t, m, keyPress("e"))
	m = drive(t, m, keyPress("enter"))
	if w.export != "ncclwiz-fix.sh:shm.cleanup" {
		t.Errorf("export called with %q", w.export)
	}
	line, code := m.ExitSummary()
	if code != 0 || !strings.Contains(line, "no problems left") || !strings.Contains(line, "ncclwiz-fix.sh") {
		t.Errorf("exit summary %q %d", line, code)
	}
}

func TestFixNeedsConsentAndCanGoBack(t *testing.T) {
	w := &fakeWorld{}
	m := newTestModel(t, w.deps())
	m = drive(t, m, keyPress("enter"))
	m = drive(t, m, keyPress("tab")) // findings → explain
	m = drive(t, m, keyPress("tab")) // explain → fix
	if m.Stage() != flow.Fix {
		t.Fatalf("stage %s", m.Stage())
	}
	m = drive(t, m, keyPress("space"))
	m = drive(t, m, keyPress("enter"))
	m = drive(t, m, keyPress("n")) // declined
	if len(w.applied) != 0 || m.Stage() != flow.Fix {
		t.Fatalf("declined fix ran or stage moved: %v %s", w.applied, m.Stage())
	}
	m = drive(t, m, tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift})
	if m.Stage() != flow.Explain {
		t.Errorf("shift+tab from fix went to %s", m.Stage())
	}
}

func TestResizeAndNarrowTerminal(t *testing.T) {
	w := &fakeWorld{}
	m := newTestModel(t, w.deps())
	m = drive(t, m, keyPress("enter"))
	for _, size := range [][2]int{{80, 24}, {60, 15}, {120, 40}} {
		m = drive(t, m, tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		lines := strings.Split(view(m), "\n")
		if len(lines) != size[1] {
			t.Errorf("%dx%d: view has %d lines", size[0], size[1], len(lines))
		}
		for i, l := range lines {
			if w := ansi.StringWidth(l); w > size[0] {
				t.Errorf("%dx%d: line %d is %d wide: %q", size[0], size[1], i, w, l)
			}
		}
	}
}

func TestQuitKeys(t *testing.T) {
	w := &fakeWorld{}
	for _, k := range []string{"q", "ctrl+c"} {
		m := newTestModel(t, w.deps())
		_, cmd := m.Update(keyPress(k))
		if cmd == nil {
			t.Fatalf("%s: no command", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s does not quit", k)
		}
	}
}

func TestLogExplainEntry(t *testing.T) {
	w := &fakeWorld{}
	d := w.deps()
	d.ExplainLog = func(_ context.Context, path string) (LogResult, error) {
		if path != "train.log" {
			return LogResult{}, errors.New("open " + path + ": no such file")
		}
		return LogResult{Summary: "Root cause: /dev/shm too small",
			Diagnoses: []LogDiagnosis{{Title: "/dev/shm is full", RootCause: true, Guide: "shm-stale-segments"}},
			Render: func(w int) string {
				return fmt.Sprintf("Root cause: /dev/shm is full (drawn at %d)\nNext: look at /dev/shm", w)
			}}, nil
	}
	m := newTestModel(t, d)
	m = drive(t, m, keyPress("2"))
	if m.Stage() != flow.Log {
		t.Fatalf("stage %s", m.Stage())
	}
	for _, r := range "train.log" {
		m = drive(t, m, keyPress(string(r)))
	}
	m = drive(t, m, keyPress("enter"))
	v := view(m)
	// The report is drawn by the explainer's renderer, at the window's width.
	if !strings.Contains(v, "Root cause: /dev/shm is full (drawn at 79)") || !strings.Contains(v, "Next: look at /dev/shm") || !strings.Contains(v, "g opens the guide shm-stale-segments") {
		t.Fatalf("log view:\n%s", v)
	}
	m = drive(t, m, keyPress("g"))
	if m.Stage() != flow.Explain || !strings.Contains(view(m), "Orphaned segments") {
		t.Errorf("guide from log: stage %s\n%s", m.Stage(), view(m))
	}
}

// Two Tabs typed faster than a command runs still move two stages on:
// navigation happens in the Update of the key itself.
func TestQuickTabs(t *testing.T) {
	w := &longWorld{}
	m := press(t, newTestModel(t, w.deps()), "enter")
	for _, k := range []string{"tab", "tab"} {
		nm, _ := m.Update(keyPress(k))
		m = nm.(Model)
	}
	if m.Stage() != flow.Fix {
		t.Errorf("two quick tabs from Findings: %s, want fix", m.Stage())
	}
	nm, _ := m.Update(keyPress("shift+tab"))
	if nm.(Model).Stage() != flow.Explain {
		t.Errorf("shift+tab from Fix: %s, want explain", nm.(Model).Stage())
	}
}
