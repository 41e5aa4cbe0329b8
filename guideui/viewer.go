package guideui

import (
	"strings"
	"unicode"

	"charm.land/bubbles/v2/textinput"
	"charm.land/bubbles/v2/viewport"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/guides"
)

// viewer shows one rendered guide with in-page search.
type viewer struct {
	guide   *guides.Guide
	vp      viewport.Model
	lines   []string // the rendered guide
	plain   []string // the same without styling, for search
	width   int      // the width lines were rendered for
	loading bool
	err     error

	searching bool
	input     textinput.Model
	query     string
	matches   []match
	cur       int
}

// match is one hit, in cells of a rendered line.
type match struct{ line, start, end int }

func newViewer() viewer {
	in := textinput.New()
	in.Prompt = "/"
	in.Placeholder = "search this guide"
	in.CharLimit = 80
	vp := viewport.New()
	vp.SoftWrap = false
	return viewer{vp: vp, input: in}
}

func (v *viewer) show(g *guides.Guide) {
	v.guide, v.loading, v.err = g, true, nil
	v.lines, v.plain, v.width = nil, nil, 0
	v.query, v.matches, v.cur, v.searching = "", nil, 0, false
	v.input.Blur()
	v.vp.SetContent("")
	v.vp.GotoTop()
}

// setRendered installs a rendering. A re-render after a resize keeps the
// reader at the same place (by proportion) and re-runs the search.
func (v *viewer) setRendered(msg renderedMsg, st styles) {
	frac := 0.0
	if !v.loading && v.vp.TotalLineCount() > 0 {
		frac = float64(v.vp.YOffset()) / float64(v.vp.TotalLineCount())
	}
	v.loading = false
	v.err = msg.err
	text := msg.text
	if msg.err != nil {
		text = v.guide.Document() // still readable as plain markdown
	}
	v.width = msg.width
	v.lines = strings.Split(strings.TrimRight(text, "\n"), "\n")
	v.plain = make([]string, len(v.lines))
	for i, l := range v.lines {
		v.plain[i] = ansi.Strip(l)
	}
	v.vp.SetContentLines(v.lines)
	v.vp.SetYOffset(int(frac * float64(len(v.lines))))
	if v.query != "" {
		cur := v.cur
		v.search(v.query, st)
		if cur < len(v.matches) {
			v.cur = cur
			v.paint(st)
		}
	}
}

// search finds every case-insensitive occurrence of q, highlights them and
// scrolls to the first one at or below the current position.
func (v *viewer) search(q string, st styles) {
	v.query = strings.TrimSpace(q)
	v.matches, v.cur = nil, 0
	if v.query != "" {
		needle := []rune(strings.ToLower(v.query))
		for i, l := range v.plain {
			for _, r := range findAll(l, needle) {
				v.matches = append(v.matches, match{i, r[0], r[1]})
			}
		}
		for j, mt := range v.matches {
			if mt.line >= v.vp.YOffset() {
				v.cur = j
				break
			}
		}
	}
	v.paint(st)
	v.reveal()
}

// step moves to the next (+1) or previous (-1) match, wrapping around.
func (v *viewer) step(d int, st styles) {
	if len(v.matches) == 0 {
		return
	}
	v.cur = (v.cur + d + len(v.matches)) % len(v.matches)
	v.paint(st)
	v.reveal()
}

// paint redraws the lines with the matches highlighted, the current one
// more strongly (reverse video, so it shows without colour too).
func (v *viewer) paint(st styles) {
	if len(v.matches) == 0 {
		v.vp.SetContentLines(v.lines)
		return
	}
	byLine := map[int][]lipgloss.Range{}
	for j, mt := range v.matches {
		s := st.match
		if j == v.cur {
			s = st.current
		}
		byLine[mt.line] = append(byLine[mt.line], lipgloss.NewRange(mt.start, mt.end, s))
	}
	out := make([]string, len(v.lines))
	for i, l := range v.lines {
		if rs, ok := byLine[i]; ok {
			l = lipgloss.StyleRanges(l, rs...)
		}
		out[i] = l
	}
	off := v.vp.YOffset()
	v.vp.SetContentLines(out)
	v.vp.SetYOffset(off)
}

// reveal scrolls so the current match sits in the upper third.
func (v *viewer) reveal() {
	if len(v.matches) == 0 {
		return
	}
	line := v.matches[v.cur].line
	if line < v.vp.YOffset() || line >= v.vp.YOffset()+v.vp.Height() {
		v.vp.SetYOffset(max(line-v.vp.Height()/3, 0))
	}
}

// findAll returns the cell ranges of needle (lower-case runes) in line,
// case-insensitively, without overlaps.
func findAll(line string, needle []rune) [][2]int {
	if len(needle) == 0 {
		return nil
	}
	hay := []rune(line)
	var out [][2]int
	col := 0
	cols := make([]int, len(hay)+1) // cell column where each rune starts
	for i, r := range hay {
		cols[i] = col
		col += ansi.StringWidth(string(r))
	}
	cols[len(hay)] = col
	for i := 0; i+len(needle) <= len(hay); {
		ok := true
		for j, n := range needle {
			if unicode.ToLower(hay[i+j]) != n {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, [2]int{cols[i], cols[i+len(needle)]})
			i += len(needle)
			continue
		}
		i++
	}
	return out
}
