package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// applyMsg is the one way fixes get applied: the confirm step sends it
// after the user's y, with the exact views the confirm screen showed.
type applyMsg struct {
	chosen []FixView
	// plan is the whole plan the choice was made from (for verdicts: which
	// other fixes could still answer a remaining problem).
	plan []FixView
}

// collapseOver is how many shell lines a fix may have before the confirm
// step shows a count instead (e lists them all).
const collapseOver = 4

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
	// expanded lists every line of every chosen fix on the confirm step.
	expanded bool
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
			Confirm: bind("enter", "confirm chosen / skip", "enter"),
		}}
}

// selected is the fix under the cursor.
func (m fixModel) selected() (FixView, bool) {
	if i := m.list.index(); i < len(m.fixes) {
		return m.fixes[i], true
	}
	return FixView{}, false
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
	if m.list.index() >= len(m.fixes) {
		m.list.selectRow(0)
	}
	m.list.setRows(len(m.fixes))
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
		return "needs root: run sudo ncclwiz fix --apply " + f.ID + ", or export the script for an admin"
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

func (m fixModel) confirmKey(k string) (fixModel, tea.Cmd) {
	if m.plan.scroll(k, true) {
		return m, nil
	}
	switch k {
	case "y":
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
	case "e":
		m.expanded = !m.expanded
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
		if f, ok := m.selected(); ok {
			if why := m.blocked(f); why != "" {
				return m, status("cannot apply " + f.ID + " here: " + why)
			}
			m.chosen[f.ID] = !m.chosen[f.ID]
		}
	case key.Matches(k, m.keys.Confirm):
		if m.countChosen() > 0 {
			m.confirming, m.expanded = true, false
			m.shown, m.shownPlan = m.chosenFixes(), slices.Clone(m.fixes)
			return m, nil
		}
		return m, goTo(flow.Validate)
	}
	return m, nil
}

// row draws fix i of the checklist: its box, title and tags.
func (m fixModel) row(i int, selected bool) string {
	st := m.c.st
	f := m.fixes[i]
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
	tags := []string{"risk " + f.Risk}
	if f.NeedsRoot {
		tags = append(tags, "root")
	}
	if why := m.blocked(f); why != "" {
		box = st.dim.Render(" - ")
		tags = append(tags, "not here")
	}
	return cur + box + " " + title + "  " + st.dim.Render(strings.Join(tags, ", "))
}

// refresh rebuilds the pagers' content for the current state and size.
func (m *fixModel) refresh() {
	w, h := m.c.width, m.c.bodyHeight()
	// The list's room holds its rows and, when it pages, its position line.
	m.list.setSize(w, max(h/3, 3)+1)
	sig := fmt.Sprint(w, h, m.confirming, m.expanded, m.list.index(), m.chosenIDs(), m.gen, m.planning, len(m.fixes), len(m.shown), m.c.deps.Host != nil && m.c.deps.Host.Simulated)
	if len(m.fixes) > 0 {
		sig += fmt.Sprint(m.fixes[0].Plan)
	}
	if sig == m.built {
		return
	}
	m.built = sig
	if m.confirming {
		// Title and blank above; the position line and the prompt below.
		m.plan.set(m.planText(), w, h-4)
		return
	}
	used := 2 + m.list.height() + 1
	m.detail.set(m.detailText(), w, h-used-1)
}

var riskWords = map[string]string{
	"none":   "prints advice only",
	"low":    "removes only what was proven unused",
	"medium": "changes system configuration; reversible (backups)",
	"high":   "ends processes",
}

// actions counts the shell lines of a preview that do something.
func actions(preview []string) int {
	n := 0
	for _, l := range preview {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			n++
		}
	}
	return n
}

// planText is the confirm step's plan: per fix its title, risk, and its
// lines (a count with e to expand when there are many) and what it leaves
// alone.
func (m fixModel) planText() string {
	st := m.c.st
	w := m.c.width
	var b strings.Builder
	for i, f := range m.shown {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(truncate(st.m.bullet+" "+st.title.Render(textsafe.Clean(f.Title)), w) + "\n")
		risk := "risk: " + f.Risk
		if f.NeedsRoot {
			risk += " (needs root)"
		}
		if why := riskWords[f.Risk]; why != "" {
			risk += " — " + why
		}
		b.WriteString(indent(wrapText(risk, w-4), "    ", &st.dim) + "\n")
		if m.expanded && f.Summary != "" {
			b.WriteString(indent(wrapText(textsafe.Clean(f.Summary), w-4), "    ", nil) + "\n")
		}
		n := actions(f.Preview)
		if m.expanded || len(f.Preview) <= collapseOver {
			for _, l := range f.Preview {
				b.WriteString("    " + st.hint.Render(truncate(textsafe.Clean(l), w-4)) + "\n")
			}
		} else {
			b.WriteString("    " + units.Count(n, "command") + st.dim.Render(" (e lists every line)") + "\n")
		}
		if len(f.Warnings) > 0 {
			b.WriteString("    " + st.warn.Render(fmt.Sprintf("leaves %s alone", units.Count(len(f.Warnings), "file"))) + "\n")
			if m.expanded {
				for _, l := range f.Warnings {
					b.WriteString(st.dim.Render(truncate("      "+textsafe.Clean(l), w)) + "\n")
				}
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
	f, ok := m.selected()
	if !ok {
		return ""
	}
	st := m.c.st
	w := m.c.width
	var b strings.Builder
	b.WriteString(wrapText(textsafe.Clean(f.Summary), w-2) + "\n")
	if why := m.blocked(f); why != "" {
		b.WriteString(st.warn.Render(wrapText("Not possible here: "+why, w-2)) + "\n")
		if f.Alternative != "" {
			b.WriteString(wrapText("Instead: "+f.Alternative, w-2) + "\n")
		}
	}
	for _, l := range f.Warnings {
		b.WriteString(st.dim.Render(truncate("left alone: "+textsafe.Clean(l), w)) + "\n")
	}
	if len(f.Preview) > 0 {
		b.WriteString(st.dim.Render("It runs:") + "\n")
		for _, l := range f.Preview {
			b.WriteString("  " + st.hint.Render(truncate(textsafe.Clean(l), w-2)) + "\n")
		}
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
		pos := m.plan.position()
		if u := m.plan.unseen(); u > 0 {
			pos += fmt.Sprintf(" (%s not yet shown)", units.Count(u, "line"))
		}
		b.WriteString(st.dim.Render(truncate(pos, m.c.width)) + "\n")
		what, more := "it", " every line"
		if n > 1 {
			what = fmt.Sprintf("all %d", n)
		}
		if m.expanded {
			more = " fewer lines"
		}
		prompt := st.key.Render("y") + " apply " + what + "   " + st.key.Render("n") + " go back   " + st.key.Render("e") + more
		b.WriteString(truncate(prompt, m.c.width))
		return b.String()
	}
	b.WriteString(truncate(st.title.Render("Fixes for what was found")+st.dim.Render("  (space to choose; nothing runs until you confirm)"), m.c.width) + "\n\n")
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
		more := "every line"
		if m.expanded {
			more = "fewer lines"
		}
		return keyMap{Short: []key.Binding{bind("y", "apply", "y"), bind("n", "back", "n", "N", "esc"),
			bind("pgdn/end", "read the plan", "pgdown", "end"), bind("e", more, "e")}}
	}
	k := keyMap{Short: []key.Binding{m.c.list.Move("select"), m.keys.Choose, m.keys.Confirm}}
	if m.detail.scrolls() {
		k.Short = append(k.Short, m.c.list.Scroll)
	}
	return k
}
