package tui

import (
	"fmt"
	"sort"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/report"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

type findingsModel struct {
	c       *common
	all     []checks.Finding
	shown   []checks.Finding
	cursor  int
	showAll bool
	// detail scrolls the selected finding's detail and full evidence.
	detail pager
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
	if m.cursor >= len(m.shown) {
		m.cursor = max(len(m.shown)-1, 0)
	}
	m.refresh()
}

func (m findingsModel) update(msg tea.Msg) (findingsModel, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return m, nil
	}
	m, cmd := m.key(k.String())
	m.refresh()
	return m, cmd
}

func (m findingsModel) key(k string) (findingsModel, tea.Cmd) {
	if m.detail.scroll(k, false) {
		return m, nil
	}
	switch k {
	case "up", "k":
		if m.cursor > 0 {
			m.cursor--
		}
	case "down", "j":
		if m.cursor < len(m.shown)-1 {
			m.cursor++
		}
	case "a":
		m.showAll = !m.showAll
		m.filter()
	case "g":
		if m.cursor < len(m.shown) && m.shown[m.cursor].Guide != "" {
			id := m.shown[m.cursor].Guide
			return m, func() tea.Msg { return openGuideMsg{id: id} }
		}
	case "n":
		if m.c.nodesOffered() {
			return m, goTo(flow.Nodes)
		}
	case "enter", "right", "l":
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
	top, listH := m.listWindow()
	for i := top; i < min(top+listH, len(m.shown)); i++ {
		f := m.shown[i]
		cur := "  "
		if i == m.cursor {
			cur = st.sel.Render(st.m.cursor) + " "
		}
		line := fmt.Sprintf("%s%s %-14s %s", cur, st.mark(f.Severity), f.Check, f.Title)
		if i == m.cursor {
			line = cur + st.mark(f.Severity) + " " + st.sel.Render(fmt.Sprintf("%-14s %s", f.Check, f.Title))
		}
		b.WriteString(truncate(line, m.c.width) + "\n")
	}
	if len(m.shown) > listH {
		b.WriteString(st.dim.Render(fmt.Sprintf("  (%d of %d)", m.cursor+1, len(m.shown))) + "\n")
	}
	b.WriteString("\n" + m.detail.view() + "\n")
	b.WriteString(st.dim.Render(truncate(m.detail.position(), m.c.width)))
	return b.String()
}

// listWindow is the first visible row and the height of the list.
func (m findingsModel) listWindow() (top, h int) {
	h = min(len(m.shown), max(m.c.bodyHeight()/2-2, 3))
	if m.cursor >= h {
		top = m.cursor - h + 1
	}
	return top, h
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
	_, listH := m.listWindow()
	used := 2 + listH + 1 + 1 // summary, blank, list, blank, position line
	if len(m.shown) > listH {
		used++
	}
	m.detail.set(m.detailText(), m.c.width, m.c.bodyHeight()-used)
}

func (m findingsModel) detailText() string {
	if m.cursor >= len(m.shown) {
		return ""
	}
	st := m.c.st
	f := m.shown[m.cursor]
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

func (m findingsModel) keys() [][2]string {
	ks := [][2]string{{"↑/↓", "select"}, {"g", "guide"}}
	if m.c.nodesOffered() {
		ks = append(ks, [2]string{"n", "check all nodes"})
	}
	ks = append(ks, [2]string{"a", "all/problems"}, [2]string{"enter", "continue"})
	if m.detail.scrolls() {
		ks = append(ks, [2]string{"pgup/pgdn", "scroll"})
	}
	return ks
}
