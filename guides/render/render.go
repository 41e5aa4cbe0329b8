// Package render turns guide markdown into terminal text with glamour v2,
// wrapped to the window, in a style chosen from the terminal: dark or light
// in a colour terminal, "ascii" when colour is off (NO_COLOR, TERM=dumb),
// "notty" when the output is not a terminal.
package render

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"charm.land/glamour/v2"
	"github.com/charmbracelet/x/ansi"
)

// Styles (glamour standard style names).
const (
	Dark  = "dark"
	Light = "light"
	ASCII = "ascii"
	NoTTY = "notty"
)

// MinWidth is the narrowest column count glamour is asked to wrap to;
// narrower windows get glamour's output hard-wrapped to fit.
const MinWidth = 20

// Options tune rendering.
type Options struct {
	// Width is the column count to fit; lines never exceed it. 0 means 80.
	Width int
	// Style is one of Dark, Light, ASCII, NoTTY ("" means Dark).
	Style string
}

// StyleFor picks the style for a terminal: notty when the output is not a
// terminal, ascii when colour is off (NO_COLOR with any value, --no-color,
// TERM=dumb), otherwise dark or light from the background.
func StyleFor(isTTY, noColor, isDark bool) string {
	switch {
	case !isTTY:
		return NoTTY
	case noColor:
		return ASCII
	case isDark:
		return Dark
	}
	return Light
}

// Markdown renders md for a terminal: every line fits opt.Width columns
// (measured ANSI-aware), trailing padding is removed, and inline code uses
// plain spaces so commands copied from the terminal paste cleanly.
func Markdown(md string, opt Options) (string, error) {
	lines, _, err := render(md, opt)
	if err != nil {
		return "", err
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// Overflow renders md and returns the lines glamour could not fit into
// opt.Width by itself (long code lines, wide tables). Markdown hard-wraps
// them; a guide should have none at 80 columns, and tests say so.
func Overflow(md string, opt Options) ([]string, error) {
	_, over, err := render(md, opt)
	return over, err
}

func render(md string, opt Options) (lines, overflow []string, err error) {
	width := opt.Width
	if width <= 0 {
		width = 80
	}
	style := opt.Style
	if style == "" {
		style = Dark
	}
	r, err := glamour.NewTermRenderer(
		glamour.WithStandardStyle(style),
		glamour.WithWordWrap(max(width, MinWidth)),
		glamour.WithEmoji(),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("render: %w", err)
	}
	out, err := r.Render(protect(Unwrap(md)))
	if err != nil {
		return nil, nil, fmt.Errorf("render: %w", err)
	}
	out = unprotect.Replace(out)
	// Inline code is padded with no-break spaces; a command copied with
	// one of them fails in the shell.
	out = strings.ReplaceAll(out, "\u00a0", " ")
	raw := strings.Split(out, "\n")
	// Drop the blank lines glamour puts around the document.
	for len(raw) > 0 && strings.TrimSpace(ansi.Strip(raw[0])) == "" {
		raw = raw[1:]
	}
	for len(raw) > 0 && strings.TrimSpace(ansi.Strip(raw[len(raw)-1])) == "" {
		raw = raw[:len(raw)-1]
	}
	for _, l := range raw {
		l = trimRightPadding(l)
		if ansi.StringWidth(l) <= width {
			lines = append(lines, l)
			continue
		}
		overflow = append(overflow, ansi.Strip(l))
		lines = append(lines, strings.Split(ansi.Hardwrap(l, width, true), "\n")...)
	}
	return lines, overflow, nil
}

// trimRightPadding removes the spaces glamour pads lines with, also when
// they sit inside or after styling sequences.
func trimRightPadding(l string) string {
	plain := ansi.Strip(l)
	if strings.TrimRight(plain, " ") == plain {
		return l
	}
	keep := ansi.StringWidth(strings.TrimRight(plain, " "))
	return ansi.Truncate(l, keep, "")
}

// glamour wraps after '-' and '.', which splits versions ("2.\n24"),
// options ("-\n-only") and names ("socket-\ninterface"). Such characters
// are swapped for one-column look-alikes that are not break points, and
// swapped back after rendering. Spaces inside inline code become no-break
// spaces (turned back into spaces at the end too), so a short command is
// never split across lines.
const (
	keepHyphen = '\u2011' // non-breaking hyphen
	keepDot    = '\u2024' // one dot leader
	keepSpace  = '\u00a0' // no-break space
	// glamour also breaks after , ; + and |; inside code they are parts of
	// one value ("^docker,lo,virbr").
	keepComma = '\u201a' // single low-9 quotation mark
	keepSemi  = '\u037e' // Greek question mark
	keepPlus  = '\u02d6' // modifier letter plus sign
	keepBar   = '\u01c0' // Latin letter dental click
)

var (
	// a '-' or '.' followed by a non-space, not at the start of a line
	// (list markers, rules).
	inWordRe  = regexp.MustCompile(`([^\s]|\s-*)[-.]+[^\s]`)
	codeRe    = regexp.MustCompile("`[^`\n]+`")
	unprotect = strings.NewReplacer(string(keepHyphen), "-", string(keepDot), ".", string(keepSpace), " ",
		string(keepComma), ",", string(keepSemi), ";", string(keepPlus), "+", string(keepBar), "|")
	inCode = strings.NewReplacer(" ", string(keepSpace), ",", string(keepComma), ";", string(keepSemi),
		"+", string(keepPlus), "|", string(keepBar))
)

func protect(md string) string {
	swap := func(m string) string {
		r := []rune(m)
		for i := 1; i < len(r)-1; i++ {
			switch r[i] {
			case '-':
				r[i] = keepHyphen
			case '.':
				r[i] = keepDot
			}
		}
		return string(r)
	}
	var b strings.Builder
	inFence := false
	for _, l := range strings.SplitAfter(md, "\n") {
		if fenceRe.MatchString(l) {
			inFence = !inFence
		}
		t := strings.TrimSpace(l)
		if inFence || hardRuleRe.MatchString(t) || strings.HasPrefix(t, "|") {
			b.WriteString(l)
			continue
		}
		l = codeRe.ReplaceAllStringFunc(l, inCode.Replace)
		// Twice: matches overlap in "a-b-c".
		b.WriteString(inWordRe.ReplaceAllStringFunc(inWordRe.ReplaceAllStringFunc(l, swap), swap))
	}
	return b.String()
}

// joinLines joins two soft-wrapped lines: with a space, except between
// Chinese characters or next to CJK punctuation, where a space would show
// as a gap in the sentence.
func joinLines(a, b string) string {
	last, _ := utf8.DecodeLastRuneInString(a)
	first, _ := utf8.DecodeRuneInString(b)
	if (isHan(last) && isHan(first)) || isCJKPunct(last) || isCJKPunct(first) {
		return a + b
	}
	return a + " " + b
}

func isHan(r rune) bool { return unicode.Is(unicode.Han, r) }

func isCJKPunct(r rune) bool {
	return (r >= 0x3000 && r <= 0x303f) || (r >= 0xff00 && r <= 0xffef)
}

var (
	fenceRe    = regexp.MustCompile("^\\s*(```|~~~)")
	blockRe    = regexp.MustCompile(`^\s*([-*+]\s|\d+[.)]\s|#|>|\||<|$)`)
	hardRuleRe = regexp.MustCompile(`^\s*([-*_]\s*){3,}$`)
)

// Unwrap joins the soft line breaks of paragraphs and list items. Guides
// are written wrapped at ~76 columns for review in an editor, but glamour
// keeps a soft break inside a list item as a hard one and then wraps each
// piece again, leaving one-word lines. Code blocks, tables, headings and
// block starts are kept as they are.
func Unwrap(md string) string {
	in := strings.Split(md, "\n")
	out := make([]string, 0, len(in))
	inFence := false
	joinable := false // the previous output line is paragraph text
	for _, l := range in {
		if fenceRe.MatchString(l) {
			inFence = !inFence
			out = append(out, l)
			joinable = false
			continue
		}
		if inFence {
			out = append(out, l)
			continue
		}
		isBlock := blockRe.MatchString(l) || hardRuleRe.MatchString(l) || strings.HasPrefix(l, "    ") && !joinable
		if joinable && !isBlock && !strings.HasSuffix(out[len(out)-1], "  ") && !strings.HasSuffix(out[len(out)-1], `\`) {
			out[len(out)-1] = joinLines(out[len(out)-1], strings.TrimSpace(l))
			continue
		}
		out = append(out, l)
		t := strings.TrimSpace(l)
		joinable = t != "" && !strings.HasPrefix(t, "#") && !strings.HasPrefix(t, "|") && !strings.HasPrefix(t, "<")
	}
	return strings.Join(out, "\n")
}
