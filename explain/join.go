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
	maxJoins   = 4  // lines joined into one message at most
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
// prefix, a level word, a shell trace.
var reNewRecord = regexp.MustCompile(`^(?:[\w.]*(?:Error|Exception|Warning|Interrupt)\b|\w+(?:\.\w+)+[:(\s]|Traceback|File "|\[|[A-Z]{2,8}[\s:]|\d{4}-\d\d-\d\d|[EWIFD]\d{4} |#|\+ |\*|=|-{2,}|\.\.)`)

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
	return bytes.Contains(text, []byte("WARN")) || bytes.Contains(text, []byte("rror")) || bytes.Contains(text, []byte("failed"))
}

// continuation returns the part of next that continues prev, or nil.
func continuation(prev, next []byte) []byte {
	if len(next) == 0 || next[0] == ' ' || next[0] == '\t' {
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
// ate.
func joinLines(dst, prev, cont []byte) []byte {
	dst = append(dst[:0], prev...)
	if !termWidths[len(prev)] {
		dst = append(dst, ' ')
	}
	return append(dst, cont...)
}
