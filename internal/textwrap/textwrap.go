// Package textwrap breaks plain text into lines for terminals: at word
// boundaries, measured in terminal cells (CJK runes take two), so the zh
// guides and English findings wrap the same way everywhere.
package textwrap

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// MinWidth keeps very narrow terminals readable: below it, lines overflow
// rather than degenerate into one word each.
const MinWidth = 20

// Lines wraps s to width cells. Newlines in s start new paragraphs (an empty
// line stays empty); runs of spaces collapse; a word longer than width gets a
// line of its own. An empty s gives no lines.
func Lines(s string, width int) []string {
	if s == "" {
		return nil
	}
	width = max(width, MinWidth)
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line, cells := "", 0
		for _, w := range strings.Fields(para) {
			n := ansi.StringWidth(w)
			if line != "" && cells+1+n > width {
				out = append(out, line)
				line, cells = "", 0
			}
			if line != "" {
				line += " "
				cells++
			}
			line += w
			cells += n
		}
		out = append(out, line)
	}
	return out
}

// String is Lines joined with "\n" and continuation lines prefixed by indent.
func String(s string, width int, indent string) string {
	return strings.Join(Lines(s, width), "\n"+indent)
}

// Clip shortens s to at most width terminal cells, ending in "..." when
// cut. It never splits a rune or a grapheme (a CJK command line is cut
// between characters, each two cells wide); s must already be sanitised.
func Clip(s string, width int) string {
	return ansi.Truncate(s, width, "...")
}
