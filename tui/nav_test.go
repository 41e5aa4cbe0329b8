package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// historyCases are walks from Start and the way back each leaves.
var historyCases = []struct {
	name  string
	moves []flow.Stage // the stages visited in turn, from Start
	want  []flow.Stage
}{
	{"nowhere yet", nil, nil},
	{"forward", []flow.Stage{flow.Detect, flow.Findings, flow.Explain}, []flow.Stage{flow.Start, flow.Detect, flow.Findings}},
	{"a side trip", []flow.Stage{flow.Log, flow.Explain}, []flow.Stage{flow.Start, flow.Log}},
	{"back cuts the way", []flow.Stage{flow.Findings, flow.Explain, flow.Fix, flow.Findings}, []flow.Stage{flow.Start}},
	{"back to the start", []flow.Stage{flow.Log, flow.Explain, flow.Start}, nil},
	{"staying is no move", []flow.Stage{flow.Findings, flow.Findings}, []flow.Stage{flow.Start}},
	{"a loop forward", []flow.Stage{flow.Findings, flow.Nodes, flow.Findings, flow.Nodes}, []flow.Stage{flow.Start, flow.Findings}},
}

func TestHistory(t *testing.T) {
	for _, c := range historyCases {
		t.Run(c.name, func(t *testing.T) {
			var h history
			at := flow.Start
			for _, s := range c.moves {
				h = h.visit(at, s)
				at = s
			}
			if !slices.Equal(h, history(c.want)) {
				t.Fatalf("history %v, want %v", h, c.want)
			}
			back, ok := h.back()
			if ok != (len(c.want) > 0) || ok && back != c.want[len(c.want)-1] {
				t.Errorf("back = %s, %v", back, ok)
			}
			for _, s := range c.want {
				if !h.returning(s) {
					t.Errorf("%s is on the way but not returning", s)
				}
			}
		})
	}
	// visit never writes into the history it was given (models are values).
	h := history{flow.Start, flow.Findings, flow.Explain}
	cut := h[:1]
	_ = cut.visit(flow.Findings, flow.Log)
	if h[1] != flow.Findings {
		t.Errorf("visit wrote into a shared history: %v", h)
	}
}

// Esc walks back the way the user came, each screen first closing what it
// has open (a guide's search, the confirm step), and never applies
// anything.
func TestEscGoesBackTheWayCame(t *testing.T) {
	w := &longWorld{}
	m := newTestModel(t, w.deps())
	m = press(t, m, "esc")
	if m.Stage() != flow.Start || !strings.Contains(view(m), "this is the start; q quits") {
		t.Fatalf("esc on Start: %s\n%s", m.Stage(), view(m))
	}
	m = press(t, m, "enter", "down")
	if m.Stage() != flow.Findings || m.findings.list.index() != 1 {
		t.Fatalf("findings: stage %s, cursor %d", m.Stage(), m.findings.list.index())
	}
	// A finding's guide, a search in it, esc twice: back on that finding.
	m = press(t, m, "g", "/", "n", "e", "e", "d", "l", "e", "enter")
	if m.Stage() != flow.Explain || !m.guides.Viewing() || m.guides.Current().ID != "shm-stale-segments" {
		t.Fatalf("g did not open the finding's guide: %s\n%s", m.Stage(), view(m))
	}
	if !strings.Contains(view(m), "match 1/1") {
		t.Fatalf("search:\n%s", view(m))
	}
	m = press(t, m, "esc")
	if m.Stage() != flow.Explain || strings.Contains(view(m), "match 1/1") {
		t.Fatalf("first esc should close the search only: %s\n%s", m.Stage(), view(m))
	}
	m = press(t, m, "esc")
	if m.Stage() != flow.Findings || m.findings.list.index() != 1 {
		t.Fatalf("esc from the guide: stage %s, cursor %d", m.Stage(), m.findings.list.index())
	}
	// Tab to the guides (a list of two), Tab to Fix, open the confirm step;
	// esc closes it, then walks back: the guides as left, Findings, Start.
	m = press(t, m, "tab")
	if !strings.Contains(view(m), "Guides for what was found") || m.guides.Viewing() {
		t.Fatalf("explain with two guides should list them:\n%s", view(m))
	}
	m = press(t, m, "down", "tab", "space", "enter")
	if !m.fix.confirming {
		t.Fatalf("no confirm step:\n%s", view(m))
	}
	m = press(t, m, "esc")
	if m.Stage() != flow.Fix || m.fix.confirming {
		t.Fatalf("esc on the confirm step: stage %s, confirming %v", m.Stage(), m.fix.confirming)
	}
	var trail []string
	for range 4 {
		m = press(t, m, "esc")
		trail = append(trail, string(m.Stage()))
		if m.Stage() == flow.Explain && m.guides.Viewing() {
			t.Errorf("back at the guides a guide is open:\n%s", view(m))
		}
	}
	if got := strings.Join(trail, " "); got != "explain findings start start" {
		t.Errorf("esc from Fix walked %s", got)
	}
	if len(w.applied) > 0 {
		t.Errorf("esc applied %v", w.applied)
	}
}

// A guide opened from a log result: esc returns to the result, as it was.
func TestEscFromLogGuide(t *testing.T) {
	w := &longWorld{}
	d := w.deps()
	d.ExplainLog = func(_ context.Context, path string) (LogResult, error) {
		return LogResult{Summary: "Root cause: /dev/shm too small",
			Diagnoses: []LogDiagnosis{{Title: "first", Guide: "hang"}, {Title: "second", Guide: "shm-no-space"}}}, nil
	}
	m := press(t, newTestModel(t, d), "enter", "esc") // checks ran: Findings is not where the log was opened from
	m = press(t, m, "2")
	m = press(t, m, "t", "enter", "down", "g")
	if m.Stage() != flow.Explain || m.guides.Current() == nil || m.guides.Current().ID != "shm-no-space" {
		t.Fatalf("g on the second diagnosis: %s\n%s", m.Stage(), view(m))
	}
	m = press(t, m, "esc")
	if m.Stage() != flow.Log || !strings.Contains(view(m), "Root cause: /dev/shm too small") {
		t.Fatalf("esc from the log's guide: %s\n%s", m.Stage(), view(m))
	}
	m = press(t, m, "esc")
	if m.Stage() != flow.Start {
		t.Errorf("esc from the log result: %s", m.Stage())
	}
}

// The one cursor list: a list taller than its room pages, every row is
// reachable, the view never takes more lines than given, the position
// line says where the cursor is, and new rows keep the cursor.
func TestListViewPages(t *testing.T) {
	v := newListView(newListKeys(), 1, false)
	v.setRows(40)
	v.setSize(30, 10)
	draw := func(i int, sel bool) string {
		if sel {
			return fmt.Sprintf("> row %02d", i)
		}
		return fmt.Sprintf("  row %02d", i)
	}
	st := newStyles(true)
	for i := range 45 {
		out := v.view(draw, st.dim)
		lines := strings.Split(out, "\n")
		if len(lines) != v.height() || len(lines) > 10 {
			t.Fatalf("step %d: %d lines, height() %d, room 10", i, len(lines), v.height())
		}
		want := min(i, 39)
		if v.index() != want || !strings.Contains(out, fmt.Sprintf("> row %02d", want)) || !strings.Contains(out, fmt.Sprintf("(%d of 40)", want+1)) {
			t.Fatalf("step %d: index %d\n%s", i, v.index(), out)
		}
		v.update(keyPress("down"))
	}
	v.setRows(50)
	if v.index() != 39 {
		t.Errorf("more rows moved the cursor to %d", v.index())
	}
	v.setRows(5)
	if v.index() != 4 || v.height() != 5 || strings.Contains(v.view(draw, st.dim), " of ") {
		t.Errorf("5 rows in a room of 10: index %d, height %d\n%s", v.index(), v.height(), v.view(draw, st.dim))
	}
	w := newListView(newListKeys(), 2, true)
	w.setRows(3)
	w.setSize(30, 10)
	w.update(keyPress("up"))
	if w.index() != 2 {
		t.Errorf("a wrapping list: up from the first row is %d", w.index())
	}
}

// After fixes were applied, esc from Apply returns to the Fix step and
// applies nothing more.
func TestEscFromApply(t *testing.T) {
	w := &longWorld{}
	m := press(t, newTestModel(t, w.deps()), "enter", "tab", "tab", "space", "enter", "end", "y")
	if m.Stage() != flow.Apply || len(w.applied) != 1 {
		t.Fatalf("stage %s, %d applied", m.Stage(), len(w.applied))
	}
	m = press(t, m, "esc")
	if m.Stage() != flow.Fix || m.fix.confirming || len(w.applied) != 1 {
		t.Errorf("esc from Apply: stage %s, confirming %v, %d applied", m.Stage(), m.fix.confirming, len(w.applied))
	}
}
