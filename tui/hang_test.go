package tui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/internal/keytest"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// fakeHangReport is the layout: rank 2 of four is stopped while
// the others spin, with a report longer than a screen (evidence per
// source, next steps) whose lines are as wide as the width allows.
func fakeHangReport() HangReport {
	return HangReport{Verdict: "suspect", Suspects: []int{2}, Guide: "hang",
		Summary: "Suspect rank(s): 2. The other ranks wait for them in a collective.",
		HasRaw:  true,
		Render: func(width int, raw bool) string {
			var b strings.Builder
			if raw {
				b.WriteString("--- raw reply ---\nRAS-RAW-LINE\n---\n")
			}
			b.WriteString("Job 4100: torchrun --nproc-per-node 4 train.py\n")
			for r := range 4 {
				state := "R→R"
				if r == 2 {
					state = "T→T"
				}
				fmt.Fprintf(&b, "  %d  %d  %s\n", r, 4101+r, state)
			}
			b.WriteString("\nEvidence:\n")
			for i := range 30 {
				fmt.Fprintf(&b, "  ! rank 2 [process] %s\n", strings.Repeat("x", max(width-30, 1))+fmt.Sprint(i))
			}
			b.WriteString("\nNext:\n  - Rank 2 (pid 4103) is stopped: resume it (`kill -CONT 4103`); ncclwiz does not signal it.\n  THE-END\n")
			return b.String()
		}}
}

func fakeClusterReport() ClusterReport {
	return ClusterReport{Summary: "3 nodes: 3 checked, 0 not reachable, 1 fact differs; look at gpu03", Suspects: []string{"gpu03"},
		Render: func(width int) string {
			var b strings.Builder
			b.WriteString("NODE    NCCL\n gpu03  *2.18.1\n gpu01  2.21.5\n gpu02  2.21.5\n\n")
			for i := range 30 {
				fmt.Fprintf(&b, "  note %d %s\n", i, strings.Repeat("y", max(width-20, 1)))
			}
			b.WriteString("Suspect: gpu03 (NCCL 2.18.1, the others 2.21.5)\nTHE-END\n")
			return b.String()
		}}
}

// withSideTrips gives a fake world one hanging job and a three-node job.
func withSideTrips(d Deps) Deps {
	d.HangJobs = func(context.Context) ([]HangJob, error) {
		return []HangJob{{ID: 4100, Ranks: 4, Age: 10 * time.Minute, Command: "torchrun --nproc-per-node 4 train.py"}}, nil
	}
	d.InspectHang = func(_ context.Context, _ int, progress func(string)) (HangReport, error) {
		progress("sampling 4 ranks")
		return fakeHangReport(), nil
	}
	d.MultiNode, d.NodeList = "Slurm node list gpu[01-03]", "gpu[01-03]"
	d.ClusterCheck = func(_ context.Context, _ string, progress func(string)) (ClusterReport, error) {
		progress("running the check on 3 nodes")
		return fakeClusterReport(), nil
	}
	return d
}

// hangWorld records what the wizard asked of the hang inspection.
type hangWorld struct {
	mu        sync.Mutex
	jobs      []HangJob
	listErr   error
	inspected []int
	// block makes InspectHang wait for the context (Esc) or release.
	block   bool
	release chan struct{}
	ended   chan error
}

func (w *hangWorld) deps() Deps {
	d := (&fakeWorld{}).deps()
	d.HangJobs = func(context.Context) ([]HangJob, error) { return w.jobs, w.listErr }
	d.InspectHang = func(ctx context.Context, id int, progress func(string)) (HangReport, error) {
		w.mu.Lock()
		w.inspected = append(w.inspected, id)
		w.mu.Unlock()
		progress(fmt.Sprintf("sampling job %d", id))
		if w.block {
			select {
			case <-ctx.Done():
				w.ended <- ctx.Err()
				return HangReport{}, ctx.Err()
			case <-w.release:
			}
		}
		return fakeHangReport(), nil
	}
	return d
}

func (w *hangWorld) calls() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.inspected...)
}

// fits fails when a frame is not exactly 80×24 cells.
func fits(t *testing.T, m Model, what string) {
	t.Helper()
	lines := strings.Split(view(m), "\n")
	if len(lines) != 24 {
		t.Errorf("%s: %d lines, want 24", what, len(lines))
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > 80 {
			t.Errorf("%s: line %d is %d cells: %q", what, i, n, l)
		}
	}
}

// Two jobs run: the user picks the second from a list, the verdict names
// the suspect rank, scrolls to its last line, g opens the hang guide, and
// Esc walks back guide → verdict → list → Start without inspecting again.
func TestHangEntrySeveralJobs(t *testing.T) {
	w := &hangWorld{jobs: []HangJob{
		{ID: 100, Ranks: 2, Age: time.Hour, Command: "torchrun --nproc-per-node 2 other.py"},
		{ID: 4100, Ranks: 4, Age: 10 * time.Minute, Command: "torchrun --nproc-per-node 4 train.py"},
	}}
	m := newTestModel(t, w.deps())
	if !strings.Contains(view(m), "My job is hanging") {
		t.Fatalf("Start has no hang entry:\n%s", view(m))
	}
	m = press(t, m, "3")
	if m.Stage() != flow.Hang || m.hang.phase != hangPicking {
		t.Fatalf("stage %s phase %d, want the job list", m.Stage(), m.hang.phase)
	}
	v := view(m)
	for _, want := range []string{"2 distributed jobs", "other.py", "train.py", "enter inspect"} {
		if !strings.Contains(v, want) {
			t.Errorf("job list lacks %q:\n%s", want, v)
		}
	}
	fits(t, m, "job list")
	if len(w.calls()) != 0 {
		t.Fatalf("inspected %v before the user picked", w.calls())
	}
	m = press(t, m, "down", "enter")
	if got := w.calls(); len(got) != 1 || got[0] != 4100 {
		t.Fatalf("inspected %v, want the picked job 4100", got)
	}
	v = view(m)
	for _, want := range []string{"Suspect: rank 2", "Suspect rank(s): 2.", "g guide", "esc back"} {
		if !strings.Contains(v, want) {
			t.Errorf("verdict lacks %q:\n%s", want, v)
		}
	}
	fits(t, m, "verdict")
	if strings.Contains(v, "THE-END") {
		t.Fatal("the report's end shows without scrolling: the layout does not test scrolling")
	}
	if !strings.Contains(v, "w RAS raw") || strings.Contains(v, "RAS-RAW-LINE") {
		t.Errorf("the raw RAS reply: offered and hidden until w:\n%s", v)
	}
	m = press(t, m, "w")
	if v = view(m); !strings.Contains(v, "RAS-RAW-LINE") {
		t.Errorf("w does not show the raw RAS reply:\n%s", v)
	}
	m = press(t, m, "w", "end")
	if v = view(m); !strings.Contains(v, "THE-END") || !strings.Contains(v, "kill -CONT 4103") {
		t.Errorf("end does not reach the next steps:\n%s", v)
	}
	fits(t, m, "verdict scrolled")
	m = press(t, m, "g")
	if m.Stage() != flow.Explain || !strings.Contains(view(m), "hang guide body") {
		t.Fatalf("g: stage %s\n%s", m.Stage(), view(m))
	}
	m = press(t, m, "esc")
	if m.Stage() != flow.Hang || !strings.Contains(view(m), "Suspect: rank 2") {
		t.Fatalf("esc from the guide: stage %s\n%s", m.Stage(), view(m))
	}
	if got := w.calls(); len(got) != 1 {
		t.Errorf("coming back from the guide inspected again: %v", got)
	}
	m = press(t, m, "esc")
	if m.hang.phase != hangPicking {
		t.Fatalf("esc from the verdict: phase %d, want the list", m.hang.phase)
	}
	m = press(t, m, "esc")
	if m.Stage() != flow.Start {
		t.Fatalf("esc from the list: stage %s", m.Stage())
	}
}

// Nothing to inspect (no job; a practice server): the message says so and
// no inspection starts.
func TestHangNothingToInspect(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    *hangWorld
		want string
	}{
		{"no job", &hangWorld{}, "No distributed job runs on this machine"},
		{"practice", &hangWorld{listErr: fmt.Errorf("This is a practice scenario: there is no live job to inspect.")}, "no live job to inspect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := press(t, newTestModel(t, tc.w.deps()), "3")
			if v := view(m); !strings.Contains(v, tc.want) {
				t.Errorf("missing %q:\n%s", tc.want, v)
			}
			fits(t, m, tc.name)
			if len(tc.w.calls()) != 0 {
				t.Errorf("inspected %v", tc.w.calls())
			}
			if m = press(t, m, "esc"); m.Stage() != flow.Start {
				t.Errorf("esc: stage %s", m.Stage())
			}
		})
	}
}

// The inspection samples for seconds in a tea.Cmd: meanwhile the screen
// says what it is doing, every key is handled at once, and Esc cancels the
// run through its context and goes back. A verdict that arrives after Esc
// is not shown.
func TestHangInspectionIsCancellable(t *testing.T) {
	w := &hangWorld{jobs: []HangJob{{ID: 4100, Ranks: 4, Command: "torchrun train.py"}}, block: true,
		release: make(chan struct{}), ended: make(chan error, 1)}
	p := &asyncProgram{t: t, m: newTestModel(t, w.deps()), msgs: make(chan tea.Msg, 64)}
	p.send(keytest.Press("3"))
	p.until("the inspection's progress line", func(m Model) bool { return strings.Contains(view(m), "sampling job 4100") })
	if v := view(p.m); !strings.Contains(v, "esc stop") || !strings.Contains(v, "signals and attaches to nothing") {
		t.Errorf("inspecting screen:\n%s", v)
	}
	fits(t, p.m, "inspecting")
	for _, k := range []string{"enter", "g", "r", "y", "down", "tab", "1", "space"} {
		p.send(keytest.Press(k)) // returns at once: the run is in a goroutine
		if p.m.Stage() != flow.Hang || p.m.hang.phase != hangInspecting {
			t.Fatalf("key %q while inspecting: stage %s phase %d", k, p.m.Stage(), p.m.hang.phase)
		}
	}
	p.send(keytest.Press("esc"))
	select {
	case err := <-w.ended:
		if err == nil {
			t.Error("the inspection ended without its context cancelled")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Esc did not cancel the inspection's context")
	}
	p.until("back at Start", func(m Model) bool { return m.Stage() == flow.Start })
	// Enter again: a fresh look, and this time the sample finishes.
	p.send(keytest.Press("3"))
	p.until("the second run", func(m Model) bool { return len(w.calls()) == 2 })
	close(w.release)
	p.until("the verdict", func(m Model) bool { return m.hang.phase == hangDone })
	if v := view(p.m); !strings.Contains(v, "Suspect: rank 2") {
		t.Errorf("verdict:\n%s", v)
	}
}

// A panic in the inspection (a bug, a hostile machine) is shown as an
// error on the hang screen; the wizard keeps running.
func TestHangPanicIsAnError(t *testing.T) {
	w := &hangWorld{jobs: []HangJob{{ID: 7, Ranks: 2}}}
	d := w.deps()
	d.InspectHang = func(context.Context, int, func(string)) (HangReport, error) { panic("nil NVML method") }
	m := press(t, newTestModel(t, d), "3")
	if v := view(m); !strings.Contains(v, "internal error") || !strings.Contains(v, "nil NVML method") {
		t.Errorf("panic not shown:\n%s", v)
	}
	if m = press(t, m, "esc"); m.Stage() != flow.Start {
		t.Errorf("esc: stage %s", m.Stage())
	}
}

// Thirty jobs with long command lines: the list fits 80×24 and keeps the
// cursor's job on screen all the way down.
func TestHangJobListScrolls(t *testing.T) {
	w := &hangWorld{}
	for i := range 30 {
		w.jobs = append(w.jobs, HangJob{ID: 1000 + i, Ranks: 8, Age: time.Minute,
			Command: fmt.Sprintf("torchrun --nnodes 4 --nproc-per-node 8 job%02d.py %s", i, strings.Repeat("--flag ", 20))})
	}
	m := press(t, newTestModel(t, w.deps()), "3")
	for i := range 30 {
		if !strings.Contains(view(m), fmt.Sprintf("job%02d", i)) {
			t.Fatalf("cursor on job %d, which is not on screen:\n%s", i, view(m))
		}
		fits(t, m, fmt.Sprintf("job list at %d", i))
		m = press(t, m, "down")
	}
	press(t, m, "enter")
	if got := w.calls(); len(got) != 1 || got[0] != 1029 {
		t.Errorf("inspected %v, want 1029", got)
	}
}
