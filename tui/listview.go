package tui

import (
	"fmt"
	"io"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/list"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// listView is the wizard's one cursor list (Start, Findings, Fix, and any
// screen that lists things to pick): a bubbles list.Model without its
// title, filter, status bar, pagination and help — the wizard draws its own
// header and help bar — that answers only the cursor keys, so the screens'
// letters (g, a, n, x…) stay theirs. The screen draws each row from its
// index at view time, so the list never holds a stale copy of the screen's
// data. A list taller than its room pages, with an "(i of n)" line.
type listView struct {
	l     list.Model
	keys  listKeys
	rows  int
	rowH  int
	width int
	// maxH is the room the screen gives the list.
	maxH int
	// paged says the rows do not fit: the last line is the position.
	paged bool
}

// row is a list item: the index of a row of the screen's data.
type row int

func (row) FilterValue() string { return "" }

// rowDelegate draws the rows with the screen's function, each cut to the
// width and padded to the row height.
type rowDelegate struct {
	h, width int
	draw     func(i int, selected bool) string
}

func (d rowDelegate) Render(w io.Writer, m list.Model, i int, _ list.Item) {
	var lines []string
	if d.draw != nil {
		lines = strings.Split(strings.TrimRight(d.draw(i, i == m.Index()), "\n"), "\n")
	}
	lines = lines[:min(len(lines), d.h)]
	for len(lines) < d.h {
		lines = append(lines, "")
	}
	for j, l := range lines {
		lines[j] = truncate(l, d.width)
	}
	fmt.Fprint(w, strings.Join(lines, "\n"))
}

func (d rowDelegate) Height() int                         { return d.h }
func (d rowDelegate) Spacing() int                        { return 0 }
func (d rowDelegate) Update(tea.Msg, *list.Model) tea.Cmd { return nil }

// newListView makes a list whose rows are rowH lines high; wrap makes the
// cursor go round from the last row to the first.
func newListView(keys listKeys, rowH int, wrap bool) listView {
	rowH = max(rowH, 1)
	l := list.New(nil, rowDelegate{h: rowH}, 80, rowH)
	l.SetShowTitle(false)
	l.SetShowFilter(false)
	l.SetFilteringEnabled(false)
	l.SetShowStatusBar(false)
	l.SetShowPagination(false)
	l.SetShowHelp(false)
	l.DisableQuitKeybindings()
	l.InfiniteScrolling = wrap
	// Only the cursor keys: every other key is the screen's.
	l.KeyMap = list.KeyMap{CursorUp: keys.Up, CursorDown: keys.Down}
	return listView{l: l, keys: keys, rowH: rowH, width: 80, maxH: rowH}
}

// setRows sets how many rows there are, keeping the cursor where it was
// when it still points at a row.
func (v *listView) setRows(n int) {
	i := v.index()
	v.rows = max(n, 0)
	items := make([]list.Item, v.rows)
	for j := range items {
		items[j] = row(j)
	}
	v.l.SetItems(items)
	v.relayout()
	v.selectRow(min(i, max(v.rows-1, 0)))
}

// setSize gives the list width w and at most maxH lines.
func (v *listView) setSize(w, maxH int) {
	i := v.index()
	v.width = max(w, 1)
	v.l.SetWidth(v.width)
	v.maxH = max(maxH, 1)
	v.relayout()
	v.selectRow(i)
}

// relayout fits the list to its rows: no taller than they need, and one
// line less than its room when it pages (the position line).
func (v *listView) relayout() {
	room := v.maxH
	if room < v.rows*v.rowH {
		v.paged = true
		room--
	} else {
		v.paged = false
		room = v.rows * v.rowH
	}
	v.l.SetHeight(max(room, v.rowH))
}

// index is the selected row.
func (v listView) index() int {
	if v.rows == 0 {
		return 0
	}
	return min(v.l.Index(), v.rows-1)
}

// selectRow moves the cursor to row i.
func (v *listView) selectRow(i int) {
	if v.rows > 0 {
		v.l.Select(min(max(i, 0), v.rows-1))
	}
}

// update moves the cursor for the list's keys and reports whether k was
// one of them.
func (v *listView) update(k tea.KeyPressMsg) bool {
	switch {
	case key.Matches(k, v.keys.Up):
		v.l.CursorUp()
	case key.Matches(k, v.keys.Down):
		v.l.CursorDown()
	default:
		return false
	}
	return true
}

// height is how many lines view draws.
func (v listView) height() int {
	if v.rows == 0 {
		return 0
	}
	h := v.l.Height()
	if v.paged {
		h++
	}
	return h
}

// view draws the rows of the cursor's page with draw, and the position
// line (in style pos) when the list pages.
func (v listView) view(draw func(i int, selected bool) string, pos lipgloss.Style) string {
	if v.rows == 0 {
		return ""
	}
	l := v.l
	l.SetDelegate(rowDelegate{h: v.rowH, width: v.width, draw: draw})
	out := strings.TrimRight(l.View(), "\n")
	lines := strings.Split(out, "\n")
	lines = lines[:min(len(lines), l.Height())]
	for len(lines) < l.Height() {
		lines = append(lines, "")
	}
	for i, ln := range lines {
		lines[i] = strings.TrimRight(ln, " ") // the list pads rows to its width
	}
	if v.paged {
		lines = append(lines, pos.Render(fmt.Sprintf("  (%d of %d)", v.index()+1, v.rows)))
	}
	return strings.Join(lines, "\n")
}
