package termio

import (
	"bytes"
	"os"
	"strings"
	"sync"
)

// QuietTerminal is a terminal output that never asks the terminal
// anything: its Write drops every query sequence (mode reports, device
// attributes, the kitty keyboard query, cursor and size reports, colour,
// clipboard and termcap queries) and passes everything else unchanged.
//
// The wizard's library (bubbletea) queries the terminal when it starts
// (DECRQM 2026 and 2027, CSI ? u). Over a slow SSH link the replies can
// arrive after the wizard has stopped reading, in the shell, as keys —
// and a terminal that answers late can answer while the user types. The
// wizard needs none of the answers (it works without synchronized output,
// grapheme mode and the kitty protocol), so it never asks: what the
// README promises. It embeds the *os.File so the library still sees a
// terminal (its size, raw mode, resize signals).
type QuietTerminal struct {
	*os.File
	mu sync.Mutex
	// held is an escape sequence cut at the end of a write, kept until
	// the next write completes it.
	held []byte
}

// NewQuietTerminal wraps f.
func NewQuietTerminal(f *os.File) *QuietTerminal { return &QuietTerminal{File: f} }

// Write writes p without its query sequences; it reports all of p written.
func (q *QuietTerminal) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	buf := append(q.held, p...)
	out, rest := StripQueries(buf)
	q.held = append([]byte(nil), rest...)
	if len(out) > 0 {
		if _, err := q.File.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// StripQueries removes the terminal queries from b. rest is an escape
// sequence not yet complete at the end of b (to be completed by what
// follows); out is everything else, queries dropped.
func StripQueries(b []byte) (out, rest []byte) {
	out = make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if b[i] != 0x1b {
			j := bytes.IndexByte(b[i:], 0x1b)
			if j < 0 {
				j = len(b) - i
			}
			out = append(out, b[i:i+j]...)
			i += j
			continue
		}
		n, query, complete := sequence(b[i:])
		if !complete {
			return out, b[i:]
		}
		if !query {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out, nil
}

// sequence measures the escape sequence at the start of b (b[0] is ESC):
// its length, whether it is a query, and whether it is complete.
func sequence(b []byte) (n int, query, complete bool) {
	if len(b) < 2 {
		return 0, false, false
	}
	switch b[1] {
	case '[': // CSI: parameters, intermediates, a final byte
		j := 2
		for j < len(b) && b[j] >= 0x30 && b[j] <= 0x3f {
			j++
		}
		params := string(b[2:j])
		k := j
		for k < len(b) && b[k] >= 0x20 && b[k] <= 0x2f {
			k++
		}
		if k >= len(b) {
			return 0, false, false
		}
		return k + 1, csiQuery(params, string(b[j:k]), b[k]), true
	case ']', 'P', '_', '^', 'X': // OSC, DCS, APC, PM, SOS: up to ST (or BEL for OSC)
		for j := 2; j < len(b); j++ {
			if b[j] == 0x07 && b[1] == ']' {
				return j + 1, stringQuery(b[1], string(b[2:j])), true
			}
			if b[j] == 0x1b {
				if j+1 >= len(b) {
					return 0, false, false
				}
				if b[j+1] == '\\' {
					return j + 2, stringQuery(b[1], string(b[2:j])), true
				}
			}
		}
		return 0, false, false
	}
	return 2, false, true // a two-byte escape (ESC 7, ESC =, …)
}

// csiQuery reports whether a CSI sequence asks the terminal to answer.
func csiQuery(params, inter string, final byte) bool {
	switch final {
	case 'p':
		return inter == "$" // DECRQM: request mode (?2026$p, ?2027$p)
	case 'u':
		return params == "?" // kitty keyboard: query flags (push >, pop <, set = are not)
	case 'c':
		return inter == "" // DA1, DA2 (>), DA3 (=)
	case 'n':
		return params == "5" || params == "6" || params == "?6" || strings.HasPrefix(params, "?") // DSR
	case 'q':
		return strings.HasPrefix(params, ">") && inter == "" // XTVERSION
	case 't':
		switch params {
		case "11", "13", "14", "15", "16", "18", "19", "20", "21":
			return true // window state, position, size and title reports
		}
	}
	return false
}

// stringQuery reports whether an OSC or DCS string asks for an answer:
// an OSC whose last field is "?" (colours, clipboard), XTGETTCAP (+q) and
// DECRQSS ($q).
func stringQuery(kind byte, s string) bool {
	switch kind {
	case ']':
		f := strings.Split(s, ";")
		return len(f) > 1 && f[len(f)-1] == "?"
	case 'P':
		return strings.HasPrefix(s, "+q") || strings.HasPrefix(s, "$q")
	}
	return false
}
