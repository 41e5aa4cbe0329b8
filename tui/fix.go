package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/steps/flow"
	"github.com/ncclwiz/ncclwiz/textsafe"
)

type fixModel struct {
	c          *common
	fixes      []FixView
	cursor     int
	chosen     map[string]bool
	confirming bool
	planned    bool
}

func (m *fixModel) plan(problems []checks.Finding) {
	m.fixes = nil
	if m.c.deps.PlanFixes != nil {
		m.fixes = m.c.deps.PlanFixes(m.c.ctx, problems)
	}
	m.planned = true
	for id := range m.chosen {
		if !m.has(id) {
			delete(m.chosen, id)
		}
	}
	if m.cursor >= len(m.fixes) {
		m.cursor = 0
	}
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

func (m fixModel) countChosen() int { return len(m.chosenIDs()) }

// chosenIDs returns the ticked fixes in plan order.
func (m fixModel) chosenIDs() []string {
	var ids []string
	for _, f := range m.fixes {
		if m.chosen[f.ID] {
			ids = append(ids, f.ID)
		}
	}
	return ids
}

func (m fixModel) update(msg tea.Msg) (fixModel, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return m, nil
	}
	if m.confirming {
		switch k.String() {
		case "y", "Y":
			m.confirming = false
			return m, goTo(flow.Apply)
		case "n", "N", "esc":
			m.confirming = false
		}
		return m, nil
	}
	switch k.String() {
	case "up", "k":
		if m.cursor > 0 {
			m.cursor--
		}
	case "down", "j":
		if m.cursor < len(m.fixes)-1 {
			m.cursor++
		}
	case "space", "x":
		if m.cursor < len(m.fixes) {
			f := m.fixes[m.cursor]
			if why := m.blocked(f); why != "" {
				return m, func() tea.Msg { return statusMsg("cannot apply " + f.ID + " here: " + why) }
			}
			m.chosen[f.ID] = !m.chosen[f.ID]
		}
	case "enter":
		if m.countChosen() > 0 {
			m.confirming = true
			return m, nil
		}
		return m, goTo(flow.Validate)
	case "esc":
		return m, goTo(flow.Findings)
	}
	return m, nil
}

func (m fixModel) view() string {
	st := m.c.st
	var b strings.Builder
	if len(m.fixes) == 0 {
		return "No fix applies to what was found."
	}
	if m.confirming {
		b.WriteString(st.title.Render(fmt.Sprintf("Apply %s?", units.Count(m.countChosen(), "fix", "fixes"))) + "\n\n")
		for _, id := range m.chosenIDs() {
			for _, f := range m.fixes {
				if f.ID == id {
					b.WriteString(st.m.bullet + " " + st.title.Render(f.Title) + "  " + st.dim.Render("risk: "+f.Risk) + "\n")
					for _, l := range f.Preview {
						b.WriteString("    " + st.hint.Render(truncate(textsafe.Sanitize(l), m.c.width-4)) + "\n")
					}
				}
			}
		}
		if m.c.deps.Host != nil && m.c.deps.Host.Simulated {
			b.WriteString("\n" + st.dim.Render("Simulated server: only the simulation changes.") + "\n")
		}
		b.WriteString("\n" + st.key.Render("y") + " apply   " + st.key.Render("n") + " go back\n")
		return b.String()
	}
	b.WriteString(st.title.Render("Fixes for what was found") + st.dim.Render("  (space to choose; nothing runs until you confirm)") + "\n\n")
	for i, f := range m.fixes {
		box := st.m.off
		if m.chosen[f.ID] {
			box = st.ok.Render(st.m.on)
		}
		cur := "  "
		title := f.Title
		if i == m.cursor {
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
		b.WriteString(truncate(cur+box+" "+title+"  "+st.dim.Render(strings.Join(tags, ", ")), m.c.width) + "\n")
	}
	if m.cursor < len(m.fixes) {
		f := m.fixes[m.cursor]
		b.WriteString("\n" + wrapText(f.Summary, m.c.width-2) + "\n")
		if why := m.blocked(f); why != "" {
			b.WriteString(st.warn.Render(wrapText("Not possible here: "+why, m.c.width-2)) + "\n")
			if f.Alternative != "" {
				b.WriteString(wrapText("Instead: "+f.Alternative, m.c.width-2) + "\n")
			}
		}
		if len(f.Preview) > 0 {
			b.WriteString(st.dim.Render("It runs:") + "\n")
			room := max(m.c.bodyHeight()-len(m.fixes)-8, 2)
			for i, l := range f.Preview {
				if i == room {
					b.WriteString(st.dim.Render(fmt.Sprintf("  … %s more; the exported script has all", units.Count(len(f.Preview)-room, "line"))) + "\n")
					break
				}
				b.WriteString("  " + st.hint.Render(truncate(textsafe.Sanitize(l), m.c.width-2)) + "\n")
			}
		}
	}
	return b.String()
}

func (m fixModel) keys() [][2]string {
	if m.confirming {
		return [][2]string{{"y", "apply"}, {"n", "back"}}
	}
	return [][2]string{{"↑/↓", "select"}, {"space", "choose"}, {"enter", "apply chosen / skip"}, {"esc", "findings"}}
}
