package tui

import (
	"context"
	"errors"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/internal/keytest"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// pasteWorld records what the log screen asked to explain.
type pasteWorld struct {
	paths, texts []string
}

func (w *pasteWorld) deps() Deps {
	d := (&fakeWorld{}).deps()
	d.ExplainLog = func(_ context.Context, path string) (LogResult, error) {
		w.paths = append(w.paths, path)
		return LogResult{}, errors.New("open " + path + ": no such file or directory")
	}
	d.ExplainText = func(_ context.Context, text string) (LogResult, error) {
		w.texts = append(w.texts, text)
		return LogResult{Summary: "Root cause: /dev/shm ran out of space",
			Diagnoses: []LogDiagnosis{{ID: "shm-create-nospace", RootCause: true, Guide: "shm-no-space"}, {ID: "nccl-remote-error", Guide: "consequence-errors"}},
			Render:    func(int) string { return "Root cause: /dev/shm ran out of space\nNext:     - resize /dev/shm" }}, nil
	}
	return d
}

func paste(s string) tea.PasteMsg { return tea.PasteMsg{Content: s} }

func TestLogPaste(t *testing.T) {
	for _, c := range []struct {
		name    string
		content string
		// field is what the input shows afterwards ("" when explained as text).
		field string
		text  string
		lines string
	}{
		{name: "path", content: "/scratch/runs/job-41/rank0.log", field: "/scratch/runs/job-41/rank0.log"},
		{name: "path with a trailing newline", content: "train.log\r", field: "train.log"},
		{name: "home path with a space", content: "~/my runs/train.log", field: "~/my runs/train.log"},
		// Terminals send pasted newlines as carriage returns.
		{name: "several lines", content: "[rank0]: line one\r[rank0]: line two\r[rank0]: line three\r", text: "[rank0]: line one\n[rank0]: line two\n[rank0]: line three\n", lines: "pasted text (3 lines)"},
		{name: "crlf", content: "a\r\nb", text: "a\nb", lines: "pasted text (2 lines)"},
		{name: "one log line", content: "[rank2]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error",
			text: "[rank2]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error", lines: "pasted text (1 line)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &pasteWorld{}
			m := press(t, newTestModel(t, w.deps()), "2")
			if m.Stage() != flow.Log {
				t.Fatalf("stage %s", m.Stage())
			}
			m = drive(t, m, paste(c.content))
			if c.field != "" {
				if got := m.logx.input.Value(); got != c.field || len(w.texts) > 0 || len(w.paths) > 0 {
					t.Fatalf("field %q (explained %q %q), want %q in the field", got, w.paths, w.texts, c.field)
				}
				m = press(t, m, "enter")
				if len(w.paths) != 1 || w.paths[0] != c.field {
					t.Fatalf("explained paths %q", w.paths)
				}
				return
			}
			if len(w.texts) != 1 || w.texts[0] != c.text {
				t.Fatalf("explained texts %q, want %q", w.texts, c.text)
			}
			v := view(m)
			if !strings.Contains(v, c.lines) || !strings.Contains(v, "Next:     - resize /dev/shm") || !strings.Contains(v, "g opens the guide shm-no-space (1 of 2;") {
				t.Fatalf("log view:\n%s", v)
			}
			fits(t, m, "pasted log")
			if !strings.Contains(v, "esc back") {
				t.Errorf("the help bar lost keys at 80 columns:\n%s", v)
			}
			m = press(t, m, "down")
			if v := view(m); !strings.Contains(v, "g opens the guide consequence-errors (2 of 2;") {
				t.Errorf("down does not choose the second guide:\n%s", v)
			}
			m = press(t, m, "g")
			if m.Stage() != flow.Explain {
				t.Errorf("down, g: stage %s, want the guide", m.Stage())
			}
		})
	}
}

// A paste on the result screen starts over with it; a paste too big is
// refused with a message, and nothing is explained.
func TestLogPasteAgainAndTooBig(t *testing.T) {
	w := &pasteWorld{}
	m := press(t, newTestModel(t, w.deps()), "2")
	m = drive(t, m, paste("x\ny\n"))
	m = drive(t, m, paste("/var/log/train.log"))
	if !m.logx.input.Focused() || m.logx.input.Value() != "/var/log/train.log" {
		t.Fatalf("paste of a path on the result screen: focused %v, value %q", m.logx.input.Focused(), m.logx.input.Value())
	}
	m = drive(t, m, keytest.Press("esc"))
	m = press(t, m, "2")
	m = drive(t, m, paste(strings.Repeat("[rank0]: NCCL INFO filler\n", MaxPaste/26+1)))
	if len(w.texts) != 1 {
		t.Fatalf("a paste over %d bytes was explained (%d texts)", MaxPaste, len(w.texts))
	}
	v := view(m)
	if !strings.Contains(v, "8 MiB") || !strings.Contains(v, "ncclwiz explain FILE") {
		t.Errorf("too-big paste:\n%s", v)
	}
	fits(t, m, "too-big paste")
}

// Pasted bytes never reach the terminal raw: the field drops control
// characters (ESC among them).
func TestLogPasteEscapes(t *testing.T) {
	m := press(t, newTestModel(t, (&pasteWorld{}).deps()), "2")
	m = drive(t, m, paste("/tmp/\x1b]0;owned\x07run.log"))
	if raw := m.View().Content; strings.Contains(raw, "\x1b]0;") || strings.Contains(raw, "\x07") {
		t.Errorf("the pasted escape reached the screen: %q", raw)
	}
}

// An error is wrapped to the width, not cut; the placeholder reads fully.
func TestLogErrorWraps(t *testing.T) {
	m := press(t, newTestModel(t, (&pasteWorld{}).deps()), "2")
	if v := view(m); !strings.Contains(v, "or paste the log") {
		t.Errorf("placeholder cut:\n%s", v)
	}
	long := "/scratch/a-rather-long-directory-name/another-long-directory/run-2026-11-24/rank0.log"
	m = drive(t, m, paste(long))
	m = press(t, m, "enter")
	v := view(m)
	var joined strings.Builder // the lines as one, to see the path whole
	for _, l := range strings.Split(v, "\n") {
		joined.WriteString(strings.TrimRight(l, " "))
	}
	if !strings.Contains(joined.String(), long+": no such file or directory") {
		t.Errorf("error not shown in full:\n%s", v)
	}
	fits(t, m, "error")
}

// Every text field of the wizard takes a paste (the guide browser's are
// guideui's: see its paste test).
func TestPasteReachesEveryField(t *testing.T) {
	w := &fakeWorld{}
	d := w.deps()
	d.ClusterCheck = func(context.Context, string, func(string)) (ClusterReport, error) { return ClusterReport{}, nil }
	d.MultiNode = "MASTER_ADDR is another machine"

	// Summary's export path.
	m := newTestModel(t, d)
	m = press(t, m, "enter")
	m = drive(t, m, gotoMsg{flow.Summary})
	m = press(t, m, "e", "ctrl+u")
	m = drive(t, m, paste("/tmp/fix.sh"))
	if got := m.summary.input.Value(); got != "/tmp/fix.sh" {
		t.Errorf("summary export field after paste: %q", got)
	}

	// The nodes list.
	m = newTestModel(t, d)
	m = press(t, m, "enter")
	m = drive(t, m, gotoMsg{flow.Nodes})
	m = press(t, m, "ctrl+u")
	m = drive(t, m, paste("gpu[01-04]"))
	if got := m.nodes.input.Value(); got != "gpu[01-04]" {
		t.Errorf("nodes field after paste: %q", got)
	}

}
