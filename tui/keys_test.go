package tui

import (
	"strings"
	"testing"

	"charm.land/bubbles/v2/key"
	"github.com/charmbracelet/x/ansi"
)

// The help bar is one line at 80 columns on every screen; ? opens the
// full help (every key in columns, the frame still 24 lines) and closes it.
func TestHelpBarAndFullHelp(t *testing.T) {
	for _, st := range wizardStates {
		w := &longWorld{}
		m := press(t, newTestModel(t, w.deps()), st.keys...)
		if m.browsing() {
			continue // the guide browser draws its own help (guideui's tests)
		}
		short := m.helpView()
		if strings.Contains(short, "\n") || ansi.StringWidth(short) > 80 || strings.TrimSpace(ansi.Strip(short)) == "" {
			t.Errorf("%s: short help %q", st.name, ansi.Strip(short))
		}
		if m.typing() {
			continue // ? is text there
		}
		if m.consenting() {
			// A plan or question being consented to is never covered: its
			// keys are all in the bar, and ? opens nothing over it.
			if strings.Contains(ansi.Strip(short), "?") || press(t, m, "?").helpView() != short {
				t.Errorf("%s: a full help over what is consented to: %q", st.name, ansi.Strip(short))
			}
			continue
		}
		full := press(t, m, "?")
		lines := strings.Split(view(full), "\n")
		fh := full.helpView()
		if len(lines) != 24 || !strings.Contains(fh, "\n") || !strings.Contains(ansi.Strip(fh), "quit") {
			t.Errorf("%s: full help (%d lines):\n%s", st.name, len(lines), view(full))
		}
		if back := press(t, full, "?"); back.helpView() != short {
			t.Errorf("%s: ? twice did not close the full help:\n%s", st.name, view(back))
		}
	}
}

// helpFor keeps a screen's keys in their order; the root adds its keys
// after them, once.
func TestScreenKeysAndGlobals(t *testing.T) {
	k := keyMap{Short: []key.Binding{bind("enter", "explain", "enter"), bind("esc", "start", "esc")}}
	h := helpFor(k, []key.Binding{bind("esc", "back", "esc"), bind("q", "quit", "q")})
	var got []string
	for _, b := range h.ShortHelp() {
		got = append(got, b.Help().Key+" "+b.Help().Desc)
	}
	if strings.Join(got, ", ") != "enter explain, esc start, q quit" {
		t.Errorf("short help: %v", got)
	}
	if cols := h.FullHelp(); len(cols) != 2 || len(cols[1]) != 1 {
		t.Errorf("full help columns: %v", cols)
	}
}
