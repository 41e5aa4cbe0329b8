package tui

import (
	"slices"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
)

// The wizard's keys are bubbles key.Bindings: a screen matches presses
// against the same bindings its help lists, so the help bar cannot drift
// from what the keys do. The root draws the help with bubbles help: the
// screen's keyMap first, then the keys every stage shares (esc, q, tab, ?).
//
// A screen offers its help by implementing keyMapper.

// keyMap is one screen's help.KeyMap. Short is the one-line help, most
// important first (a narrow window drops items from the end); Full is the
// columns ? shows, Short alone when nil.
type keyMap struct {
	Short []key.Binding
	Full  [][]key.Binding
}

// ShortHelp implements help.KeyMap.
func (k keyMap) ShortHelp() []key.Binding { return k.Short }

// FullHelp implements help.KeyMap.
func (k keyMap) FullHelp() [][]key.Binding {
	if k.Full == nil {
		return [][]key.Binding{k.Short}
	}
	return k.Full
}

// keyMapper is a screen that describes its keys as bindings.
type keyMapper interface{ keyMap() keyMap }

// bind is a binding for keys whose help reads "name desc".
func bind(name, desc string, keys ...string) key.Binding {
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(name, desc))
}

// recheckKey is the root's r on the screens that show check results: it
// runs the checks again and comes back with the machine as it is now.
var recheckKey = bind("r", "re-check", "r")

// globalKeys are the keys the root answers on every screen.
type globalKeys struct {
	Back, Quit, Next, Prev, Help key.Binding
}

func newGlobalKeys() globalKeys {
	return globalKeys{
		Back: bind("esc", "back", "esc"),
		Quit: bind("q", "quit", "q", "ctrl+c"),
		Next: bind("tab", "next", "tab"),
		Prev: bind("shift+tab", "previous", "shift+tab"),
		Help: bind("?", "more keys", "?"),
	}
}

// listKeys are the keys of the wizard's cursor lists (listView) and of
// the scrolling panes beside them.
type listKeys struct {
	Up, Down, Scroll key.Binding
}

func newListKeys() listKeys {
	return listKeys{
		Up:     bind("↑/k", "up", "up", "k"),
		Down:   bind("↓/j", "down", "down", "j"),
		Scroll: bind("pgup/pgdn", "scroll", "pgup", "pgdown", "home", "end"),
	}
}

// Move is the up/down pair as one help item.
func (k listKeys) Move(desc string) key.Binding {
	return bind("↑/↓", desc, "up", "k", "down", "j")
}

// helpFor is the help.KeyMap the root shows: the screen's keys, then the
// global ones that apply here and that the screen does not already name.
func helpFor(screen keyMap, globals []key.Binding) help.KeyMap {
	named := map[string]bool{}
	for _, b := range screen.Short {
		named[b.Help().Key] = true
	}
	globals = slices.DeleteFunc(slices.Clone(globals), func(b key.Binding) bool { return named[b.Help().Key] })
	short := append(append([]key.Binding(nil), screen.Short...), globals...)
	full := append(append([][]key.Binding(nil), screen.FullHelp()...), globals)
	return keyMap{Short: short, Full: full}
}
