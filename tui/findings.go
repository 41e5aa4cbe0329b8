package tui

import (
	"fmt"
	"sort"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
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
	Guide, All, Nodes, Continue, Recheck, Log, Hang key.Binding
}

func newFindingsModel(c *common) findingsModel {
	return findingsModel{
		c: c,
		keys: findingsKeys{
			Guide:    bind("g", "guide", "g"),
			All:      bind("a", "all/problems", "a"),
			Nodes:    bind("n", "check all nodes", "n"),
			Continue: bind("enter", "next", "enter", "right"),
			Recheck:  recheckKey,
			Log:      bind("l", "explain a log", "l"),
			Hang:     bind("h", "is it hanging?", "h"),
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
		if m.nodesOffered() {
			return m, goTo(flow.Nodes)
		}
	case key.Matches(k, m.keys.Log):
		return m, goTo(flow.Log)
	case key.Matches(k, m.keys.Hang):
		return m, goTo(flow.Hang)
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
	if e+w == 0 && !m.showAll {
		// A healthy machine is not a dead end: the job still died. (a
		// lists the checks, those that could not run included.)
		return b.String() + m.nextSteps()
	}
	if len(m.shown) == 0 {
		b.WriteString(st.dim.Render("Nothing to show; press a to list every check result.") + "\n")
		return b.String()
	}
	b.WriteString(m.list.view(m.row, st.dim) + "\n")
	b.WriteString("\n" + m.detail.view() + "\n")
	b.WriteString(st.dim.Render(truncate(m.detail.position(), m.c.width)))
	return b.String()
}

// nextSteps is what a healthy result offers: the job still failed, so the
// cause is in its log, on another node, or in a job that hangs.
func (m findingsModel) nextSteps() string {
	st := m.c.st
	w := m.c.width - 2
	var b strings.Builder
	b.WriteString(wrapText("Nothing on this machine explains an NCCL failure. If your job still died or hangs, the next step is:", w) + "\n")
	item := func(k, text string) {
		b.WriteString("  " + st.key.Render(k) + "  " + textwrap.String(text, w-5, "     ") + "\n")
	}
	if m.c.deps.ExplainLog != nil {
		item("l", "explain the job's log: the error names what failed, and on which rank")
	}
	if m.c.deps.HangJobs != nil {
		item("h", "my job is hanging: which rank is stuck, and where (read-only)")
	}
	if m.nodesOffered() {
		item("n", "check the other nodes of the job: most multi-node failures are a difference between nodes")
	}
	item("r", "check this machine again (after the job ran or failed once more)")
	item("a", "list every check result")
	return b.String()
}

// nodesOffered: the cluster check is offered for a multi-node job, and
// whenever this machine looks healthy (the problem may be on another node).
func (m findingsModel) nodesOffered() bool {
	if m.c.nodesOffered() {
		return true
	}
	e, w := checks.Problems(m.all)
	return e+w == 0 && m.c.deps.ClusterCheck != nil
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
	// The title whole (its row may be cut), then what it means.
	if lipgloss.Width(fmt.Sprintf("    %-14s %s", f.Check, f.Title)) > m.c.width {
		b.WriteString(st.title.Render(wrapText(f.Title, m.c.width-2)) + "\n")
	}
	if f.Detail != "" {
		b.WriteString(wrapText(f.Detail, m.c.width-2) + "\n")
	}
	// Evidence for people, wrapped (the raw keys are in --json).
	for _, l := range report.HumanEvidence(f.Evidence) {
		for _, wl := range report.WrapEvidence("  "+l, m.c.width) {
			b.WriteString(st.dim.Render(wl) + "\n")
		}
	}
	var hints []string
	if f.Guide != "" {
		hints = append(hints, "g: guide "+f.Guide)
	}
	if len(f.Fixes) > 0 {
		hints = append(hints, "fixes: "+strings.Join(f.Fixes, ", "))
	}
	if len(hints) > 0 {
		b.WriteString(st.hint.Render(wrapText(strings.Join(hints, " · "), m.c.width-2)) + "\n")
	}
	return b.String()
}

func (m findingsModel) keyMap() keyMap {
	e, w := checks.Problems(m.all)
	if e+w == 0 {
		// Healthy: the next steps first.
		var k keyMap
		if m.c.deps.ExplainLog != nil {
			k.Short = append(k.Short, m.keys.Log)
		}
		if m.c.deps.HangJobs != nil {
			k.Short = append(k.Short, m.keys.Hang)
		}
		if m.nodesOffered() {
			k.Short = append(k.Short, m.keys.Nodes)
		}
		k.Short = append(k.Short, m.keys.Recheck, m.keys.All)
		return k
	}
	k := keyMap{Short: []key.Binding{m.c.list.Move("select"), m.keys.Guide}}
	if m.nodesOffered() {
		k.Short = append(k.Short, m.keys.Nodes)
	}
	k.Short = append(k.Short, m.keys.Continue, m.keys.Recheck, m.keys.All)
	if m.detail.scrolls() {
		k.Short = append(k.Short, m.c.list.Scroll)
	}
	return k
}
