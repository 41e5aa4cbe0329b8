package tui

import (
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

type startItem struct {
	title, desc string
	stage       flow.Stage
}

type startModel struct {
	c      *common
	items  []startItem
	cursor int
}

func newStartModel(c *common) startModel {
	return startModel{c: c, items: []startItem{
		{"Diagnose this machine", "run read-only checks, explain what is wrong, fix it with your consent, validate", flow.Detect},
		{"Explain a log", "point at the failing job's output; ncclwiz names the root cause", flow.Log},
		{"My job is hanging", "a running job prints nothing: find which rank is stuck, where, and why (read-only)", flow.Hang},
		{"Learn", "the onboarding track: NCCL, its transports, reading NCCL_DEBUG, /dev/shm, timeouts", flow.Learn},
		{"Browse guides", "every guide, searchable, offline", flow.Guides},
	}}
}

func (m startModel) update(msg tea.Msg) (startModel, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return m, nil
	}
	switch k.String() {
	case "up", "k":
		m.cursor = (m.cursor + len(m.items) - 1) % len(m.items)
	case "down", "j":
		m.cursor = (m.cursor + 1) % len(m.items)
	case "1", "2", "3", "4", "5":
		m.cursor = int(k.String()[0] - '1')
		return m, goTo(m.items[m.cursor].stage)
	case "enter", "right", "l":
		return m, goTo(m.items[m.cursor].stage)
	}
	return m, nil
}

func (m startModel) view() string {
	st := m.c.st
	var b strings.Builder
	b.WriteString(st.title.Render("An NCCL job failed? Let's find out why.") + "\n\n")
	where := "this machine"
	if h := m.c.deps.Host; h != nil {
		where = textsafe.Sanitize(h.Name)
		if h.Simulated {
			where += " (a simulated practice server: fixes change the simulation only)"
		}
	}
	b.WriteString(wrapText("ncclwiz checks "+where+" — /dev/shm, processes, GPUs, environment and network — "+
		"explains what it finds, and fixes it only after showing you exactly what will change and getting your yes.", m.c.width) + "\n\n")
	for i, it := range m.items {
		cur := "  "
		title := it.title
		if i == m.cursor {
			cur = st.sel.Render(st.m.cursor + " ")
			title = st.sel.Render(title)
		}
		b.WriteString(cur + string(rune('1'+i)) + ". " + title + "\n")
		for _, l := range textwrap.Lines(it.desc, m.c.width-5) {
			b.WriteString("     " + st.dim.Render(l) + "\n")
		}
	}
	return b.String()
}

func (m startModel) keys() [][2]string {
	return [][2]string{{"↑/↓", "move"}, {"enter", "choose"}, {"1-5", "jump"}}
}

// wrapText wraps plain text at width (word boundaries, terminal cells).
func wrapText(s string, width int) string { return strings.Join(textwrap.Lines(s, width), "\n") }
