// Package guideui is the guide browser: a filterable list of the guides (or
// of the Learn track) and a scrollable viewer with in-page search and
// next/previous through the Learn track. Keyboard only.
//
// Model is a child model (View returns a string) so the wizard can embed
// it; Run wraps it in a standalone program whose root sets the tea.View.
// Rendering, the only slow step, happens in a tea.Cmd.
package guideui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/list"
	"charm.land/bubbles/v2/paginator"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/guides/render"
)

// MaxTextWidth caps the rendered text on wide terminals: long lines are
// hard to read.
const MaxTextWidth = 100

// Options configure the browser.
type Options struct {
	// Lang is "en" or "zh" ("" means English); missing translations fall
	// back to English per guide.
	Lang string
	// Style is the render style (render.Dark, Light, ASCII, NoTTY); "" is
	// dark.
	Style string
	// Dark says whether the background is dark (list colours).
	Dark bool
	// Learn starts with the Learn track instead of every guide.
	Learn bool
	// Open names a guide to show first.
	Open string
	// IDs, when set, are the only guides listed, in this order (the guides
	// for what the wizard found); ] and [ step through them, and Title
	// names the list. IDs the library lacks are left out.
	IDs   []string
	Title string
	// Embedded says the browser is part of a larger program: its help says
	// esc goes back rather than q quits, and esc in a guide opened with
	// Open (rather than picked from the list) leaves the browser at once,
	// back to where the reader came from.
	Embedded bool
	// Keys are the parent's keys, added to the help (the wizard's tab).
	Keys []key.Binding
}

// ExitMsg is sent when the reader leaves the browser (q or esc in the
// list). The standalone program quits; the wizard goes back.
type ExitMsg struct{}

func exit() tea.Msg { return ExitMsg{} }

// renderedMsg carries a guide rendered for one width.
type renderedMsg struct {
	id, lang string
	width    int
	text     string
	err      error
}

// Model is the browser.
type Model struct {
	lib  *guides.Library
	opt  Options
	keys keyMap
	st   styles

	width, height int

	learn   bool // the list shows the Learn track
	list    list.Model
	viewing bool
	// direct says the open guide came from Open, not from the list.
	direct bool
	v      viewer
	help   help.Model
}

type styles struct {
	header, dim, match, current lipgloss.Style
}

// New builds the browser over lib.
func New(lib *guides.Library, opt Options) Model {
	if opt.Style == "" {
		opt.Style = render.Dark
	}
	m := Model{
		lib:    lib,
		opt:    opt,
		keys:   newKeyMap(opt.Embedded),
		learn:  opt.Learn,
		width:  80,
		height: 24,
		help:   help.New(),
		st: styles{
			header:  lipgloss.NewStyle().Bold(true),
			dim:     lipgloss.NewStyle().Faint(true),
			match:   lipgloss.NewStyle().Reverse(true),
			current: lipgloss.NewStyle().Reverse(true).Bold(true).Underline(true),
		},
	}
	m.help.Styles = help.DefaultStyles(opt.Dark)
	m.list = m.newList()
	m.v = newViewer()
	m.resize()
	return m
}

// Init opens Options.Open when set.
func (m Model) Init() tea.Cmd {
	if m.opt.Open == "" {
		return nil
	}
	return func() tea.Msg { return openMsg{m.opt.Open} }
}

// openMsg asks the browser to show a guide.
type openMsg struct{ id string }

// Open returns a command that shows guide id (for a parent model).
func Open(id string) tea.Cmd { return func() tea.Msg { return openMsg{id} } }

// Viewing reports whether a guide is open (rather than the list).
func (m Model) Viewing() bool { return m.viewing }

// Current returns the open guide, if any.
func (m Model) Current() *guides.Guide {
	if !m.viewing {
		return nil
	}
	return m.v.guide
}

// SetSize fits the browser to w×h cells and returns the command that
// re-renders the open guide when the width changed.
func (m *Model) SetSize(w, h int) tea.Cmd {
	if w <= 0 || h <= 0 {
		return nil
	}
	m.width, m.height = w, h
	m.resize()
	if m.viewing && m.v.guide != nil && m.textWidth() != m.v.width {
		return m.renderCmd(m.v.guide)
	}
	return nil
}

func (m *Model) resize() {
	m.list.SetSize(m.width, m.height)
	// One dot per page overflows a narrow window once there are many
	// pages; "3/40" always fits.
	if m.list.Paginator.TotalPages+4 > m.width {
		m.list.Paginator.Type = paginator.Arabic
	} else {
		m.list.Paginator.Type = paginator.Dots
	}
	m.help.SetWidth(m.width)
	m.v.input.SetWidth(max(m.width-4, 1))
	m.v.vp.SetWidth(m.width)
	m.v.vp.SetHeight(max(m.height-2-m.helpHeight(), 1))
}

func (m Model) textWidth() int { return max(min(m.width, MaxTextWidth), 1) }

// Update handles a message.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		return m, m.SetSize(msg.Width, msg.Height)
	case openMsg:
		g, ok := m.lib.Get(msg.id, m.opt.Lang)
		if !ok {
			return m, m.list.NewStatusMessage(fmt.Sprintf("no guide %q", msg.id))
		}
		cmd := m.open(g)
		m.direct = true
		return m, cmd
	case renderedMsg:
		if m.v.guide == nil || msg.id != m.v.guide.ID || msg.lang != m.v.guide.Lang || msg.width != m.textWidth() {
			return m, nil // stale: another guide or width since
		}
		m.v.setRendered(msg, m.st)
		return m, nil
	case tea.KeyPressMsg:
		if m.viewing {
			return m.viewerKey(msg)
		}
		return m.listKey(msg)
	}
	var cmd tea.Cmd
	if m.viewing {
		m.v.input, cmd = m.v.input.Update(msg)
	} else {
		m.list, cmd = m.list.Update(msg)
	}
	return m, cmd
}

func (m Model) listKey(k tea.KeyPressMsg) (Model, tea.Cmd) {
	if m.list.FilterState() == list.Filtering {
		var cmd tea.Cmd
		m.list, cmd = m.list.Update(k)
		return m, cmd
	}
	switch {
	case key.Matches(k, m.keys.Open):
		if it, ok := m.list.SelectedItem().(item); ok {
			m.direct = false
			return m, m.open(it.g)
		}
		return m, nil
	case key.Matches(k, m.keys.Track) && m.opt.IDs == nil:
		m.learn = !m.learn
		m.list = m.newList()
		m.resize()
		return m, nil
	case k.String() == "esc" && m.list.IsFiltered():
		// esc first clears an applied filter (the list does that).
	case key.Matches(k, m.keys.Quit):
		return m, exit
	}
	var cmd tea.Cmd
	m.list, cmd = m.list.Update(k)
	return m, cmd
}

// open shows g and starts rendering it.
func (m *Model) open(g *guides.Guide) tea.Cmd {
	m.viewing = true
	m.v.show(g)
	m.resize()
	// Keep the list's selection on the open guide, so going back lands on
	// it (also after ]/[ through the Learn track).
	for i, it := range m.list.VisibleItems() {
		if it.(item).g.ID == g.ID {
			m.list.Select(i)
			break
		}
	}
	return m.renderCmd(g)
}

func (m Model) renderCmd(g *guides.Guide) tea.Cmd {
	width, style, doc := m.textWidth(), m.opt.Style, g.Document()
	id, lang := g.ID, g.Lang
	return func() tea.Msg {
		out, err := render.Markdown(doc, render.Options{Width: width, Style: style})
		return renderedMsg{id: id, lang: lang, width: width, text: out, err: err}
	}
}

func (m Model) viewerKey(k tea.KeyPressMsg) (Model, tea.Cmd) {
	v := &m.v
	if v.searching {
		switch {
		case key.Matches(k, m.keys.Accept):
			v.searching = false
			v.input.Blur()
			v.search(v.input.Value(), m.st)
		case key.Matches(k, m.keys.Cancel):
			v.searching = false
			v.input.Blur()
		default:
			var cmd tea.Cmd
			v.input, cmd = v.input.Update(k)
			return m, cmd
		}
		return m, nil
	}
	switch {
	case key.Matches(k, m.keys.Back):
		if v.query != "" && k.String() == "esc" {
			v.search("", m.st) // esc first clears the search
			return m, nil
		}
		if m.direct && m.opt.Embedded {
			return m, exit
		}
		m.viewing = false
		m.resize()
		return m, nil
	case key.Matches(k, m.keys.Search):
		v.searching = true
		v.input.SetValue("")
		return m, v.input.Focus()
	case key.Matches(k, m.keys.Next):
		v.step(1, m.st)
	case key.Matches(k, m.keys.Prev):
		v.step(-1, m.st)
	case key.Matches(k, m.keys.NextGuide), key.Matches(k, m.keys.PrevGuide):
		prev, next := m.neighbours(v.guide.ID)
		to := next
		if key.Matches(k, m.keys.PrevGuide) {
			to = prev
		}
		if to != nil {
			return m, m.open(to)
		}
	case key.Matches(k, m.keys.Top):
		v.vp.GotoTop()
	case key.Matches(k, m.keys.Bottom):
		v.vp.GotoBottom()
	case key.Matches(k, m.keys.Help):
		m.help.ShowAll = !m.help.ShowAll
		m.resize()
	default:
		var cmd tea.Cmd
		v.vp, cmd = v.vp.Update(k)
		return m, cmd
	}
	return m, nil
}

// View draws the browser.
func (m Model) View() string {
	if !m.viewing {
		return m.list.View()
	}
	v := m.v
	var b strings.Builder
	b.WriteString(m.headerLine() + "\n")
	if v.loading {
		// The help stays where it will be: the keys work while it renders.
		b.WriteString(m.st.dim.Render("rendering…") + strings.Repeat("\n", max(v.vp.Height(), 1)+1))
	} else {
		b.WriteString(v.vp.View() + "\n")
		b.WriteString(m.statusLine() + "\n")
	}
	b.WriteString(m.helpView())
	return b.String()
}

func (m Model) headerLine() string {
	g := m.v.guide
	// The rendered document starts with the title; the header says where
	// the reader is.
	parts := []string{m.st.header.Render("ncclwiz guides › " + g.ID)}
	if i, n := m.trackPos(g.ID); i > 0 && n > 1 {
		parts = append(parts, fmt.Sprintf("%s %d/%d", m.seqName(), i, n))
	}
	if guides.NormalizeLang(m.opt.Lang) == guides.Chinese && g.Lang != guides.Chinese {
		parts = append(parts, "英文版（暂无中文）")
	}
	line := parts[0]
	if len(parts) > 1 {
		line += m.st.dim.Render(" · " + strings.Join(parts[1:], " · "))
	}
	return truncate(line, m.width)
}

// sequence is what ] and [ step through: the guides of Options.IDs, or
// else the Learn track.
func (m Model) sequence() []*guides.Guide {
	if m.opt.IDs == nil {
		return m.lib.Learn(m.opt.Lang)
	}
	var out []*guides.Guide
	for _, id := range m.opt.IDs {
		if g, ok := m.lib.Get(id, m.opt.Lang); ok {
			out = append(out, g)
		}
	}
	return out
}

// seqName names the sequence in the header.
func (m Model) seqName() string {
	if m.opt.IDs == nil {
		return "Learn"
	}
	return "guide"
}

// neighbours are the guides before and after id in the sequence.
func (m Model) neighbours(id string) (prev, next *guides.Guide) {
	if m.opt.IDs == nil {
		return m.lib.LearnNeighbours(id, m.opt.Lang)
	}
	seq := m.sequence()
	i, n := m.trackPos(id) // 1-based; 0 when id is not in seq
	if i > 1 {
		prev = seq[i-2]
	}
	if i > 0 && i < n {
		next = seq[i]
	}
	return prev, next
}

// trackPos returns the 1-based position of id in the sequence and the
// sequence's length (0, n when it is not in it).
func (m Model) trackPos(id string) (int, int) {
	track := m.sequence()
	for i, g := range track {
		if g.ID == id {
			return i + 1, len(track)
		}
	}
	return 0, len(track)
}

func (m Model) statusLine() string {
	v := m.v
	if v.searching {
		return v.input.View()
	}
	s := fmt.Sprintf("%3.0f%%", v.vp.ScrollPercent()*100)
	switch {
	case v.err != nil:
		s += "  could not render: " + v.err.Error()
	case v.query != "" && len(v.matches) == 0:
		s += fmt.Sprintf("  no match for %q", v.query)
	case len(v.matches) > 0:
		s += fmt.Sprintf("  match %d/%d for %q", v.cur+1, len(v.matches), v.query)
	}
	if i, n := m.trackPos(v.guide.ID); i > 0 {
		if _, next := m.neighbours(v.guide.ID); next != nil && v.vp.AtBottom() {
			s += "  ] next: " + next.Title
		} else if i == n && v.vp.AtBottom() && m.opt.IDs == nil {
			s += "  end of the Learn track"
		}
	}
	return m.st.dim.Render(truncate(s, m.width))
}

func (m Model) helpView() string {
	var s string
	if m.v.searching {
		s = m.help.View(searchHelp{m.keys})
	} else {
		i, n := m.trackPos(m.v.guide.ID)
		s = m.help.View(viewerHelp{k: m.keys, inTrack: i > 0 && n > 1, extra: m.opt.Keys})
	}
	// help drops items that do not fit only while an ellipsis still fits;
	// cut what is left so narrow windows never wrap.
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = truncate(l, m.width)
	}
	return strings.Join(lines, "\n")
}

func (m Model) helpHeight() int {
	if !m.viewing || m.v.guide == nil {
		return 1
	}
	return max(lipgloss.Height(m.helpView()), 1)
}

func truncate(s string, w int) string { return ansi.Truncate(s, max(w, 1), "…") }

// Typing reports whether a text prompt (the list filter or the in-guide
// search) has the keyboard, so a parent must not treat letters as
// shortcuts.
func (m Model) Typing() bool {
	return m.list.FilterState() == list.Filtering || m.v.searching
}
