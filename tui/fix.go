package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// applyMsg is the one way fixes get applied: the confirm step sends it
// after the user's y, with the exact views the confirm screen showed.
type applyMsg struct {
	chosen []FixView
	// plan is the whole plan the choice was made from (for verdicts: which
	// other fixes could still answer a remaining problem).
	plan []FixView
}

type fixModel struct {
	c          *common
	keys       fixKeys
	fixes      []FixView
	list       listView
	chosen     map[string]bool
	confirming bool
	// shown is what the open confirm step shows: the chosen views and the
	// whole plan they came from. y applies exactly these, whatever plan
	// arrives while the step is open.
	shown, shownPlan []FixView
	// gen is the check run the fixes were planned from.
	gen int
	// planning is set while the plan for a newer check run is being made
	// (in a tea.Cmd: planning samples processes for a second or more).
	planning bool
	// pending is a plan that arrived while the confirm step was open; it
	// replaces the list when the step closes.
	pending *plannedMsg
	detail  pager // the selected fix's preview
	plan    pager // the confirm step's plan
	// built says what the pagers were last built for, so keys that only
	// scroll do not rebuild a plan of 100,000 lines.
	built string
}

// plannedMsg is a finished planning run for the problems of check run gen.
type plannedMsg struct {
	gen   int
	fixes []FixView
}

// fixKeys are the Fix step's keys. The confirm step's y, n and e stay
// plain strings in confirmKey: that step's consent logic is tested key by
// key (consent_test.go) and is not a list.
type fixKeys struct {
	Choose, Confirm key.Binding
}

func newFixModel(c *common) fixModel {
	return fixModel{c: c, chosen: map[string]bool{}, gen: -1, detail: newPager(), plan: newPager(),
		list: newListView(c.list, 1, false),
		keys: fixKeys{
			Choose:  bind("space", "choose", "space", "x"),
			Confirm: bind("enter", "confirm", "enter"),
		}}
}

// fixRow is a row of the checklist: a fix, or one of its items (item >= 0).
type fixRow struct{ fix, item int }

// rows are the checklist's rows: each fix, its items under it.
func (m fixModel) rows() []fixRow {
	var out []fixRow
	for i, f := range m.fixes {
		out = append(out, fixRow{i, -1})
		for j := range f.Items {
			out = append(out, fixRow{i, j})
		}
	}
	return out
}

// at is the row under the cursor.
func (m fixModel) at() (fixRow, bool) {
	rs := m.rows()
	if i := m.list.index(); i < len(rs) {
		return rs[i], true
	}
	return fixRow{}, false
}

// toggleItem ticks or unticks item j of fix i: the view is made again for
// the new choice, so its title, lines and what y applies follow it.
func (m *fixModel) toggleItem(i, j int) tea.Cmd {
	f := m.fixes[i]
	var ids []string
	for k, it := range f.Items {
		if it.Chosen != (k == j) {
			ids = append(ids, it.ID)
		}
	}
	if m.c.deps.SelectFix == nil {
		return status("choosing is not available in this build")
	}
	v, err := m.c.deps.SelectFix(f, ids)
	if err != nil {
		return status(err.Error())
	}
	m.fixes[i] = v
	if len(ids) == 0 {
		delete(m.chosen, f.ID)
	}
	return nil
}

// planFixes plans the fixes for check run gen in the background: planning
// reads the machine (it samples candidate ranks' CPU time for a second or
// more), so it never runs inside Update.
func planFixes(c *common, gen int, problems []checks.Finding) tea.Cmd {
	plan := c.deps.PlanFixes
	if plan == nil {
		return nil
	}
	return func() tea.Msg { return plannedMsg{gen: gen, fixes: plan(c.ctx, problems)} }
}

// await marks the plan for check run gen as on its way.
func (m *fixModel) await() {
	m.planning = true
	m.refresh()
}

// planned takes a finished plan; while the confirm step is open it waits,
// so that what y applies is what the step shows.
func (m *fixModel) planned(p plannedMsg) {
	if m.confirming {
		m.pending = &p
		return
	}
	m.load(p.fixes, p.gen)
}

// load shows the planned fixes of check run gen.
func (m *fixModel) load(fixes []FixView, gen int) {
	m.fixes, m.gen, m.planning, m.pending = fixes, gen, false, nil
	for id := range m.chosen {
		if !m.has(id) {
			delete(m.chosen, id)
		}
	}
	if m.list.index() >= len(m.rows()) {
		m.list.selectRow(0)
	}
	m.list.setRows(len(m.rows()))
	m.confirming = false
	m.refresh()
}

func (m fixModel) has(id string) bool {
	for _, f := range m.fixes {
		if f.ID == id {
			return true
		}
	}
	return false
}

// blocked says why a fix cannot be applied from the wizard, or "".
func (m fixModel) blocked(f FixView) string {
	switch {
	case f.Impossible != "":
		return f.Impossible
	case f.NeedsRoot && m.c.deps.Host != nil && !m.c.deps.Host.IsRoot() && !m.c.deps.Host.Simulated:
		return "needs root: run sudo " + m.c.command("fix --apply "+f.ID) + ", or export the script for an admin"
	}
	return ""
}

func (m fixModel) countChosen() int { return len(m.chosenFixes()) }

// chosenFixes returns the ticked fixes in plan order.
func (m fixModel) chosenFixes() []FixView {
	var out []FixView
	for _, f := range m.fixes {
		if m.chosen[f.ID] {
			out = append(out, f)
		}
	}
	return out
}

// chosenIDs returns the IDs of the ticked fixes in plan order.
func (m fixModel) chosenIDs() []string {
	var ids []string
	for _, f := range m.chosenFixes() {
		ids = append(ids, f.ID)
	}
	return ids
}

// leave drops a pending confirmation: consent is given on the screen that
// shows the plan, not carried across stages.
func (m *fixModel) leave() {
	m.closeConfirm()
	m.refresh()
}

// closeConfirm closes the confirm step and shows a plan that arrived
// while it was open.
func (m *fixModel) closeConfirm() {
	m.confirming, m.shown, m.shownPlan = false, nil, nil
	if p := m.pending; p != nil {
		m.load(p.fixes, p.gen)
	}
}

func status(s string) tea.Cmd { return func() tea.Msg { return statusMsg(s) } }

func (m fixModel) update(msg tea.Msg) (fixModel, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return m, nil
	}
	var cmd tea.Cmd
	if m.confirming {
		m, cmd = m.confirmKey(k.String())
	} else {
		m, cmd = m.listKey(k)
	}
	m.refresh()
	return m, cmd
}

// confirmKey answers the confirm step. It lists every line of every chosen
// fix, wrapped, never cut or counted: y applies only once all of them have
// been on screen (22.8: consent needs every line seen).
func (m fixModel) confirmKey(k string) (fixModel, tea.Cmd) {
	if m.plan.scroll(k, true) {
		return m, nil
	}
	switch k {
	case "y":
		if !m.plan.whole() {
			return m, status(fmt.Sprintf("the window is too small to show every line of the plan whole (it is %dx%d): make it larger, then read the plan; n goes back", m.c.width, m.c.height))
		}
		if n := m.plan.unseen(); n > 0 {
			return m, status(fmt.Sprintf("scroll to the end of the plan first (%s not yet shown): pgdn or end", units.Count(n, "line")))
		}
		chosen, plan := m.shown, m.shownPlan
		for _, f := range chosen {
			delete(m.chosen, f.ID)
		}
		m.closeConfirm()
		return m, func() tea.Msg { return applyMsg{chosen: chosen, plan: plan} }
	case "n", "N", "esc":
		m.closeConfirm()
	case "enter":
		return m, status("press y to apply the plan shown, or n to go back")
	}
	return m, nil
}

func (m fixModel) listKey(k tea.KeyPressMsg) (fixModel, tea.Cmd) {
	if m.planning {
		if key.Matches(k, m.keys.Choose, m.keys.Confirm) {
			return m, status("still planning the fixes for what was found; esc goes back")
		}
		return m, nil
	}
	if m.detail.scroll(k.String(), false) || m.list.update(k) {
		return m, nil
	}
	switch {
	case key.Matches(k, m.keys.Choose):
		r, ok := m.at()
		if !ok {
			return m, nil
		}
		if r.item >= 0 {
			return m, m.toggleItem(r.fix, r.item)
		}
		f := m.fixes[r.fix]
		if f.Manual {
			// Advice changes nothing here: it is read, not applied (and
			// never counted as applied or verified).
			return m, status(f.ID + " is advice: nothing runs here. Its lines are below; the script e exports on Summary carries them too")
		}
		if why := m.blocked(f); why != "" {
			if len(f.Items) > 0 && len(f.ChosenItems()) == 0 {
				return m, status("tick the PIDs to end first (the rows under it), then the fix")
			}
			return m, status("cannot apply " + f.ID + " here: " + why)
		}
		m.chosen[f.ID] = !m.chosen[f.ID]
	case key.Matches(k, m.keys.Confirm):
		if m.countChosen() > 0 {
			m.confirming = true
			m.shown, m.shownPlan = m.chosenFixes(), slices.Clone(m.fixes)
			return m, nil
		}
		// Nothing ticked: say so rather than skip the step unseen.
		return m, status("no fix is chosen: space ticks the one under the cursor, then enter; tab goes on without fixing")
	}
	return m, nil
}

// row draws row i of the checklist: a fix's box, risk and title, or one of
// its items, indented under it.
func (m fixModel) row(i int, selected bool) string {
	st := m.c.st
	r := m.rows()[i]
	f := m.fixes[r.fix]
	if r.item >= 0 {
		it := f.Items[r.item]
		box, cur := st.m.off, "  "
		if it.Chosen {
			box = st.ok.Render(st.m.on)
		}
		label := textsafe.Clean(it.Label)
		if selected {
			cur, label = st.sel.Render(st.m.cursor)+" ", st.sel.Render(label)
		}
		return "     " + cur + box + " " + label
	}
	box := st.m.off
	if m.chosen[f.ID] {
		box = st.ok.Render(st.m.on)
	}
	cur := "  "
	title := textsafe.Clean(f.Title)
	if selected {
		cur = st.sel.Render(st.m.cursor) + " "
		title = st.sel.Render(title)
	}
	// The risk comes before the title, in a column of its own, so a
	// narrow window cuts the title (its detail is below) and never the risk.
	tag := f.Risk
	if f.NeedsRoot {
		tag += "+root"
	}
	if f.Manual {
		box, tag = st.dim.Render(" - "), "advice"
	}
	if why := m.blocked(f); why != "" {
		box = st.dim.Render(" - ")
		tag = "not here"
		if len(f.Items) > 0 && len(f.ChosenItems()) == 0 {
			tag = "pick PIDs"
		}
	}
	return cur + box + " " + st.dim.Render(fmt.Sprintf("%-11s", tag)) + " " + title
}

// refresh rebuilds the pagers' content for the current state and size.
func (m *fixModel) refresh() {
	w, h := m.c.width, m.c.bodyHeight()
	// The list's room holds its rows and, when it pages, its position line.
	m.list.setSize(w, max(h/3, 3)+1)
	sig := fmt.Sprint(w, h, m.c.height, m.confirming, m.list.index(), m.chosenIDs(), m.gen, m.planning, len(m.fixes), len(m.shown), m.c.deps.Host != nil && m.c.deps.Host.Simulated)
	for _, f := range m.fixes {
		sig += fmt.Sprint(f.Plan, f.ChosenItems())
	}
	if sig == m.built {
		return
	}
	m.built = sig
	if m.confirming {
		// Title and blank above; the position line and the prompt below,
		// all in the rows surely on screen: a line of a plan counts as read
		// only when it was (pager.whole).
		m.plan.set(m.planText(), w, m.c.shownRows()-4)
		return
	}
	used := 2 + m.list.height() + 1
	m.detail.set(m.detailText(), w, h-used-1)
}

// riskWords say what a risk grade means. Specifics (how a change is
// undone, what is left alone) are in each fix's own summary.
var riskWords = map[string]string{
	"none":   "advice only: nothing on this machine changes",
	"low":    "removes only what was proven unused",
	"medium": "changes system configuration",
	"high":   "ends processes",
}

// wrapLine breaks one shell line to width cells without losing a
// character (paths and long words are broken too): what is consented to is
// every character of it.
func wrapLine(l string, width int) []string {
	if width < 1 || ansi.StringWidth(l) <= width {
		return []string{l}
	}
	return strings.Split(ansi.Wrap(l, width, "/"), "\n")
}

// previewLines draws a fix's shell lines at width: each wrapped in full,
// continuations marked, so none is cut.
func (m fixModel) previewLines(b *strings.Builder, lines []string, indent string, width int) {
	st := m.c.st
	for _, l := range lines {
		for i, part := range wrapLine(textsafe.Clean(l), max(width-len(indent)-2, 10)) {
			lead := indent
			if i > 0 {
				lead += "  "
			}
			b.WriteString(lead + st.hint.Render(part) + "\n")
		}
	}
}

// planText is the confirm step's plan: per fix its title, risk, what it
// does, every line it stands for and what it leaves alone — all of it,
// wrapped, never counted or cut (the confirm step's y needs every line
// seen).
func (m fixModel) planText() string {
	st := m.c.st
	w := m.c.width
	var b strings.Builder
	for i, f := range m.shown {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(st.m.bullet + " " + strings.ReplaceAll(renderLines(st.title, wrapText(textsafe.Clean(f.Title), w-2)), "\n", "\n  ") + "\n")
		risk := "risk: " + f.Risk
		if f.NeedsRoot {
			risk += " (needs root)"
		}
		if why := riskWords[f.Risk]; why != "" {
			risk += " — " + why
		}
		b.WriteString(indent(wrapText(risk, w-4), "    ", &st.dim) + "\n")
		if f.Summary != "" {
			b.WriteString(indent(wrapText(textsafe.Clean(f.Summary), w-4), "    ", nil) + "\n")
		}
		if len(f.Preview) > 0 {
			head := "It runs:"
			if f.Manual {
				head = "Advice (nothing runs here; use these lines where they belong):"
			}
			b.WriteString(indent(wrapText(head, w-4), "    ", &st.dim) + "\n")
			m.previewLines(&b, f.Preview, "      ", w)
		}
		if len(f.Warnings) > 0 {
			b.WriteString("    " + st.warn.Render(fmt.Sprintf("leaves %s alone:", units.Count(len(f.Warnings), "item"))) + "\n")
			for _, l := range f.Warnings {
				b.WriteString(indent(wrapText(textsafe.Clean(l), w-6), "      ", &st.dim) + "\n")
			}
		}
	}
	if m.c.deps.Host != nil && m.c.deps.Host.Simulated {
		b.WriteString("\n" + st.dim.Render("Simulated server: only the simulation changes.") + "\n")
	}
	return b.String()
}

// detailText is the selected fix's summary and its exact lines.
func (m fixModel) detailText() string {
	r, ok := m.at()
	if !ok {
		return ""
	}
	f := m.fixes[r.fix]
	st := m.c.st
	w := m.c.width
	var b strings.Builder
	if r.item >= 0 {
		it := f.Items[r.item]
		b.WriteString(wrapText(textsafe.Clean(it.Label), w-2) + "\n")
		b.WriteString(st.dim.Render(wrapText("job: "+textsafe.Clean(it.Group), w-2)) + "\n")
		b.WriteString(st.dim.Render(wrapText("space ticks or unticks it: "+f.ID+" ends only the ticked PIDs.", w-2)) + "\n")
		return b.String()
	}
	b.WriteString(wrapText(textsafe.Clean(f.Summary), w-2) + "\n")
	if why := m.blocked(f); why != "" {
		b.WriteString(st.warn.Render(wrapText("Not possible here: "+why, w-2)) + "\n")
		if f.Alternative != "" {
			b.WriteString(wrapText("Instead: "+f.Alternative, w-2) + "\n")
		}
	}
	for _, l := range f.Warnings {
		b.WriteString(st.dim.Render(wrapText("left alone: "+textsafe.Clean(l), w-2)) + "\n")
	}
	if len(f.Preview) > 0 {
		head := "It runs:"
		if f.Manual {
			head = "Advice (nothing runs here):"
		}
		b.WriteString(st.dim.Render(head) + "\n")
		m.previewLines(&b, f.Preview, "  ", w)
	}
	return b.String()
}

func (m fixModel) view() string {
	st := m.c.st
	var b strings.Builder
	if m.planning && !m.confirming {
		return m.c.spin + " " + st.title.Render("Planning fixes for what was found…") + "\n\n" +
			st.dim.Render(wrapText("Reading the machine: segments are proven unused and leftover ranks are watched for progress. Nothing runs until you confirm.", m.c.width-2))
	}
	if len(m.fixes) == 0 && !m.confirming {
		return "No fix applies to what was found."
	}
	if m.confirming {
		n := len(m.shown)
		b.WriteString(st.title.Render(fmt.Sprintf("Apply %s?", units.Count(n, "fix", "fixes"))) +
			st.dim.Render("  nothing has run yet") + "\n\n")
		b.WriteString(m.plan.view() + "\n")
		// What is left to read comes first: it fits a narrow window.
		pos := m.plan.position()
		if u := m.plan.unseen(); u > 0 {
			pos = fmt.Sprintf("%s not yet shown · %s", units.Count(u, "line"), m.plan.span())
		}
		b.WriteString(st.dim.Render(truncate(pos, m.c.width)) + "\n")
		what := "it"
		if n > 1 {
			what = fmt.Sprintf("all %d", n)
		}
		prompt := st.key.Render("y") + " apply " + what + "   " + st.key.Render("n") + " go back"
		if m.plan.unseen() > 0 {
			prompt += "   " + st.key.Render("pgdn/end") + " read on"
		}
		b.WriteString(truncate(prompt, m.c.width))
		return b.String()
	}
	head := st.title.Render("Fixes for what was found")
	// The reassurance goes where it fits whole (the help bar names space).
	for _, more := range []string{"  (space to choose; nothing runs until you confirm)", "  (nothing runs until you confirm)"} {
		if lipgloss.Width(head+more) <= m.c.width {
			head += st.dim.Render(more)
			break
		}
	}
	b.WriteString(truncate(head, m.c.width) + "\n\n")
	b.WriteString(m.list.view(m.row, st.dim) + "\n")
	b.WriteString("\n" + m.detail.view() + "\n")
	b.WriteString(st.dim.Render(truncate(m.detail.position(), m.c.width)))
	return b.String()
}

func (m fixModel) keyMap() keyMap {
	if m.planning && !m.confirming {
		return keyMap{}
	}
	if m.confirming {
		return keyMap{Short: []key.Binding{bind("y", "apply", "y"), bind("n", "back", "n", "N", "esc"),
			bind("pgdn/end", "read the plan", "pgdown", "end")}}
	}
	k := keyMap{Short: []key.Binding{m.c.list.Move("select"), m.keys.Choose, m.keys.Confirm, recheckKey}}
	if m.detail.scrolls() {
		k.Short = append(k.Short, m.c.list.Scroll)
	}
	return k
}
