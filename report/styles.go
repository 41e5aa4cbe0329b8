package report

import (
	"charm.land/lipgloss/v2"

	"github.com/ncclwiz/ncclwiz/checks"
)

type styles struct {
	title, dim, hint          lipgloss.Style
	ok, info, warn, err, skip lipgloss.Style
}

func newStyles() styles {
	return styles{
		title: lipgloss.NewStyle().Bold(true),
		dim:   lipgloss.NewStyle().Foreground(lipgloss.Color("245")),
		hint:  lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		ok:    lipgloss.NewStyle().Foreground(lipgloss.Color("2")),
		info:  lipgloss.NewStyle().Foreground(lipgloss.Color("4")),
		warn:  lipgloss.NewStyle().Foreground(lipgloss.Color("3")).Bold(true),
		err:   lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		skip:  lipgloss.NewStyle().Foreground(lipgloss.Color("245")),
	}
}

func (s styles) mark(sev checks.Severity, m marks) string {
	switch sev {
	case checks.Error:
		return s.err.Render(m.err)
	case checks.Warn:
		return s.warn.Render(m.warn)
	case checks.Skipped:
		return s.skip.Render(m.skip)
	case checks.Info:
		return s.info.Render(m.info)
	default:
		return s.ok.Render(m.ok)
	}
}
