package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

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
	list   listView
	choose key.Binding
	jump   key.Binding
}

func newStartModel(c *common) startModel {
	m := startModel{c: c, items: []startItem{
		{"Diagnose this machine", "read-only checks, what is wrong and why, fixes with your consent, a test", flow.Detect},
		{"Explain a log", "point at the failing job's output; ncclwiz names the root cause", flow.Log},
		{"My job is hanging", "a running job is silent: which rank is stuck, where and why (read-only)", flow.Hang},
		{"Learn", "the onboarding track: NCCL, transports, NCCL_DEBUG, /dev/shm, timeouts", flow.Learn},
		{"Browse guides", "every guide, searchable, offline", flow.Guides},
	}}
	// A row is the title and, under it, its description (clipped in
	// narrow windows).
	m.list = newListView(c.list, 2, true)
	m.list.setRows(len(m.items))
	m.choose = bind("enter", "choose", "enter", "right", "l")
	var digits []string
	for i := range m.items {
		digits = append(digits, string(rune('1'+i)))
	}
	m.jump = bind(fmt.Sprintf("1-%d", len(m.items)), "jump", digits...)
	return m
}

func (m startModel) update(msg tea.Msg) (startModel, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok || m.list.update(k) {
		return m, nil
	}
	switch {
	case key.Matches(k, m.jump):
		m.list.selectRow(int(k.String()[0] - '1'))
		return m, goTo(m.items[m.list.index()].stage)
	case key.Matches(k, m.choose):
		return m, goTo(m.items[m.list.index()].stage)
	}
	return m, nil
}

// intro is the paragraph above the menu; it gives way to the menu when
// the window is too short for both.
func (m startModel) intro() string {
	where := "this machine"
	if h := m.c.deps.Host; h != nil {
		where = textsafe.Sanitize(h.Name)
		if h.Simulated {
			where += " (a simulated practice server: fixes change the simulation only)"
		}
	}
	text := wrapText("ncclwiz checks "+where+" — /dev/shm, processes, GPUs, environment and network — "+
		"explains what it finds, and fixes it only after showing you exactly what will change and getting your yes.", m.c.width)
	if m.c.bodyHeight()-2-lipgloss.Height(text)-1 < len(m.items)*m.list.rowH {
		return ""
	}
	return text + "\n\n"
}

func (m startModel) view() string {
	st := m.c.st
	intro := m.intro()
	m.list.setSize(m.c.width, m.c.bodyHeight()-2-lipgloss.Height(intro)+1)
	return st.title.Render("An NCCL job failed? Let's find out why.") + "\n\n" + intro + m.list.view(m.row, st.dim)
}

// row draws menu entry i: number, title, and its description below.
func (m startModel) row(i int, selected bool) string {
	st := m.c.st
	it := m.items[i]
	cur, title := "  ", it.title
	if selected {
		cur, title = st.sel.Render(st.m.cursor+" "), st.sel.Render(title)
	}
	return cur + string(rune('1'+i)) + ". " + title + "\n     " + st.dim.Render(textwrap.Clip(it.desc, m.c.width-5))
}

func (m startModel) keyMap() keyMap {
	return keyMap{Short: []key.Binding{m.c.list.Move("move"), m.choose, m.jump}}
}

// wrapText wraps plain text at width (word boundaries, terminal cells); a
// word longer than the line (a path) is broken too, so nothing overflows
// to be cut.
func wrapText(s string, width int) string {
	lines := textwrap.Lines(s, width)
	for i, l := range lines {
		if width > 0 && ansi.StringWidth(l) > width {
			lines[i] = ansi.Wrap(l, width, "/")
		}
	}
	return strings.Join(lines, "\n")
}

// renderLines styles each line of s on its own: lipgloss pads a
// multi-line string to its widest line.
func renderLines(st lipgloss.Style, s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = st.Render(l)
	}
	return strings.Join(lines, "\n")
}
