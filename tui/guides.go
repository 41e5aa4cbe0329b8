package tui

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/guideui"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// The Explain, Learn and Guides stages are the guide browser (guideui),
// embedded: one implementation of the list, the viewer and the search.
// Explain shows the guides for what was found (or the guide a screen
// asked for); Learn the onboarding track; Guides every guide. The
// browser's esc closes its search, then its guide, then leaves; the root
// then goes back to where the reader came from.

// openGuideMsg asks the root to show one guide in the Explain stage; Esc
// in it returns to the screen that asked (the history records it).
type openGuideMsg struct {
	id string
	// back is where Esc returns ("": the stage that asked).
	back flow.Stage
}

// noGuides is what the guide stages show without a guide browser.
type noGuides struct{ c *common }

func (n noGuides) view() string {
	if n.c.deps.GuidesError != "" {
		return "Guides could not be loaded: " + n.c.deps.GuidesError
	}
	return "Guides are not available in this build."
}

func (n noGuides) keyMap() keyMap { return keyMap{} }

// explainTitle names the Explain stage's list.
func explainTitle(ids []string) string {
	if len(ids) == 0 {
		return "No guide matches the problems found"
	}
	return "Guides for what was found"
}

// openGuides builds the browser for stage s over opt and, when open is
// set, shows that guide. It returns nil without a browser (noGuides).
func (m *Model) openGuides(s flow.Stage, opt guideui.Options, open string) tea.Cmd {
	if m.c.deps.Browser == nil {
		m.hasGuides = false
		return nil
	}
	opt.Embedded = true
	if s == flow.Explain {
		opt.Keys = []key.Binding{bind("tab", "fixes", "tab")}
	}
	m.guides, m.hasGuides = m.c.deps.Browser(opt), true
	cmd := m.guides.SetSize(m.c.width, m.c.height-2)
	if open != "" {
		cmd = tea.Batch(cmd, guideui.Open(open))
	}
	return cmd
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
