package guideui

import (
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/guides/render"
)

// A paste types into the list's filter and the viewer's search, as typing
// would: the browser forwards what is not a key press to the field open.
func TestPasteIntoFilterAndSearch(t *testing.T) {
	m := sized(t, Options{Style: render.ASCII}, 100, 30)
	m, _ = press(t, m, "/")
	var cmd tea.Cmd
	m, cmd = m.Update(tea.PasteMsg{Content: "sigbus"})
	m, _ = run(t, m, cmd)
	m, _ = press(t, m, "enter")
	vis := m.list.VisibleItems()
	if len(vis) == 0 || vis[0].(item).g.ID != "shm-sigbus" {
		t.Fatalf("pasted filter 'sigbus' shows %d items, first %v", len(vis), vis)
	}
	m, _ = press(t, m, "enter", "/")
	m, cmd = m.Update(tea.PasteMsg{Content: "Bus error"})
	m, _ = run(t, m, cmd)
	if got := m.v.input.Value(); got != "Bus error" {
		t.Errorf("search field after paste: %q", got)
	}
}
