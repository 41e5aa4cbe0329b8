package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/guideui"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// common is shared by every child model.
type common struct {
	deps   Deps
	opt    Options
	st     styles
	ctx    context.Context
	width  int
	height int
	// list are the cursor and scrolling keys every list screen shares.
	list listKeys
	// spin is the spinner's frame, for every screen that waits.
	spin string
	// now is the clock (tests pin it): paste quarantine is timed.
	now func() time.Time
}

// command is `ncclwiz SUB` as the user should type it here: with the
// flags that chose the machine the wizard looks at (--shm-path, --scenario).
func (c *common) command(sub string) string {
	out := "ncclwiz " + sub
	if c.deps.Context != "" {
		out += " " + c.deps.Context
	}
	return out
}

// bodyHeight is the space between the header and the help bar.
func (c *common) bodyHeight() int { return max(c.height-4, 5) }

// shownRows is how many rows of the body are surely on screen. bodyHeight
// keeps a floor of 5 so that screens lay out, and the root cuts what a
// shorter window cannot show: what consent rests on is laid out in
// shownRows, and a window too short for it is said so.
func (c *common) shownRows() int { return min(c.bodyHeight(), c.height-2) }

// gotoMsg asks the root to switch stage.
type gotoMsg struct{ stage flow.Stage }

func goTo(s flow.Stage) tea.Cmd { return func() tea.Msg { return gotoMsg{s} } }

// statusMsg sets the transient status line.
type statusMsg string

// Model is the wizard's root model.
type Model struct {
	c      *common
	cancel context.CancelFunc
	stage  flow.Stage
	state  flow.State
	status string
	// keys are the global keys; help draws the help bar (? toggles its
	// full form).
	keys globalKeys
	help help.Model
	// gen counts finished check runs, so the Fix step re-plans only when
	// the findings changed.
	gen int

	// nav is the way the user came (Esc goes back along it).
	nav history
	// pasting is set between a bracketed paste's start and end markers;
	// quiet is when keys count as typed again: a paste, and keys arriving
	// in it or right after it (text after a pasted end marker, \e[201~y),
	// are never keys.
	pasting bool
	quiet   time.Time
	// recheckFrom is the stage r was pressed on: the new check run
	// returns there.
	recheckFrom flow.Stage

	start    startModel
	detect   detectModel
	findings findingsModel
	fix      fixModel
	apply    applyModel
	validate validateModel
	summary  summaryModel
	logx     logModel
	hang     hangModel
	nodes    nodesModel
	// guides is the guide browser of the Explain, Learn and Guides stages
	// (only one of them is ever on the way back), when the library is
	// available.
	guides    guideui.Model
	hasGuides bool
}

// New builds the wizard. ctx bounds every command the wizard starts.
func New(ctx context.Context, deps Deps, opt Options) Model {
	ctx, cancel := context.WithCancel(ctx)
	c := &common{deps: deps, opt: opt, st: newStyles(opt.ASCII), ctx: ctx, width: 80, height: 24, list: newListKeys(), now: time.Now}
	m := Model{c: c, cancel: cancel, stage: flow.Start, keys: newGlobalKeys(), help: newHelp(c.st)}
	m.start = newStartModel(c)
	m.detect = newDetectModel(c)
	c.spin = m.detect.spin.View()
	m.findings = newFindingsModel(c)
	m.fix = newFixModel(c)
	m.apply = newApplyModel(c)
	m.validate = validateModel{c: c}
	m.summary = newSummaryModel(c)
	m.logx = newLogModel(c)
	if deps.SuggestedLog != "" {
		m.logx.input.SetValue(deps.SuggestedLog)
	}
	m.hang = newHangModel(c)
	m.nodes = newNodesModel(c)
	return m
}

// Stage returns the current stage (for tests).
func (m Model) Stage() flow.Stage { return m.stage }

// Init implements tea.Model.
func (m Model) Init() tea.Cmd {
	return tea.Batch(tea.RequestWindowSize, m.detect.spin.Tick)
}

// Update implements tea.Model.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.c.width, m.c.height = msg.Width, msg.Height
		return m.resize()
	case tea.PasteStartMsg:
		m.pasting, m.quiet = true, m.c.now().Add(pasteQuiet)
		return m, nil
	case tea.PasteEndMsg:
		m.pasting, m.quiet = false, m.c.now().Add(pasteQuiet)
		return m, nil
	case tea.PasteMsg:
		m.quiet = m.c.now().Add(pasteQuiet)
	case tea.KeyPressMsg:
		// Pasted text is never keys: a key inside a paste, or right after
		// one (text after an end marker inside the pasted text), is
		// dropped, and keeps the quiet going while such keys stream in.
		if msg.String() != "ctrl+c" && (m.pasting || m.c.now().Before(m.quiet)) {
			m.quiet = m.c.now().Add(pasteQuiet)
			m.status = "ignored keys that arrived with a paste: pasted text is never a key press"
			return m, nil
		}
		// The status line is transient: the next key replaces it.
		m.status = ""
		if msg.String() == "r" && m.recheckable() {
			return m.recheck()
		}
		if key.Matches(msg, m.keys.Help) && !m.typing() && !m.browsing() && !m.consenting() {
			m.help.ShowAll = !m.help.ShowAll
			return m, nil
		}
		if cmd, handled := m.globalKey(msg); handled {
			return m, cmd
		}
		if key.Matches(msg, m.keys.Back) && !m.ownsEsc() {
			return m.goBack()
		}
		if s, ok := m.navTarget(msg); ok {
			return m.enter(s)
		}
	case gotoMsg:
		return m.enter(msg.stage)
	case applyMsg:
		return m.startApply(msg)
	case fixProgressMsg, fixAppliedMsg, applyDoneMsg, askMsg:
		var cmd tea.Cmd
		m.apply, cmd = m.apply.progress(msg)
		if _, done := msg.(applyDoneMsg); done && len(m.apply.results) > 0 {
			m.state.Applied = true
			return m, tea.Batch(cmd, m.recheckAll())
		}
		return m, cmd
	case statusMsg:
		m.status = string(msg)
		return m, nil
	case workMsg:
		var cmd tea.Cmd
		switch msg.kind {
		case "hang":
			m.hang, cmd = m.hang.work(msg)
		case "nodes":
			m.nodes, cmd = m.nodes.work(msg)
		default:
			cmd = msg.next()
		}
		return m, cmd
	case plannedMsg:
		if msg.gen != m.gen {
			return m, nil // a newer check run is being planned
		}
		m.state.FixesPending, m.state.FixCount = false, len(msg.fixes)
		m.fix.planned(msg)
		m.summary.setPlan(msg.fixes)
		m.summary.refresh()
		return m, nil
	case snippetMsg, snippetSavedMsg:
		// Whatever the stage: a copy asked for before the snippet was made
		// goes ahead when it arrives.
		var cmd tea.Cmd
		m.summary, cmd = m.summary.update(msg)
		return m, cmd
	case resultMsg, detectDoneMsg:
		var cmd tea.Cmd
		m.detect, cmd = m.detect.update(msg)
		if _, done := msg.(detectDoneMsg); done {
			return m.detected(cmd)
		}
		return m, cmd
	case openGuideMsg:
		ids := guideIDsFor(m.state.Problems(), m.c.deps)
		if !slices.Contains(ids, msg.id) {
			ids = append([]string{msg.id}, ids...)
		}
		m.fix.leave()
		m.status = ""
		from := m.stage
		if msg.back != "" {
			from = msg.back
		}
		m.nav = m.nav.visit(from, flow.Explain)
		m.stage = flow.Explain
		return m, m.openGuides(flow.Explain, guideui.Options{IDs: ids, Title: explainTitle(ids)}, msg.id)
	case guideui.ExitMsg:
		if m.guideStage() {
			return m.goBack()
		}
		return m, nil
	case recheckDoneMsg:
		m.detect.results = map[string]checks.Result{}
		for _, r := range msg.results {
			m.detect.results[r.ID] = r
		}
		return m.detected(nil)
	}

	// Ticking fixes does not route: the Apply stage is reached only by the
	// confirm step's y (applyMsg), never by Tab.
	var cmd tea.Cmd
	if k, ok := m.children()[m.stage]; ok {
		cmd = k.update(msg)
	}
	// The browser gets its messages (a rendering that lands after the
	// reader left) whatever the stage; keys only on its own stages.
	if _, isKey := msg.(tea.KeyPressMsg); m.hasGuides && (m.guideStage() || !isKey) {
		var c2 tea.Cmd
		m.guides, c2 = m.guides.Update(msg)
		cmd = tea.Batch(cmd, c2)
	}
	// Spinner ticks must keep flowing whatever the stage; the frame is
	// lent to every screen that waits.
	if _, ok := msg.(spinTick); ok {
		if m.stage != flow.Detect {
			var c2 tea.Cmd
			m.detect, c2 = m.detect.update(msg)
			cmd = tea.Batch(cmd, c2)
		}
		m.c.spin = m.detect.spin.View()
	}
	return m, cmd
}

// browsing reports whether the guide browser has the screen (it draws
// its own help, and ? is its own).
func (m Model) browsing() bool { return m.hasGuides && m.guideStage() }

// typing reports whether a text input has focus, so that letters are text
// and not shortcuts.
func (m Model) typing() bool {
	switch m.stage {
	case flow.Log:
		return m.logx.input.Focused()
	case flow.Nodes:
		return m.nodes.input.Focused()
	case flow.Summary:
		return m.summary.exporting || m.summary.replacing != ""
	case flow.Explain, flow.Learn, flow.Guides:
		return m.hasGuides && m.guides.Typing()
	}
	return false
}

// guideStage reports whether the stage is one of the guide browser's.
func (m Model) guideStage() bool {
	return m.stage == flow.Explain || m.stage == flow.Learn || m.stage == flow.Guides
}

// ownsEsc reports whether the screen uses esc itself, to close something
// open inside it (a confirm step, a search, a running inspection) rather
// than to leave. Otherwise esc is the root's: back along the history.
func (m Model) ownsEsc() bool {
	switch m.stage {
	case flow.Apply:
		return m.apply.asking != nil
	case flow.Fix:
		return m.fix.confirming
	case flow.Explain, flow.Learn, flow.Guides:
		return m.hasGuides // the browser sends ExitMsg when it is done
	case flow.Summary:
		return m.summary.exporting || m.summary.replacing != ""
	case flow.Hang:
		return m.hang.phase == hangFinding || m.hang.phase == hangInspecting || (m.hang.phase == hangDone && len(m.hang.jobs) > 1)
	case flow.Nodes:
		return m.nodes.running
	}
	return false
}

// goBack returns to where the user came from. It never applies anything:
// it only enters a stage (consent_test.go walks it at random).
func (m Model) goBack() (tea.Model, tea.Cmd) {
	if m.apply.running {
		return m, status("applying the fixes you confirmed; wait for them to finish (ctrl+c stops)")
	}
	s, ok := m.nav.back()
	if !ok || m.stage == flow.Start {
		return m, status("this is the start; q quits")
	}
	return m.enter(s)
}

func (m Model) globalKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	switch k.String() {
	case "ctrl+c":
		m.cancel()
		return tea.Quit, true
	case "q":
		// In an open guide q goes back, as in `ncclwiz guides`.
		if !m.typing() && !(m.browsing() && m.guides.Viewing()) {
			m.cancel()
			return tea.Quit, true
		}
	case "tab", "shift+tab":
		if m.apply.running && !m.typing() {
			return status("applying the fixes you confirmed; wait for them to finish (ctrl+c stops)"), true
		}
	}
	return nil, false
}

// navTarget is the stage Tab or Shift+Tab moves to. The move is made in the
// same Update, not by a command, so that two quick Tabs go two stages on.
func (m Model) navTarget(k tea.KeyPressMsg) (flow.Stage, bool) {
	if m.typing() || !onPath(m.stage) {
		return "", false
	}
	switch k.String() {
	case "tab":
		if m.stage != flow.Start {
			return m.state.Next(m.stage), true
		}
	case "shift+tab":
		return m.state.Prev(m.stage), true
	}
	return "", false
}

func onPath(s flow.Stage) bool {
	for _, p := range flow.Path() {
		if p == s {
			return true
		}
	}
	return false
}

// startApply is the only place fixes start: the confirm step sends the
// views the user said y to.
func (m Model) startApply(msg applyMsg) (tea.Model, tea.Cmd) {
	if m.apply.running {
		return m, status("already applying")
	}
	m.fix.leave()
	m.status = ""
	m.nav = m.nav.visit(m.stage, flow.Apply)
	m.stage = flow.Apply
	return m, m.apply.startRun(msg.chosen, msg.plan)
}

// enter switches to stage s and shows it. Entering a stage never applies a
// fix: that is startApply's job alone.
func (m Model) enter(s flow.Stage) (tea.Model, tea.Cmd) {
	m.status = ""
	if s != flow.Fix {
		m.fix.leave()
	}
	prev := m.stage
	// Back along the way (esc, shift+tab, a screen's own back key) the
	// screen is as it was left: the open guide, the log result.
	returning := m.nav.returning(s)
	m.nav = m.nav.visit(prev, s)
	m.stage = s
	switch s {
	case flow.Hang:
		// From Start it looks afresh; back from a guide it keeps the verdict.
		if prev == flow.Start || m.hang.phase == hangFailed {
			return m, m.hang.begin()
		}
	case flow.Nodes:
		return m, m.nodes.enter()
	case flow.Detect:
		// Every arrival runs the checks afresh: the screen never shows an
		// earlier run as this machine's state. From anywhere but r (a
		// re-check keeps the session's before/after) it is a new round.
		if !m.detect.running {
			if m.recheckFrom == "" {
				m.newRound()
			}
			m.state.Detected = false
			return m, m.detect.startRun()
		}
	case flow.Findings:
		m.findings.load(m.detect.ordered())
	case flow.Explain:
		if returning && m.hasGuides {
			return m, nil
		}
		// One guide opens at once (esc leaves it); several are a list.
		ids := guideIDsFor(m.state.Problems(), m.c.deps)
		open := ""
		if len(ids) == 1 {
			open = ids[0]
		}
		return m, m.openGuides(s, guideui.Options{IDs: ids, Title: explainTitle(ids)}, open)
	case flow.Fix:
		m.fix.refresh()
	case flow.Apply:
		m.apply.refresh()
	case flow.Validate:
		m.validate.results = m.apply.results
		return m, m.validate.prepare()
	case flow.Summary:
		ids := m.apply.succeeded()
		for _, id := range m.fix.chosenIDs() {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		var plan []FixView
		if !m.fix.planning && m.fix.gen == m.gen {
			plan = m.fix.fixes
		}
		return m, m.summary.load(m.state, m.gen, m.detect.before, m.apply.results, m.validate.result, ids, plan)
	case flow.Learn, flow.Guides:
		if returning && m.hasGuides {
			return m, nil
		}
		return m, m.openGuides(s, guideui.Options{Learn: s == flow.Learn}, "")
	case flow.Log:
		return m, m.logx.focus()
	}
	return m, nil
}

// detected records a finished check run and moves on from Detect.
func (m Model) detected(cmd tea.Cmd) (tea.Model, tea.Cmd) {
	m.state.Detected = true
	m.gen++
	m.state.Results = m.detect.ordered()
	if m.detect.before == nil {
		m.detect.before = m.state.Results
	}
	m.state.GuideCount = len(guideIDsFor(m.state.Problems(), m.c.deps))
	// The fixes are planned in a tea.Cmd (planning reads the machine for a
	// second or more); until the plan arrives the Fix step shows a spinner.
	m.state.FixCount = 0
	if plan := planFixes(m.c, m.gen, m.state.Problems()); plan != nil {
		m.state.FixesPending = true
		m.fix.await()
		cmd = tea.Batch(cmd, plan)
	}
	if m.c.deps.CanValidate == nil {
		m.state.CanValidate = false
	}
	if m.stage == flow.Detect {
		// Detect moves on by itself — to the screen r was pressed on, or
		// to Findings: esc from there goes to where Detect was started from.
		to := flow.Findings
		if m.recheckFrom != "" {
			to, m.recheckFrom = m.recheckFrom, ""
		}
		nm, c2 := m.enterWith(to, cmd)
		mm := nm.(Model)
		if s, ok := mm.nav.back(); ok && s == flow.Detect {
			mm.nav = mm.nav[:len(mm.nav)-1]
		}
		return mm, c2
	}
	if m.stage == flow.Findings {
		m.findings.load(m.state.Results)
	}
	return m, cmd
}

func (m Model) enterWith(s flow.Stage, cmd tea.Cmd) (tea.Model, tea.Cmd) {
	nm, c2 := m.enter(s)
	return nm, tea.Batch(cmd, c2)
}

// pasteQuiet is how long after a paste keys are still taken for pasted
// text: long enough for the rest of a paste read in several chunks, short
// next to how fast anyone reads the screen and presses a key.
const pasteQuiet = 300 * time.Millisecond

// recheckable reports whether r re-runs the checks here: wherever check
// results are shown and nothing is open or running on the screen.
func (m Model) recheckable() bool {
	if m.apply.running || m.detect.running || m.typing() {
		return false
	}
	switch m.stage {
	case flow.Findings, flow.Detect:
		return true
	case flow.Fix:
		return !m.fix.confirming
	case flow.Apply:
		return m.apply.asking == nil
	case flow.Summary:
		return !m.summary.exporting
	}
	return false
}

// consenting reports whether a screen asks for a yes to what it shows
// (the confirm step's plan, a question of a running fix): the full help
// never lies over it.
func (m Model) consenting() bool {
	return (m.stage == flow.Fix && m.fix.confirming) || (m.stage == flow.Apply && m.apply.asking != nil)
}

// recheck runs every check again and returns to this screen with the
// machine as it is now (the session's before/after is kept).
func (m Model) recheck() (tea.Model, tea.Cmd) {
	m.recheckFrom = m.stage
	if m.stage == flow.Detect {
		m.recheckFrom = flow.Findings // Detect moves on by itself
	}
	return m.enter(flow.Detect)
}

// newRound forgets the previous round's fixes, test and plan: a diagnosis
// started from Start is about the machine now.
func (m *Model) newRound() {
	m.state = flow.State{CanValidate: m.state.CanValidate, SkipValidate: m.state.SkipValidate}
	m.detect.before = nil
	m.apply = newApplyModel(m.c)
	m.validate = validateModel{c: m.c}
	m.fix.chosen = map[string]bool{}
}

// recheckAll re-runs every check after fixes, so Findings and Summary show
// the machine as it is now.
func (m Model) recheckAll() tea.Cmd {
	c := m.c
	return func() tea.Msg {
		rs := checks.Run(c.ctx, c.deps.Host, c.deps.Checks, checks.Options{})
		return recheckDoneMsg{results: rs}
	}
}

type recheckDoneMsg struct{ results []checks.Result }

func (m Model) resize() (tea.Model, tea.Cmd) {
	var cmds []tea.Cmd
	m.detect.resize()
	m.fix.refresh()
	m.apply.refresh()
	m.findings.refresh()
	m.summary.refresh()
	m.hang.refresh()
	m.nodes.refresh()
	m.logx.refresh()
	if m.hasGuides {
		cmds = append(cmds, m.guides.SetSize(max(m.c.width, 1), max(m.c.height-2, 1)))
	}
	return m, tea.Batch(cmds...)
}

// screen is what every child model offers the root for drawing.
type screen interface {
	view() string
}

// child is a stage's model as the root sees it: update it, draw it.
type child struct {
	update func(tea.Msg) tea.Cmd
	screen func() screen
}

// via makes the child of the model at p (a field of the root) and its
// update method.
func via[T screen](p *T, update func(T, tea.Msg) (T, tea.Cmd)) child {
	return child{
		update: func(msg tea.Msg) tea.Cmd {
			var cmd tea.Cmd
			*p, cmd = update(*p, msg)
			return cmd
		},
		screen: func() screen { return *p },
	}
}

// children is the one place that says which model serves which stage
// (the guide stages are the browser's, outside this table).
func (m *Model) children() map[flow.Stage]child {
	return map[flow.Stage]child{
		flow.Start: via(&m.start, startModel.update), flow.Detect: via(&m.detect, detectModel.update),
		flow.Findings: via(&m.findings, findingsModel.update), flow.Fix: via(&m.fix, fixModel.update),
		flow.Apply: via(&m.apply, applyModel.update), flow.Validate: via(&m.validate, validateModel.update),
		flow.Summary: via(&m.summary, summaryModel.update), flow.Log: via(&m.logx, logModel.update),
		flow.Hang: via(&m.hang, hangModel.update), flow.Nodes: via(&m.nodes, nodesModel.update),
	}
}

// current returns the child model of the current stage.
func (m Model) current() screen {
	if k, ok := m.children()[m.stage]; ok {
		return k.screen()
	}
	return noGuides{m.c}
}

// View implements tea.Model; only the root returns a tea.View. It sets
// no window title: bubbletea would reset it to empty on exit, clobbering
// the user's own.
func (m Model) View() tea.View {
	var out string
	if m.browsing() {
		// The browser draws its own help bar; it gets the whole body.
		out = m.header() + "\n" + fitHeight(m.guides.View(), m.c.height-2)
	} else {
		body := m.current().view()
		bar := m.helpBar()
		// The full help covers the bottom of the body rather than re-laying
		// the screen out: it is open for a glance.
		body = fitHeight(body, m.c.bodyHeight()+2-lipgloss.Height(bar))
		out = m.header() + "\n" + body + "\n" + bar
	}
	v := tea.NewView(fitHeight(out, max(m.c.height, 1)))
	v.AltScreen = true
	return v
}

func (m Model) header() string {
	st := m.c.st
	left := st.header.Render("ncclwiz")
	if m.c.deps.Host != nil && m.c.deps.Host.Simulated {
		left += " " + st.banner.Render(" SIMULATED: "+textsafe.Sanitize(m.c.deps.Host.Name)+" ")
	}
	var trail []string
	if onPath(m.stage) {
		for _, p := range flow.Path() {
			t := p.Title()
			if p == m.stage {
				t = st.sel.Render("[" + t + "]")
			} else {
				t = st.dim.Render(t)
			}
			trail = append(trail, t)
		}
	} else {
		trail = []string{st.sel.Render(m.stage.Title())}
	}
	full := left + "  " + strings.Join(trail, st.dim.Render(st.m.sep))
	if lipgloss.Width(full) > m.c.width {
		i := 0
		for j, p := range flow.Path() {
			if p == m.stage {
				i = j + 1
			}
		}
		full = left + "  " + st.sel.Render(m.stage.Title())
		if i > 0 {
			full += st.dim.Render(fmt.Sprintf(" (%d/%d)", i, len(flow.Path())))
		}
	}
	line := strings.Repeat("─", max(m.c.width, 1))
	if m.c.opt.ASCII {
		line = strings.Repeat("-", max(m.c.width, 1))
	}
	return truncate(full, m.c.width) + "\n" + st.dim.Render(line)
}

func (m Model) helpBar() string {
	bar := m.helpView()
	st := m.c.st
	if m.status != "" {
		// Wrapped, not cut (a path in it is why it failed), up to 3 lines.
		lines := strings.Split(wrapText(textsafe.Clean(m.status), max(m.c.width, 1)), "\n")
		if len(lines) > 3 {
			lines = append(lines[:2], truncate(strings.Join(lines[2:], " "), m.c.width))
		}
		return renderLines(st.hint, strings.Join(lines, "\n")) + "\n" + bar
	}
	return "\n" + bar
}

// screenKeys is the current screen's keyMap.
func (m Model) screenKeys() keyMap {
	switch s := m.current().(type) {
	case keyMapper:
		return s.keyMap()
	}
	return keyMap{}
}

// globalHelp are the root's keys that apply on this stage. While a text
// input has the keyboard, q and ? are text: ctrl+c quits.
func (m Model) globalHelp() []key.Binding {
	var out []key.Binding
	if _, ok := m.nav.back(); ok && !m.ownsEsc() && m.stage != flow.Start {
		out = append(out, m.keys.Back)
	}
	if m.typing() {
		return append(out, bind("ctrl+c", "quit", "ctrl+c"))
	}
	out = append(out, m.keys.Quit)
	if onPath(m.stage) && m.stage != flow.Start && !m.apply.running {
		out = append(out, bind("tab/shift+tab", "next/back", "tab", "shift+tab"))
	}
	if m.consenting() {
		return out // every key is in the bar; no full help over a plan or question
	}
	return append(out, m.keys.Help)
}

// helpView draws the help: one line, or the full columns after ?. The
// one line always ends in "? more keys" when it is not all there: items
// that do not fit are left out whole — tab first, then the screen's own
// from the last — never the way to see them.
func (m Model) helpView() string {
	h := m.help
	h.SetWidth(m.c.width)
	km := helpFor(m.screenKeys(), m.globalHelp())
	if !h.ShowAll || m.consenting() {
		h.SetWidth(0) // measured here, not cut by help
		short := km.(keyMap).Short
		for len(short) > 1 && lipgloss.Width(h.ShortHelpView(short)) > m.c.width {
			short = dropOne(short)
		}
		return truncate(h.ShortHelpView(short), m.c.width)
	}
	lines := strings.Split(h.View(km), "\n")
	for i, l := range lines {
		lines[i] = truncate(l, m.c.width)
	}
	return strings.Join(lines, "\n")
}

// dropOne leaves out the least needed item of a short help that does not
// fit: tab/shift+tab, then the arrows (every list has them), else the
// last before esc, q and ? (which stay).
func dropOne(short []key.Binding) []key.Binding {
	keep := map[string]bool{"?": true, "q": true, "esc": true, "ctrl+c": true}
	for _, first := range []string{"tab/shift+tab", "↑/↓"} {
		for i, b := range short {
			if b.Help().Key == first {
				return slices.Delete(slices.Clone(short), i, i+1)
			}
		}
	}
	for i := len(short) - 1; i >= 0; i-- {
		if !keep[short[i].Help().Key] {
			return slices.Delete(slices.Clone(short), i, i+1)
		}
	}
	return short[:len(short)-1]
}

// fitHeight pads or cuts s to exactly h lines (none when h < 1: a window
// of one line has no room below the header).
func fitHeight(s string, h int) string {
	if h < 1 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// truncate cuts a styled string to width cells.
func truncate(s string, width int) string {
	if lipgloss.Width(s) <= width {
		return s
	}
	// An ellipsis says the line goes on (`ncclwiz check -v` has it all).
	return ansi.Truncate(s, width, "…")
}

// ExitSummary is the line printed after the wizard closes (the alternate
// screen takes the last frame with it) and the exit code it implies.
func (m Model) ExitSummary() (string, int) {
	if !m.state.Detected {
		return "", 0
	}
	n := len(m.state.Problems())
	line := "ncclwiz: no problems left."
	code := 0
	if n > 0 {
		line = fmt.Sprintf("ncclwiz: %s left; run `%s` for details.", units.Count(n, "problem"), m.c.command("check -v"))
		code = 1
	}
	if m.summary.exported != "" {
		line += " Fix script: " + textsafe.Sanitize(m.summary.exported) + "."
	}
	return line, code
}
