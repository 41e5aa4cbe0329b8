package guideui

import "charm.land/bubbles/v2/key"

// keyMap holds the browser's own bindings; the list and the viewport keep
// theirs for cursor movement and scrolling. Only keys, no mouse: the
// browser must work over any SSH terminal.
type keyMap struct {
	// list
	Open, Track, Quit key.Binding
	// viewer
	Up, Down, Scroll, PageUp, PageDown key.Binding
	Top, Bottom                        key.Binding
	Search, Next, Prev                 key.Binding
	NextGuide, PrevGuide               key.Binding
	Back, Help                         key.Binding
	// search prompt
	Accept, Cancel key.Binding
}

// newKeyMap builds the bindings; embedded in a larger program, the list's
// esc goes back there rather than quitting.
func newKeyMap(embedded bool) keyMap {
	quit := key.NewBinding(key.WithKeys("q", "esc"), key.WithHelp("q", "quit"))
	if embedded {
		quit = key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back"))
	}
	return keyMap{
		Open:      key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open")),
		Track:     key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "learn track / all")),
		Quit:      quit,
		Up:        key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:      key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Scroll:    key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "scroll")),
		PageUp:    key.NewBinding(key.WithKeys("pgup", "b"), key.WithHelp("pgup/b", "page up")),
		PageDown:  key.NewBinding(key.WithKeys("pgdown", "space", "f"), key.WithHelp("pgdn/space", "page down")),
		Top:       key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g/home", "top")),
		Bottom:    key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G/end", "bottom")),
		Search:    key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "search")),
		Next:      key.NewBinding(key.WithKeys("n"), key.WithHelp("n/N", "match")),
		Prev:      key.NewBinding(key.WithKeys("N"), key.WithHelp("N", "previous match")),
		NextGuide: key.NewBinding(key.WithKeys("]"), key.WithHelp("]/[", "learn step")),
		PrevGuide: key.NewBinding(key.WithKeys("["), key.WithHelp("[", "previous step")),
		Back:      key.NewBinding(key.WithKeys("esc", "q", "backspace", "left", "h"), key.WithHelp("esc", "back")),
		Help:      key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "keys")),
		Accept:    key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "find")),
		Cancel:    key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
	}
}

// viewerHelp is the help.KeyMap of the viewer.
type viewerHelp struct {
	k       keyMap
	inTrack bool
	extra   []key.Binding // the parent's keys
}

// ShortHelp is ordered so that what matters most survives a narrow
// window: the help bar drops items from the end.
func (h viewerHelp) ShortHelp() []key.Binding {
	out := []key.Binding{h.k.Back, h.k.Scroll, h.k.Search, h.k.Next}
	if h.inTrack {
		out = append(out, h.k.NextGuide)
	}
	out = append(out, h.extra...)
	return append(out, h.k.Help)
}

func (h viewerHelp) FullHelp() [][]key.Binding {
	nav := []key.Binding{h.k.Up, h.k.Down, h.k.PageUp, h.k.PageDown, h.k.Top, h.k.Bottom}
	find := []key.Binding{h.k.Search, h.k.Next, h.k.Prev}
	other := append([]key.Binding{h.k.Back}, h.extra...)
	other = append(other, h.k.Help)
	if h.inTrack {
		other = append([]key.Binding{h.k.NextGuide, h.k.PrevGuide}, other...)
	}
	return [][]key.Binding{nav, find, other}
}

// searchHelp is shown while the search prompt is open.
type searchHelp struct{ k keyMap }

func (h searchHelp) ShortHelp() []key.Binding  { return []key.Binding{h.k.Accept, h.k.Cancel} }
func (h searchHelp) FullHelp() [][]key.Binding { return [][]key.Binding{h.ShortHelp()} }
