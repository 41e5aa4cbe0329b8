package tui

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/internal/keytest"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// nodesWorld records the node lists the wizard checked.
type nodesWorld struct {
	mu      sync.Mutex
	lists   []string
	block   bool
	ended   chan error
	started chan struct{}
}

func (w *nodesWorld) deps(multi, list string) Deps {
	d := (&fakeWorld{}).deps()
	d.MultiNode, d.NodeList = multi, list
	d.ClusterCheck = func(ctx context.Context, nodes string, progress func(string)) (ClusterReport, error) {
		w.mu.Lock()
		w.lists = append(w.lists, nodes)
		w.mu.Unlock()
		progress("running `ncclwiz check --json` on 3 nodes over ssh")
		if w.block {
			w.started <- struct{}{}
			<-ctx.Done()
			w.ended <- ctx.Err()
			return ClusterReport{}, ctx.Err()
		}
		return fakeClusterReport(), nil
	}
	return d
}

func (w *nodesWorld) calls() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lists...)
}

// Findings offers "Check all nodes" (n, in the help bar) only for a job
// that looks multi-node; on a single-node job n does nothing.
func TestCheckAllNodesOfferedOnlyMultiNode(t *testing.T) {
	for _, tc := range []struct {
		name, multi string
		offered     bool
	}{
		{"single node", "", false},
		{"slurm", "Slurm node list gpu[01-03]", true},
		{"master elsewhere", "MASTER_ADDR=10.0.0.7 is another machine", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &nodesWorld{}
			m := press(t, newTestModel(t, w.deps(tc.multi, "")), "enter")
			if m.Stage() != flow.Findings {
				t.Fatalf("stage %s", m.Stage())
			}
			if got := strings.Contains(view(m), "n check all nodes"); got != tc.offered {
				t.Errorf("help bar offers the check: %v, want %v\n%s", got, tc.offered, view(m))
			}
			fits(t, m, "findings")
			m = press(t, m, "n")
			if (m.Stage() == flow.Nodes) != tc.offered {
				t.Errorf("n: stage %s", m.Stage())
			}
		})
	}
}

// The user's layout: inside a Slurm allocation of three nodes. The list is
// pre-filled from SLURM_JOB_NODELIST, enter runs the check once with it, the
// table names the odd node and scrolls to its end (the explain link), and
// Esc goes back to Findings.
func TestCheckAllNodesFlow(t *testing.T) {
	w := &nodesWorld{}
	m := press(t, newTestModel(t, w.deps("Slurm node list gpu[01-03]", "gpu[01-03]")), "enter", "n")
	v := view(m)
	for _, want := range []string{"nodes: gpu[01-03]", "Slurm node list gpu[01-03]", "enter check the nodes"} {
		if !strings.Contains(v, want) {
			t.Errorf("node list screen lacks %q:\n%s", want, v)
		}
	}
	fits(t, m, "node list")
	if len(w.calls()) != 0 {
		t.Fatal("checked the nodes before enter")
	}
	m = press(t, m, "enter")
	if got := w.calls(); len(got) != 1 || got[0] != "gpu[01-03]" {
		t.Fatalf("checked %v, want [gpu[01-03]]", got)
	}
	v = view(m)
	for _, want := range []string{"look at gpu03", "*2.18.1"} {
		if !strings.Contains(v, want) {
			t.Errorf("table lacks %q:\n%s", want, v)
		}
	}
	fits(t, m, "table")
	m = press(t, m, "end")
	if v = view(m); !strings.Contains(v, "THE-END") || !strings.Contains(v, "ncclwiz explain") {
		t.Errorf("end of the table does not link explain:\n%s", v)
	}
	fits(t, m, "table scrolled")
	m = press(t, m, "esc")
	if m.Stage() != flow.Findings {
		t.Fatalf("esc: stage %s", m.Stage())
	}
	// Back again: the table is kept; o edits the list.
	m = press(t, m, "n")
	if !strings.Contains(view(m), "look at gpu03") {
		t.Errorf("the table was not kept:\n%s", view(m))
	}
	m = press(t, m, "o")
	if !m.nodes.input.Focused() {
		t.Error("o does not edit the node list")
	}
}

// An empty list (no SLURM_JOB_NODELIST: a placeholder) asks for nodes and
// runs nothing; letters typed there are text, not shortcuts (q does not
// quit).
func TestCheckAllNodesEmptyList(t *testing.T) {
	w := &nodesWorld{}
	m := press(t, newTestModel(t, w.deps("MASTER_ADDR=10.0.0.7 is another machine", "")), "enter", "n")
	if v := view(m); !strings.Contains(v, "gpu01,gpu02 or gpu[01-04]") {
		t.Errorf("no placeholder:\n%s", v)
	}
	m = press(t, m, "enter")
	if len(w.calls()) != 0 || !strings.Contains(view(m), "Type the job's nodes first") {
		t.Fatalf("empty list: calls %v\n%s", w.calls(), view(m))
	}
	press(t, m, "q", "n", "1", ",", "q", "n", "2", "enter")
	if got := w.calls(); len(got) != 1 || got[0] != "qn1,qn2" {
		t.Fatalf("checked %v, want [qn1,qn2]", got)
	}
}

// The check reaches nodes for up to minutes in a tea.Cmd: keys are handled
// meanwhile, and Esc cancels it through its context and returns to the
// list.
func TestCheckAllNodesCancellable(t *testing.T) {
	w := &nodesWorld{block: true, ended: make(chan error, 1), started: make(chan struct{}, 1)}
	p := &asyncProgram{t: t, m: newTestModel(t, w.deps("Slurm node list gpu[01-03]", "gpu[01-03]")), msgs: make(chan tea.Msg, 64)}
	p.send(keytest.Press("enter"))
	p.until("findings", func(m Model) bool { return m.Stage() == flow.Findings })
	p.send(keytest.Press("n"))
	p.until("the node list", func(m Model) bool { return m.Stage() == flow.Nodes && m.nodes.input.Focused() })
	p.send(keytest.Press("enter"))
	select {
	case <-w.started:
	case <-time.After(30 * time.Second):
		t.Fatal("enter did not start the check")
	}
	p.until("the progress line", func(m Model) bool { return strings.Contains(view(m), "on 3 nodes over ssh") })
	fits(t, p.m, "running")
	for _, k := range []string{"enter", "y", "n", "tab", "g"} {
		p.send(keytest.Press(k))
		if p.m.Stage() != flow.Nodes || !p.m.nodes.running {
			t.Fatalf("key %q while running: stage %s running %v", k, p.m.Stage(), p.m.nodes.running)
		}
	}
	p.send(keytest.Press("esc"))
	select {
	case <-w.ended:
	case <-time.After(30 * time.Second):
		t.Fatal("Esc did not cancel the check's context")
	}
	if !p.m.nodes.input.Focused() || p.m.Stage() != flow.Nodes {
		t.Errorf("after esc: stage %s, list focused %v", p.m.Stage(), p.m.nodes.input.Focused())
	}
}

// A log from several nodes names the cluster check.
func TestMultiNodeLogMentionsClusterCheck(t *testing.T) {
	for _, n := range []int{1, 4} {
		d := (&fakeWorld{}).deps()
		d.ExplainLog = func(context.Context, string) (LogResult, error) {
			return LogResult{Summary: "Root cause: a peer closed its connection", Nodes: n}, nil
		}
		m := newTestModel(t, d)
		m = press(t, m, "2", "a", ".", "l", "o", "g", "enter")
		got := strings.Contains(view(m), "cluster check")
		if got != (n > 1) {
			t.Errorf("%d node(s): mentions cluster check %v\n%s", n, got, view(m))
		}
		fits(t, m, "log result")
	}
}
