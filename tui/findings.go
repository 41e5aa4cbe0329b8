package tui

import (
	"fmt"
	"sort"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/report"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

type findingsModel struct {
	c       *common
	keys    findingsKeys
	all     []checks.Finding
	shown   []checks.Finding
	list    listView
	showAll bool
	// detail scrolls the selected finding's detail and full evidence.
	detail pager
}

type findingsKeys struct {
	Guide, All, Nodes, Continue key.Binding
}

func newFindingsModel(c *common) findingsModel {
	return findingsModel{
		c: c,
		keys: findingsKeys{
			Guide:    bind("g", "guide", "g"),
			All:      bind("a", "all/problems", "a"),
			Nodes:    bind("n", "check all nodes", "n"),
			Continue: bind("enter", "continue", "enter", "right", "l"),
		},
		list:   newListView(c.list, 1, false),
		detail: newPager(),
	}
}

// selected is the finding under the cursor.
func (m findingsModel) selected() (checks.Finding, bool) {
	if i := m.list.index(); i < len(m.shown) {
		return m.shown[i], true
	}
	return checks.Finding{}, false
}

func (m *findingsModel) load(rs []checks.Result) {
	m.all = nil
	for _, f := range checks.Flatten(rs) {
		m.all = append(m.all, report.SanitizeFinding(f))
	}
	sort.SliceStable(m.all, func(i, j int) bool { return m.all[i].Severity.Rank() < m.all[j].Severity.Rank() })
	m.filter()
}

func (m *findingsModel) filter() {
	m.shown = nil
	for _, f := range m.all {
		if m.showAll || f.Severity.IsProblem() || f.Severity == checks.Skipped {
			m.shown = append(m.shown, f)
		}
	}
	m.list.setRows(len(m.shown))
	m.refresh()
}

func (m findingsModel) update(msg tea.Msg) (findingsModel, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return m, nil
	}
	m, cmd := m.key(k)
	m.refresh()
	return m, cmd
}

func (m findingsModel) key(k tea.KeyPressMsg) (findingsModel, tea.Cmd) {
	if m.detail.scroll(k.String(), false) || m.list.update(k) {
		return m, nil
	}
	switch {
	case key.Matches(k, m.keys.All):
		m.showAll = !m.showAll
		m.filter()
	case key.Matches(k, m.keys.Guide):
		if f, ok := m.selected(); ok && f.Guide != "" {
			id := f.Guide
			return m, func() tea.Msg { return openGuideMsg{id: id} }
		}
	case key.Matches(k, m.keys.Nodes):
		if m.c.nodesOffered() {
			return m, goTo(flow.Nodes)
		}
	case key.Matches(k, m.keys.Continue):
		return m, goTo(flow.Explain)
	}
	return m, nil
}

func (m findingsModel) view() string {
	st := m.c.st
	var b strings.Builder
	e, w := checks.Problems(m.all)
	skipped := 0
	for _, f := range m.all {
		if f.Severity == checks.Skipped {
			skipped++
		}
	}
	switch {
	case e+w == 0:
		b.WriteString(st.ok.Render(st.m.ok+" No problems found.") + " ")
	default:
		b.WriteString(st.title.Render(fmt.Sprintf("%s: %s, %s.", units.Count(e+w, "problem"), units.Count(e, "error"), units.Count(w, "warning"))) + " ")
	}
	if skipped > 0 {
		b.WriteString(st.dim.Render(fmt.Sprintf("%s not run here.", units.Count(skipped, "check was", "checks were"))))
	}
	b.WriteString("\n\n")
	if len(m.shown) == 0 {
		b.WriteString(st.dim.Render("Nothing to show; press a to list every check result.") + "\n")
		return b.String()
	}
	b.WriteString(m.list.view(m.row, st.dim) + "\n")
	b.WriteString("\n" + m.detail.view() + "\n")
	b.WriteString(st.dim.Render(truncate(m.detail.position(), m.c.width)))
	return b.String()
}

// row draws finding i of the list.
func (m findingsModel) row(i int, selected bool) string {
	st := m.c.st
	f := m.shown[i]
	text := fmt.Sprintf("%-14s %s", f.Check, f.Title)
	if selected {
		return st.sel.Render(st.m.cursor) + " " + st.mark(f.Severity) + " " + st.sel.Render(text)
	}
	return "  " + st.mark(f.Severity) + " " + text
}

// refresh puts the selected finding's detail, every evidence line and its
// hints into the pager, sized to what the list leaves.
func (m *findingsModel) refresh() {
	if m.c == nil {
		return
	}
	if m.detail.vp.Width() == 0 {
		m.detail = newPager()
	}
	// The list's room holds its rows and, when it pages, its position line.
	m.list.setSize(m.c.width, max(m.c.bodyHeight()/2-2, 3)+1)
	used := 2 + m.list.height() + 1 + 1 // summary, blank, list, blank, pager position line
	m.detail.set(m.detailText(), m.c.width, m.c.bodyHeight()-used)
}

func (m findingsModel) detailText() string {
	f, ok := m.selected()
	if !ok {
		return ""
	}
	st := m.c.st
	var b strings.Builder
	if f.Detail != "" {
		b.WriteString(wrapText(f.Detail, m.c.width-2) + "\n")
	}
	for _, l := range evidenceLines(f.Evidence) {
		b.WriteString(st.dim.Render(truncate("  "+l, m.c.width)) + "\n")
	}
	var hints []string
	if f.Guide != "" {
		hints = append(hints, "g: guide "+f.Guide)
	}
	if len(f.Fixes) > 0 {
		hints = append(hints, "fixes: "+strings.Join(f.Fixes, ", "))
	}
	if len(hints) > 0 {
		b.WriteString(st.hint.Render(truncate(strings.Join(hints, " · "), m.c.width)) + "\n")
	}
	return b.String()
}

// evidenceLines renders every line of evidence the wizard shows.
func evidenceLines(ev map[string]any) []string {
	var out []string
	for _, l := range report.EvidenceLines(ev) {
		if strings.HasPrefix(l, "recommended_env_reason") {
			continue
		}
		out = append(out, l)
	}
	return out
}

func (m findingsModel) keyMap() keyMap {
	k := keyMap{Short: []key.Binding{m.c.list.Move("select"), m.keys.Guide}}
	if m.c.nodesOffered() {
		k.Short = append(k.Short, m.keys.Nodes)
	}
	k.Short = append(k.Short, m.keys.All, m.keys.Continue)
	if m.detail.scrolls() {
		k.Short = append(k.Short, m.c.list.Scroll)
	}
	return k
}
