package tui

import (
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"

	"github.com/ncclwiz/ncclwiz/checks"
)

// Options are the terminal facts decided before the program starts.
type Options struct {
	// ASCII replaces Unicode marks and box characters (NO_COLOR, TERM=dumb,
	// non-UTF-8 locales).
	ASCII bool
	// Lang is the guide language ("en", "zh").
	Lang string
}

type marks struct {
	ok, info, warn, err, skip, cursor, on, off, sep, bullet, spin string
}

type styles struct {
	m                                  marks
	title, header, dim, hint, sel, key lipgloss.Style
	banner, ok, info, warn, err, skip  lipgloss.Style
	box                                lipgloss.Style
}

func newStyles(ascii bool) styles {
	m := marks{"✓", "i", "!", "✗", "–", "›", "[x]", "[ ]", " › ", "•", ""}
	if ascii {
		m = marks{"ok", "i", "!", "X", "-", ">", "[x]", "[ ]", " > ", "*", ""}
	}
	border := lipgloss.RoundedBorder()
	if ascii {
		border = lipgloss.ASCIIBorder()
	}
	return styles{
		m:      m,
		title:  lipgloss.NewStyle().Bold(true),
		header: lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12")),
		dim:    lipgloss.NewStyle().Foreground(lipgloss.Color("245")),
		hint:   lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		sel:    lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12")),
		key:    lipgloss.NewStyle().Bold(true),
		banner: lipgloss.NewStyle().Bold(true).Reverse(true),
		ok:     lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		info:   lipgloss.NewStyle().Foreground(lipgloss.Color("4")),
		warn:   lipgloss.NewStyle().Foreground(lipgloss.Color("3")).Bold(true),
		err:    lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		skip:   lipgloss.NewStyle().Foreground(lipgloss.Color("245")),
		box:    lipgloss.NewStyle().Border(border).Padding(0, 1),
	}
}

func (s styles) mark(sev checks.Severity) string {
	switch sev {
	case checks.Error:
		return s.err.Render(s.m.err)
	case checks.Warn:
		return s.warn.Render(s.m.warn)
	case checks.Skipped:
		return s.skip.Render(s.m.skip)
	case checks.Info:
		return s.info.Render(s.m.info)
	}
	return s.ok.Render(s.m.ok)
}

// newHelp is the help bar in the wizard's styles: bold keys, dim words.
func newHelp(st styles) help.Model {
	h := help.New()
	h.ShortSeparator = " · "
	h.Styles.ShortKey, h.Styles.FullKey = st.key, st.key
	h.Styles.ShortDesc, h.Styles.FullDesc = st.dim, st.dim
	h.Styles.ShortSeparator, h.Styles.FullSeparator, h.Styles.Ellipsis = st.dim, st.dim, st.dim
	return h
}

// indent prefixes every line of s, styled with st when it is non-nil.
func indent(s, prefix string, st *lipgloss.Style) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if st != nil {
			l = st.Render(l)
		}
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}
