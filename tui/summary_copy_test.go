package tui

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/keytest"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// snippetWorld recommends an environment variable from an informational
// finding only (no problem), and records what the summary saved.
type snippetWorld struct {
	saved   []string
	saveErr error
}

func (w *snippetWorld) deps() Deps {
	d := (&fakeWorld{}).deps()
	d.Checks = []checks.Check{{ID: "env.nccl", Title: "Environment", Run: func(context.Context, *host.Host) ([]checks.Finding, error) {
		return []checks.Finding{{Severity: checks.Info, Title: "NCCL_DEBUG is not set", Check: "env.nccl",
			Evidence: map[string]any{"recommended_env": map[string]string{"NCCL_DEBUG": "INFO"}}}}, nil
	}}}
	// Like steps.EnvChanges: a snippet when a finding recommends something.
	d.EnvSnippet = func(fs []checks.Finding) string {
		var b strings.Builder
		for _, f := range fs {
			if rec, ok := f.Evidence["recommended_env"].(map[string]string); ok {
				for k, v := range rec {
					b.WriteString("export " + k + "=" + v + "\n")
				}
			}
		}
		return b.String()
	}
	d.SaveEnvSnippet = func(s string) (string, error) {
		if w.saveErr != nil {
			return "", w.saveErr
		}
		w.saved = append(w.saved, s)
		return "/home/u/.cache/ncclwiz/env-snippet.sh", nil
	}
	return d
}

func TestSummaryCopiesSnippet(t *testing.T) {
	w := &snippetWorld{}
	m := press(t, newTestModel(t, w.deps()), "enter") // detect → findings
	m = drive(t, m, gotoMsg{flow.Summary})
	m = press(t, m, "c")
	if len(w.saved) != 1 || w.saved[0] != "export NCCL_DEBUG=INFO\n" {
		t.Fatalf("saved %q, want the snippet of the informational finding", w.saved)
	}
	v := view(m)
	for _, want := range []string{"saved in full to /home/u/.cache/ncclwiz/env-snippet.sh", "export NCCL_DEBUG=INFO", "saved to a file (path below)"} {
		if !strings.Contains(strings.Join(strings.Fields(v), " "), want) {
			t.Errorf("summary after c lacks %q:\n%s", want, v)
		}
	}
	fits(t, m, "summary after c")
}

// c pressed while the snippet is still being made copies it when it comes.
func TestSummaryCopyBeforeSnippet(t *testing.T) {
	w := &snippetWorld{}
	m := press(t, newTestModel(t, w.deps()), "enter")
	nm, pending := m.Update(gotoMsg{flow.Summary})
	m = nm.(Model)
	// The snippet command is held: c comes first.
	m = drive(t, m, keytest.Press("c"))
	if len(w.saved) != 0 || !strings.Contains(view(m), "copied when ready") {
		t.Fatalf("before the snippet: saved %q\n%s", w.saved, view(m))
	}
	for _, msg := range run(pending) {
		m = drive(t, m, msg)
	}
	if len(w.saved) != 1 {
		t.Fatalf("after the snippet arrived: saved %q", w.saved)
	}
}

// Without a recommendation there is nothing to copy, and it says so; a
// failed save still shows the snippet and says why.
func TestSummaryCopyNothingOrSaveFails(t *testing.T) {
	d := (&fakeWorld{}).deps()
	d.EnvSnippet = func([]checks.Finding) string { return "" }
	m := press(t, newTestModel(t, d), "enter")
	m = drive(t, m, gotoMsg{flow.Summary})
	m = press(t, m, "c")
	if !strings.Contains(view(m), "no snippet to copy") {
		t.Errorf("no snippet:\n%s", view(m))
	}

	w := &snippetWorld{saveErr: errors.New("read-only file system")}
	m = press(t, newTestModel(t, w.deps()), "enter")
	m = drive(t, m, gotoMsg{flow.Summary})
	m = press(t, m, "c")
	if v := view(m); !strings.Contains(strings.Join(strings.Fields(v), " "), "read-only file system") || !strings.Contains(v, "export NCCL_DEBUG=INFO") {
		t.Errorf("failed save:\n%s", v)
	}
}
