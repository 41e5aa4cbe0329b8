package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

type logDoneMsg struct {
	res LogResult
	err error
}

// logModel asks for a log file and shows the explainer's diagnosis.
type logModel struct {
	c       *common
	input   textinput.Model
	running bool
	result  *LogResult
	err     error
	cursor  int
}

func newLogModel(c *common) logModel {
	in := textinput.New()
	in.Prompt = "log file: "
	in.Placeholder = "path to the failing job's output (e.g. train.log, rank0.log.gz)"
	return logModel{c: c, input: in}
}

func (m *logModel) focus() tea.Cmd {
	if m.result != nil || m.running {
		return nil
	}
	return m.input.Focus()
}

func (m logModel) update(msg tea.Msg) (logModel, tea.Cmd) {
	switch msg := msg.(type) {
	case logDoneMsg:
		m.running = false
		m.result, m.err = &msg.res, msg.err
		if msg.err != nil {
			m.result = nil
		}
		return m, nil
	case tea.KeyPressMsg:
		if m.input.Focused() {
			switch msg.String() {
			case "enter":
				path := strings.TrimSpace(m.input.Value())
				if path == "" || m.c.deps.ExplainLog == nil {
					return m, nil
				}
				m.input.Blur()
				m.running, m.err, m.result = true, nil, nil
				c := m.c
				return m, func() tea.Msg {
					r, err := c.deps.ExplainLog(c.ctx, path)
					return logDoneMsg{res: r, err: err}
				}
			case "esc":
				m.input.Blur()
				return m, goTo(flow.Start)
			}
			var cmd tea.Cmd
			m.input, cmd = m.input.Update(msg)
			return m, cmd
		}
		if m.running {
			return m, nil
		}
		switch msg.String() {
		case "up", "k":
			if m.cursor > 0 {
				m.cursor--
			}
		case "down", "j":
			if m.result != nil && m.cursor < len(m.result.Diagnoses)-1 {
				m.cursor++
			}
		case "g", "enter":
			if m.result != nil && m.cursor < len(m.result.Diagnoses) && m.result.Diagnoses[m.cursor].Guide != "" {
				id := m.result.Diagnoses[m.cursor].Guide
				return m, func() tea.Msg { return openGuideMsg{id: id, back: flow.Log} }
			}
		case "o":
			m.result, m.err, m.cursor = nil, nil, 0
			return m, m.input.Focus()
		case "d":
			return m, goTo(flow.Detect)
		case "esc":
			return m, goTo(flow.Start)
		}
	}
	return m, nil
}

func (m logModel) view() string {
	st := m.c.st
	var b strings.Builder
	b.WriteString(st.title.Render("Explain a failing log") + "\n\n")
	if m.c.deps.ExplainLog == nil {
		return b.String() + "The log explainer is not available in this build."
	}
	if m.input.Focused() || (m.result == nil && !m.running && m.err == nil) {
		b.WriteString(m.input.View() + "\n\n")
		b.WriteString(st.dim.Render(wrapText("Tip: save the output with `torchrun … 2>&1 | tee train.log`; several ranks' files can be explained together with `ncclwiz explain rank*.log`.", m.c.width-2)))
		return b.String()
	}
	if m.running {
		return b.String() + st.dim.Render("reading the log…")
	}
	if m.err != nil {
		return b.String() + st.err.Render(textsafe.Clean(m.err.Error())) + "\n\n" + st.dim.Render("press o to open another file")
	}
	r := m.result
	if r.Version != "" {
		b.WriteString(st.dim.Render("NCCL "+textsafe.Sanitize(r.Version)) + "\n")
	}
	b.WriteString(wrapText(textsafe.Clean(r.Summary), m.c.width-2) + "\n\n")
	for i, d := range r.Diagnoses {
		cur := "  "
		title := textsafe.Clean(d.Title)
		if i == m.cursor {
			cur = st.sel.Render(st.m.cursor) + " "
			title = st.sel.Render(title)
		}
		role := "consequence"
		if d.RootCause {
			role = "root cause"
		}
		b.WriteString(truncate(fmt.Sprintf("%s%s  %s", cur, title, st.dim.Render(role+", "+d.Confidence+" confidence")), m.c.width) + "\n")
		if i == m.cursor {
			for j, e := range d.Evidence {
				if j == 3 {
					break
				}
				b.WriteString(st.dim.Render(truncate("    "+textsafe.Clean(e), m.c.width)) + "\n")
			}
		}
	}
	for _, l := range r.Digest {
		b.WriteString(st.dim.Render(truncate(textsafe.Clean(l), m.c.width)) + "\n")
	}
	if r.Nodes > 1 {
		b.WriteString("\n" + st.hint.Render(wrapText(fmt.Sprintf("This job ran on %d nodes: most multi-node failures are a difference between nodes. "+
			"`ncclwiz cluster check --hosts NODE,NODE…` (or --slurm) compares them; the wizard's Findings offers it (n) when run in the job's environment.", r.Nodes), m.c.width-2)) + "\n")
	}
	return b.String()
}

func (m logModel) keys() [][2]string {
	if m.input.Focused() {
		return [][2]string{{"enter", "explain"}, {"esc", "back"}}
	}
	return [][2]string{{"↑/↓", "select"}, {"g", "guide"}, {"d", "check this machine"}, {"o", "other file"}, {"esc", "start"}}
}
