package explain

import (
	"bytes"
	"regexp"
)

// Pasted logs are wrapped: a terminal, an issue page or `kubectl logs`
// breaks one message over several lines, sometimes repeating the
// launcher prefix ([rank3]:, pdsh "host: ", srun "3: ") on each. A WARN or
// error line that looks cut is held until the next line is seen; when that
// line continues it (no prefix of its own, no new record), the two are
// matched as one line, numbered as the first.

const (
	minCutLine = 60 // shorter lines are whole messages, not wrapped ones
	maxJoins   = 8  // lines joined into one message at most
)

// heldLine is a line waiting for its continuation.
type heldLine struct {
	text  []byte
	n     int64
	trunc bool
	joins int
}

// termWidths are the widths at which terminals cut a line wherever it is
// (no byte lost); a cut elsewhere is taken for a word wrap that ate one
// space.
var termWidths = map[int]bool{80: true, 100: true, 120: true, 132: true, 160: true, 180: true, 200: true, 220: true, 240: true, 250: true, 256: true}

// reNewRecord is the start of a message of its own: an exception, a
// dotted logger or module name, a traceback, a bracketed or timestamped
// prefix, a level word, a shell trace, an absolute path or a Python
// file's location (a warning's).
var reNewRecord = regexp.MustCompile(`^(?:[\w.]*(?:Error|Exception|Warning|Interrupt)\b|\w+(?:\.\w+)+[:(\s]|Traceback|File "|\[|[A-Z]{2,8}[\s:]|\d{4}-\d\d-\d\d|[EWIFD]\d{4} |#|\+ |\*|=|-{2,}|\.\.|/[^\s/]+/|[\w./\-]+\.py:\d+)`)

// mayBeCut reports whether a visited line could be the first part of a
// wrapped message: a warning or error, long, not ending a sentence.
func mayBeCut(text []byte) bool {
	if len(text) < minCutLine {
		return false
	}
	switch text[len(text)-1] {
	case '.', ':', '!', '?', ')', ']', '}', '>', '\'', '"', ' ':
		return false
	}
	for _, w := range cutWords {
		if bytes.Contains(text, w) {
			return true
		}
	}
	return false
}

// cutWords are the words of a line that may be the head of a failure
// message cut in two.
var cutWords = [][]byte{[]byte("WARN"), []byte("rror"), []byte("ailed"), []byte("NCCL"), []byte("imed out"),
	[]byte("imeout"), []byte("xception"), []byte("exitcode"), []byte("ignal"), []byte("Killed"), []byte("gloo")}

// continuation returns the part of next that continues prev, or nil.
func continuation(prev, next []byte) []byte {
	// A coloured line (a logger's) is a record of its own.
	if len(next) == 0 || next[0] == ' ' || next[0] == '\t' || next[0] == 0x1b {
		return nil
	}
	// The same launcher prefix, or none, and nothing that starts a record.
	launcher := parseMeta(prev).Launcher
	if !bytes.HasPrefix(next, []byte(launcher)) {
		return nil
	}
	rest := next[len(launcher):]
	if rm := parseMeta(rest); rm.Launcher != "" || rm.Level != "" || rm.TS.OK {
		return nil
	}
	if len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || reNewRecord.Match(rest) {
		return nil
	}
	return rest
}

// joinLines glues a continuation to the held line: directly after a cut
// at a terminal width (nothing was lost), else with the space a word wrap
// ate. space overrides the guess (joinBest).
func joinLines(dst, prev, cont []byte, space bool) []byte {
	dst = append(dst[:0], prev...)
	if space {
		dst = append(dst, ' ')
	}
	return append(dst, cont...)
}

// joinBest joins a continuation the way that reads as more of the words
// the explainer knows: a line cut mid-word at an arbitrary width ("Connec"
// + "tion refused") joins directly, one wrapped at a space gets its space
// back. Ties keep the terminal-width guess.
func (s *scan) joinBest(dst, prev, cont []byte) []byte {
	guess := !termWidths[len(prev)]
	n := len(prev)
	if n == 0 || len(cont) == 0 || !isWordByte(prev[n-1]) || !isWordByte(cont[0]) {
		return joinLines(dst, prev, cont, guess)
	}
	// Compare the literal hits around the seam only.
	lo := max(0, n-48)
	hi := min(len(cont), 48)
	with := append(append(append(s.seam[:0], prev[lo:]...), ' '), cont[:hi]...)
	a := s.seamHits(with)
	without := append(append(s.seam2[:0], prev[lo:]...), cont[:hi]...)
	b := s.seamHits(without)
	s.seam, s.seam2 = with, without
	switch {
	case b > a:
		return joinLines(dst, prev, cont, false)
	case a > b:
		return joinLines(dst, prev, cont, true)
	}
	return joinLines(dst, prev, cont, guess)
}

// seamHits counts the literal tags found in text.
func (s *scan) seamHits(text []byte) int {
	setClear(s.cand2)
	s.e.ac.scan(text, s.cand2)
	n := 0
	setEach(s.cand2, func(int) { n++ })
	return n
}
