package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// openGuideMsg asks the root to show one guide in the Explain stage.
// back is the side stage that asked (Esc returns there); "" is Findings.
type openGuideMsg struct {
	id   string
	back flow.Stage
}

type renderedMsg struct {
	mode, id string
	width    int
	text     string
	err      error
}

// guidesModel is a list of guides plus a scrollable viewer with in-page
// search. The same model serves Explain (guides for the problems found),
// Learn (the onboarding track) and Guides (everything).
type guidesModel struct {
	c    *common
	mode string // "explain", "learn", "browse"
	// back is where Esc returns in explain mode when a side stage opened
	// the guide ("" is Findings).
	back      flow.Stage
	docs      []GuideDoc
	cursor    int
	viewing   bool
	vp        viewport.Model
	rendered  string // current guide, rendered
	plain     []string
	search    textinput.Model
	searching bool
	query     string
	matches   []int
	match     int
	filter    textinput.Model
	filtering bool
	loading   bool
}

func newGuidesModel(c *common, mode string) guidesModel {
	vp := viewport.New(viewport.WithWidth(80), viewport.WithHeight(15))
	si := textinput.New()
	si.Prompt = "/"
	fi := textinput.New()
	fi.Prompt = "filter: "
	return guidesModel{c: c, mode: mode, vp: vp, search: si, filter: fi}
}

// loadIDs fills the list from guide IDs (Explain).
func (m *guidesModel) loadIDs(ids []string) {
	m.docs = nil
	for _, id := range ids {
		if m.c.deps.Guide == nil {
			break
		}
		if g, ok := m.c.deps.Guide(id); ok {
			m.docs = append(m.docs, g)
		}
	}
	if m.cursor >= len(m.docs) {
		m.cursor = 0
	}
}

func (m *guidesModel) loadDocs(ds []GuideDoc) {
	m.docs = ds
	if m.cursor >= len(m.docs) {
		m.cursor = 0
	}
}

// visible returns the docs passing the browse filter.
func (m guidesModel) visible() []int {
	q := strings.ToLower(strings.TrimSpace(m.filter.Value()))
	var out []int
	for i, d := range m.docs {
		if q == "" || strings.Contains(strings.ToLower(d.ID+" "+d.Title+" "+d.Summary), q) {
			out = append(out, i)
		}
	}
	return out
}

// open renders doc i in the background and shows it.
func (m *guidesModel) open(i int) tea.Cmd {
	if i < 0 || i >= len(m.docs) {
		m.viewing = false
		return nil
	}
	m.cursor, m.viewing, m.loading = i, true, true
	m.query, m.matches = "", nil
	return m.renderCmd()
}

func (m guidesModel) renderCmd() tea.Cmd {
	if m.cursor >= len(m.docs) {
		return nil
	}
	d, width, mode, render := m.docs[m.cursor], m.textWidth(), m.mode, m.c.deps.Render
	return func() tea.Msg {
		md := d.Markdown
		if !strings.HasPrefix(md, "# ") {
			md = "# " + d.Title + "\n\n" + md
		}
		if render == nil {
			return renderedMsg{mode: mode, id: d.ID, width: width, text: md}
		}
		out, err := render(md, width)
		return renderedMsg{mode: mode, id: d.ID, width: width, text: out, err: err}
	}
}

func (m guidesModel) textWidth() int { return max(min(m.c.width, 100)-2, 20) }

func (m guidesModel) resize() (guidesModel, tea.Cmd) {
	m.vp.SetWidth(m.c.width)
	m.vp.SetHeight(max(m.c.bodyHeight()-2, 3))
	if m.viewing && len(m.docs) > 0 {
		return m, m.renderCmd() // re-wrap to the new width
	}
	return m, nil
}

func (m guidesModel) update(msg tea.Msg) (guidesModel, tea.Cmd) {
	switch msg := msg.(type) {
	case renderedMsg:
		if msg.mode != m.mode || m.cursor >= len(m.docs) || msg.id != m.docs[m.cursor].ID {
			return m, nil
		}
		m.loading = false
		text := msg.text
		if msg.err != nil {
			text = "Could not render this guide: " + msg.err.Error() + "\n\n" + m.docs[m.cursor].Markdown
		}
		m.rendered = text
		m.plain = strings.Split(ansi.Strip(text), "\n")
		m.vp.SetWidth(m.c.width)
		m.vp.SetHeight(max(m.c.bodyHeight()-2, 3))
		m.vp.SetContent(text)
		m.vp.GotoTop()
		return m, nil
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, nil
}

func (m guidesModel) key(k tea.KeyPressMsg) (guidesModel, tea.Cmd) {
	if m.searching {
		switch k.String() {
		case "enter":
			m.searching = false
			m.search.Blur()
			m.query = m.search.Value()
			m.findMatches()
			m.jump(0)
			return m, nil
		case "esc":
			m.searching = false
			m.search.Blur()
			return m, nil
		}
		var cmd tea.Cmd
		m.search, cmd = m.search.Update(k)
		return m, cmd
	}
	if m.filtering {
		switch k.String() {
		case "enter", "esc":
			m.filtering = false
			m.filter.Blur()
			m.cursor = 0
			return m, nil
		}
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(k)
		m.cursor = 0
		return m, cmd
	}
	if !m.viewing {
		vis := m.visible()
		pos := indexOf(vis, m.cursor)
		switch k.String() {
		case "up", "k":
			if pos > 0 {
				m.cursor = vis[pos-1]
			}
		case "down", "j":
			if pos >= 0 && pos < len(vis)-1 {
				m.cursor = vis[pos+1]
			} else if pos < 0 && len(vis) > 0 {
				m.cursor = vis[0]
			}
		case "/":
			if m.mode == "browse" {
				m.filtering = true
				return m, m.filter.Focus()
			}
		case "enter", "right", "l":
			if len(vis) > 0 {
				if pos < 0 {
					m.cursor = vis[0]
				}
				return m, m.open(m.cursor)
			}
		case "esc", "left", "h":
			if m.mode == "explain" {
				if m.back != "" {
					return m, goTo(m.back)
				}
				return m, goTo(flow.Findings)
			}
			return m, goTo(flow.Start)
		}
		return m, nil
	}
	switch k.String() {
	case "esc", "left", "h", "backspace":
		if m.mode == "learn" {
			return m, goTo(flow.Start)
		}
		if m.mode == "explain" && m.back != "" {
			// Opened from a side stage for one guide: back there at once.
			return m, goTo(m.back)
		}
		m.viewing = false
		return m, nil
	case "/":
		m.searching = true
		m.search.SetValue("")
		return m, m.search.Focus()
	case "n":
		m.jump(1)
		return m, nil
	case "N":
		m.jump(-1)
		return m, nil
	case "]":
		if m.cursor < len(m.docs)-1 {
			return m, m.open(m.cursor + 1)
		}
		return m, nil
	case "[":
		if m.cursor > 0 {
			return m, m.open(m.cursor - 1)
		}
		return m, nil
	case "enter":
		if m.mode == "explain" && m.back == "" {
			return m, goTo(flow.Fix)
		}
	}
	var cmd tea.Cmd
	m.vp, cmd = m.vp.Update(k)
	return m, cmd
}

func indexOf(xs []int, v int) int {
	for i, x := range xs {
		if x == v {
			return i
		}
	}
	return -1
}

func (m *guidesModel) findMatches() {
	m.matches, m.match = nil, -1
	q := strings.ToLower(strings.TrimSpace(m.query))
	if q == "" {
		return
	}
	for i, l := range m.plain {
		if strings.Contains(strings.ToLower(l), q) {
			m.matches = append(m.matches, i)
		}
	}
}

// jump moves to the next (+1), previous (-1) or first (0) match.
func (m *guidesModel) jump(dir int) {
	if len(m.matches) == 0 {
		return
	}
	switch dir {
	case 0:
		m.match = 0
	default:
		m.match = (m.match + dir + len(m.matches)) % len(m.matches)
	}
	m.vp.SetYOffset(max(m.matches[m.match]-2, 0))
}

func (m guidesModel) view() string {
	st := m.c.st
	if len(m.docs) == 0 {
		switch {
		case m.c.deps.GuidesError != "":
			return "Guides could not be loaded: " + m.c.deps.GuidesError
		case m.c.deps.Guide == nil && m.c.deps.AllGuides == nil:
			return "Guides are not available in this build."
		case m.mode == "explain":
			return "No guide matches the problems found."
		}
		return "No guides found."
	}
	if !m.viewing {
		return m.listView()
	}
	var b strings.Builder
	d := m.docs[m.cursor]
	pos := ""
	if len(m.docs) > 1 {
		pos = fmt.Sprintf("  %d/%d", m.cursor+1, len(m.docs))
	}
	b.WriteString(st.dim.Render("guide "+d.ID+pos) + "\n")
	if m.loading {
		b.WriteString(st.dim.Render("rendering…"))
		return b.String()
	}
	b.WriteString(m.vp.View() + "\n")
	status := fmt.Sprintf("%3.0f%%", m.vp.ScrollPercent()*100)
	switch {
	case m.searching:
		status = m.search.View()
	case m.query != "" && len(m.matches) == 0:
		status += "  no match for " + m.query
	case len(m.matches) > 0:
		status += fmt.Sprintf("  match %d/%d for %q", m.match+1, len(m.matches), m.query)
	}
	b.WriteString(st.dim.Render(status))
	return b.String()
}

func (m guidesModel) listView() string {
	st := m.c.st
	var b strings.Builder
	switch m.mode {
	case "explain":
		b.WriteString(st.title.Render("Guides for what was found") + "\n\n")
	case "learn":
		b.WriteString(st.title.Render("Learn: the onboarding track") + "\n\n")
	default:
		b.WriteString(st.title.Render(fmt.Sprintf("%d guides", len(m.docs))) + "\n")
		if m.filtering || m.filter.Value() != "" {
			b.WriteString(m.filter.View())
		}
		b.WriteString("\n")
	}
	vis := m.visible()
	h := max(m.c.bodyHeight()-4, 3)
	pos := max(indexOf(vis, m.cursor), 0)
	top := 0
	if pos >= h {
		top = pos - h + 1
	}
	for j := top; j < min(top+h, len(vis)); j++ {
		d := m.docs[vis[j]]
		cur := "  "
		title := d.Title
		if vis[j] == m.cursor {
			cur = st.sel.Render(st.m.cursor) + " "
			title = st.sel.Render(title)
		}
		line := cur + title + "  " + st.dim.Render(d.Summary)
		b.WriteString(truncate(line, m.c.width) + "\n")
	}
	if len(vis) == 0 {
		b.WriteString(st.dim.Render("no guide matches the filter") + "\n")
	}
	return b.String()
}

func (m guidesModel) keys() [][2]string {
	if m.viewing {
		ks := [][2]string{{"↑/↓/pgup/pgdn", "scroll"}, {"/", "search"}, {"n/N", "next/prev match"}}
		if len(m.docs) > 1 {
			ks = append(ks, [2]string{"]/[", "next/prev guide"})
		}
		ks = append(ks, [2]string{"esc", "back"})
		if m.mode == "explain" && m.back == "" {
			ks = append(ks, [2]string{"enter", "to fixes"})
		}
		return ks
	}
	ks := [][2]string{{"↑/↓", "select"}, {"enter", "open"}}
	if m.mode == "browse" {
		ks = append(ks, [2]string{"/", "filter"})
	}
	return append(ks, [2]string{"esc", "back"})
}

// guideIDsFor lists the guides of the problems, most severe first, once each.
func guideIDsFor(problems []checks.Finding, d Deps) []string {
	seen := map[string]bool{}
	var ids []string
	for _, sev := range []checks.Severity{checks.Error, checks.Warn} {
		for _, f := range problems {
			if f.Severity == sev && f.Guide != "" && !seen[f.Guide] {
				if d.Guide != nil {
					if _, ok := d.Guide(f.Guide); !ok {
						continue
					}
				}
				seen[f.Guide] = true
				ids = append(ids, f.Guide)
			}
		}
	}
	return ids
}
