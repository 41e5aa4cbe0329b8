package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"charm.land/bubbles/v2/viewport"
)

// pager is a scrollable region (a bubbles viewport) that remembers how far
// down it has been displayed since its content or size last changed, so a
// screen can tell whether everything on it has been on screen at least once.
// Keys are mapped explicitly (scroll) rather than through the viewport's
// default keymap, whose space and letters would clash with screen keys.
type pager struct {
	vp      viewport.Model
	content string
	// seen is how many lines from the top have been displayed.
	seen int
	// hidden: the pager was given no row on screen (a window too short
	// for it), so nothing counts as displayed; cut: a line was wider than
	// the pager and shows ending in "…". Either way the content is not on
	// screen whole (whole), which consent needs.
	hidden, cut bool
}

func newPager() pager {
	return pager{vp: viewport.New(viewport.WithWidth(80), viewport.WithHeight(5))}
}

// set gives the pager its content and size. A different content or size
// starts the seen count afresh: what was displayed before is not what the
// user would now be consenting to.
func (p *pager) set(content string, width, height int) {
	content = strings.TrimRight(content, "\n")
	hidden := width < 1 || height < 1
	width, height = max(width, 1), max(height, 1)
	// A line wider than the pane ends in "…" (a table's row, a long path):
	// never cut mid-word without saying so.
	cut := false
	if lines := strings.Split(content, "\n"); slices.ContainsFunc(lines, func(l string) bool { return ansi.StringWidth(l) > width }) {
		for i, l := range lines {
			lines[i] = truncate(l, width)
		}
		content = strings.Join(lines, "\n")
		cut = true
	}
	if content == p.content && width == p.vp.Width() && height == p.vp.Height() && hidden == p.hidden {
		return
	}
	p.hidden, p.cut = hidden, cut
	changed := content != p.content
	p.content = content
	p.vp.SetWidth(width)
	p.vp.SetHeight(height)
	p.vp.SetContent(content)
	p.seen = 0
	if changed {
		p.vp.GotoTop()
	} else {
		// A resize keeps the position (clamped by the viewport).
		p.vp.SetYOffset(p.vp.YOffset())
	}
	p.mark()
}

// mark records the lines now on screen as seen.
func (p *pager) mark() {
	if p.hidden {
		return
	}
	p.seen = max(p.seen, min(p.vp.YOffset()+p.vp.Height(), p.vp.TotalLineCount()))
}

// whole reports whether the pager is on screen with every line whole (no
// line cut by the width, at least one row of the window).
func (p pager) whole() bool { return !p.hidden && !p.cut }

// scroll handles the scrolling keys and reports whether k was one.
// lines says whether up/down (and j/k) scroll here; screens with a cursor
// keep those for the cursor.
func (p *pager) scroll(k string, lines bool) bool {
	switch k {
	case "pgdown":
		p.vp.PageDown()
	case "pgup":
		p.vp.PageUp()
	case "home":
		p.vp.GotoTop()
	case "end", "G":
		p.vp.GotoBottom()
	case "down", "j":
		if !lines {
			return false
		}
		p.vp.ScrollDown(1)
	case "up", "k":
		if !lines {
			return false
		}
		p.vp.ScrollUp(1)
	default:
		return false
	}
	p.mark()
	return true
}

// unseen is how many lines have not been displayed yet.
func (p pager) unseen() int { return max(p.vp.TotalLineCount()-p.seen, 0) }

// scrolls reports whether the content is taller than the pager.
func (p pager) scrolls() bool { return p.vp.TotalLineCount() > p.vp.Height() }

// view draws the visible lines, cut to exactly the pager's height.
func (p pager) view() string {
	lines := strings.Split(p.vp.View(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// span says which lines are visible ("lines 3-17 of 40"), "" when all are.
func (p pager) span() string {
	if !p.scrolls() {
		return ""
	}
	return fmt.Sprintf("lines %d-%d of %d", p.vp.YOffset()+1, min(p.vp.YOffset()+p.vp.Height(), p.vp.TotalLineCount()), p.vp.TotalLineCount())
}

// position says where the visible lines are, for a hint line.
func (p pager) position() string {
	total := p.vp.TotalLineCount()
	if !p.scrolls() {
		return ""
	}
	first := p.vp.YOffset() + 1
	last := min(p.vp.YOffset()+p.vp.Height(), total)
	where := "pgdn/end for more"
	if p.vp.AtBottom() {
		where = "end; pgup/home to go back"
	}
	return fmt.Sprintf("lines %d-%d of %d · %s", first, last, total, where)
}
