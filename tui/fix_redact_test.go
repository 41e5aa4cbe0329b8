package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
)

// A fix's title, summary, warnings and preview lines carry machine text
// (a leftover rank's command line); the Fix screen's detail and the
// confirm step's expanded plan show it through the one redactor.
func TestFixScreenRedactsSecrets(t *testing.T) {
	const secret = "abc123secretvalue"
	w := &longWorld{}
	d := w.deps()
	d.PlanFixes = func(context.Context, []checks.Finding) []FixView {
		return []FixView{{ID: "proc.stale", Title: "End 1 leftover rank: python train.py --hf_token " + secret,
			Summary: "Sends SIGTERM to python train.py --hf_token " + secret + ".", Risk: "medium", Answers: []string{"shm.segments"},
			Preview:  []string{"kill -TERM 4242   # python train.py --hf_token " + secret + " \x1b[31m"},
			Warnings: []string{"PID 4243 python train.py --hf_token " + secret + " is making progress"}}}
	}
	m := press(t, newTestModel(t, d), "enter", "tab", "tab")
	screens := map[string]string{"fix detail": view(m)}
	m = press(t, m, "space", "enter", "e", "end")
	screens["confirm, expanded"] = view(m)
	for name, v := range screens {
		if !strings.Contains(v, "kill -TERM 4242") || !strings.Contains(v, "--hf_token") {
			t.Fatalf("%s does not show the fix:\n%s", name, v)
		}
		if strings.Contains(v, secret) || strings.Contains(v, "\x1b[31m") {
			t.Errorf("%s shows the secret or a raw escape:\n%s", name, v)
		}
	}
}
