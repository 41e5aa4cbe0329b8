package tui

import (
	"context"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// nodesModel is "Check all nodes", a side trip from Findings for a
// multi-node job: ask for the node list, run the cluster check in a
// tea.Cmd, show the aggregated table.
type nodesModel struct {
	c       *common
	input   textinput.Model
	running bool
	run     int
	cancel  context.CancelFunc
	doing   string
	report  *ClusterReport
	err     string
	out     pager
}

func newNodesModel(c *common) nodesModel {
	in := textinput.New()
	in.Prompt = "nodes: "
	in.Placeholder = "gpu01,gpu02 or gpu[01-04] (the job's nodes)"
	in.SetValue(c.deps.NodeList)
	in.SetWidth(60)
	return nodesModel{c: c, input: in, out: newPager()}
}

// nodesOffered reports whether Findings offers "Check all nodes": only for
// a job that looks multi-node.
func (c *common) nodesOffered() bool { return c.deps.MultiNode != "" && c.deps.ClusterCheck != nil }

func (m *nodesModel) enter() tea.Cmd {
	if m.running || m.report != nil {
		return nil
	}
	return m.input.Focus()
}

func (m *nodesModel) stop() {
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
	}
	m.running = false
}

func (m nodesModel) work(w workMsg) (nodesModel, tea.Cmd) {
	if w.run != m.run || !m.running {
		return m, w.next()
	}
	if !w.done {
		if w.line != "" {
			m.doing = w.line
		}
		return m, w.next()
	}
	m.stop()
	if w.err != nil {
		m.err = w.err.Error()
		return m, nil
	}
	if r, ok := w.val.(ClusterReport); ok {
		m.report = &r
		m.refresh()
	}
	return m, nil
}

func (m nodesModel) update(msg tea.Msg) (nodesModel, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		if m.input.Focused() {
			var cmd tea.Cmd
			m.input, cmd = m.input.Update(msg)
			return m, cmd
		}
		return m, nil
	}
	s := k.String()
	if m.input.Focused() {
		switch s {
		case "enter":
			list := strings.TrimSpace(m.input.Value())
			if list == "" {
				m.err = "Type the job's nodes first (comma-separated, ranges like gpu[01-04] work)."
				return m, nil
			}
			m.input.Blur()
			m.err, m.report, m.running = "", nil, true
			m.doing = "starting the check on every node"
			m.run++
			ctx, cancel := context.WithCancel(m.c.ctx)
			m.cancel = cancel
			check := m.c.deps.ClusterCheck
			return m, startWork("nodes", m.run, func(progress func(string)) (any, error) { return check(ctx, list, progress) })
		case "esc":
			m.input.Blur()
			return m, goTo(flow.Findings)
		}
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		return m, cmd
	}
	if m.running {
		if s == "esc" {
			m.stop()
			m.doing = ""
			return m, m.input.Focus()
		}
		return m, nil
	}
	if m.report != nil && m.out.scroll(s, true) {
		return m, nil
	}
	switch s {
	case "o", "e":
		m.report, m.err = nil, ""
		return m, m.input.Focus()
	case "esc", "left", "h":
		return m, goTo(flow.Findings)
	}
	return m, nil
}

func (m *nodesModel) refresh() {
	m.input.SetWidth(max(m.c.width-len(m.input.Prompt)-2, 10))
	if m.report == nil || m.report.Render == nil {
		return
	}
	m.out.set(m.report.Render(m.c.width-1)+"\n\n"+wrapText("Logs from several nodes: `ncclwiz explain node1.log node2.log …` reads them together and names the rank that failed first.", m.c.width-1),
		m.c.width, m.c.bodyHeight()-4)
}

func (m nodesModel) view() string {
	st := m.c.st
	var b strings.Builder
	b.WriteString(st.title.Render("Check all nodes") + "\n\n")
	if m.c.deps.ClusterCheck == nil {
		return b.String() + "The cluster check is not available in this build."
	}
	switch {
	case m.input.Focused():
		why := "Give the job's nodes"
		if m.c.deps.MultiNode != "" {
			why = "This job looks multi-node (" + textsafe.Clean(m.c.deps.MultiNode) + ")"
		}
		b.WriteString(wrapText(why+". ncclwiz runs `ncclwiz check --json` on every node (over Slurm, pdsh or ssh — read-only) and names the node that differs.", m.c.width-2) + "\n\n")
		b.WriteString(m.input.View() + "\n")
		if m.err != "" {
			b.WriteString("\n" + st.err.Render(wrapText(textsafe.Clean(m.err), m.c.width-2)) + "\n")
		}
		b.WriteString("\n" + st.dim.Render(wrapText("The same as `ncclwiz cluster check --hosts LIST` (or --slurm inside an allocation); the CLI also has --mesh, --hostfile and --from-json.", m.c.width-2)))
	case m.running:
		b.WriteString(m.c.spin + " " + textwrap.String(textsafe.Clean(m.doing)+"…", m.c.width-3, "  ") + "\n\n")
		b.WriteString(st.dim.Render("Esc stops and goes back to the node list."))
	case m.err != "":
		// The help bar names o and esc: said once.
		b.WriteString(st.err.Render(wrapText(textsafe.Clean(m.err), m.c.width-2)) + "\n")
	case m.report != nil:
		sum := st.ok.Render(textsafe.Clean(m.report.Summary))
		if len(m.report.Suspects) > 0 {
			sum = st.warn.Render(textsafe.Clean(m.report.Summary))
		}
		b.WriteString(wrapText(sum, m.c.width-1) + "\n")
		b.WriteString(m.out.view() + "\n")
		b.WriteString(st.dim.Render(truncate(m.out.position(), m.c.width)))
	}
	return b.String()
}

func (m nodesModel) keyMap() keyMap {
	back := bind("esc", "back", "esc")
	switch {
	case m.input.Focused():
		return keyMap{Short: []key.Binding{bind("enter", "check the nodes", "enter"), back}}
	case m.running:
		return keyMap{Short: []key.Binding{bind("esc", "stop", "esc")}}
	}
	var k keyMap
	if m.out.scrolls() && m.report != nil {
		k.Short = append(k.Short, bind("↑/↓/pgdn", "scroll", "up", "down", "pgup", "pgdown"))
	}
	k.Short = append(k.Short, bind("o", "other nodes", "o", "e"), back)
	return k
}
