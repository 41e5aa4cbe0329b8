package explain

import (
	"bytes"
	"regexp"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// Pasted logs are wrapped: a terminal, an issue page or `kubectl logs`
// breaks one message over several lines, sometimes repeating the
// launcher prefix ([rank3]:, pdsh "host: ", srun "3: ") on each. A WARN or
// error line that looks cut is held until the next line is seen; when that
// line continues it (no prefix of its own, no new record), the two are
// matched as one line, numbered as the first.

const (
	minCutLine = 60 // shorter lines are whole messages, not wrapped ones
	// minPunctCut: a line ending in a comma or colon is wrapped there (an
	// issue page wraps at punctuation) from this length on.
	minPunctCut = 32
	maxJoins    = 8 // lines joined into one message at most
)

// heldLine is a line waiting for its continuation.
type heldLine struct {
	text  []byte
	n     int64
	trunc bool
	joins int
	last  int // length of the last line joined (the width of a hard cut)
}

// termWidths are the widths at which terminals cut a line wherever it is
// (no byte lost); a cut elsewhere is taken for a word wrap that ate one
// space.
var termWidths = map[int]bool{80: true, 100: true, 120: true, 132: true, 160: true, 180: true, 200: true, 220: true, 240: true, 250: true, 256: true}

// reNewRecord is the start of a message of its own: an exception, a
// dotted logger or module name, a traceback, a bracketed or timestamped
// prefix, a level word, a shell trace, an absolute path or a Python
// file's location (a warning's).
var reNewRecord = regexp.MustCompile(`^(?:[\w.]*(?:Error|Exception|Warning|Interrupt)\b|\w+(?:\.\w+)+[:(\s]|Traceback|File "|\[|[A-Z]{2,8}[\s:]|\d{4}-\d\d-\d\d|[EWIFD]\d{4} |#|\+ |\*|={3,}|-{2,}|\.\.|/[^\s/]+/|[\w./\-]+\.py:\d+)`)

// reShellPrompt is a shell prompt followed by a command: the paste goes on
// with what the user typed after the job (`$ cmd`, `user@host:dir$ cmd`,
// `(env) user@host:~$ cmd`, `[user@host dir]$ cmd`, root's `#`). It starts
// a record of its own, and the job's output ends before it.
var reShellPrompt = regexp.MustCompile(`^(?:\([\w.\-]+\) )?(?:\$|[\w.\-]+@[\w.\-]+(?::[^\s$#]*)?[$#]|\[[\w.\-]+@[\w.\-]+ [^\]]*\][$#]) +\S`)

// mayBeCut reports whether a visited line could be the first part of a
// wrapped message: a warning or error, long, not ending a sentence.
func mayBeCut(text []byte) bool {
	if !cutShape(text) {
		return false
	}
	// The bulk of an NCCL_DEBUG=INFO log: held only when it reports a
	// failure (holding every INFO line would cost the digest its speed).
	words := cutWords
	if bytes.Contains(text, []byte(" NCCL INFO ")) {
		words = infoCutWords
	}
	for _, w := range words {
		if bytes.Contains(text, w) {
			return true
		}
	}
	return false
}

// cutShape tells whether a line is long enough and ends where a wrap may
// have cut it.
func cutShape(text []byte) bool {
	if len(text) < minCutLine && (len(text) < minPunctCut || text[len(text)-1] != ',' && text[len(text)-1] != ':') {
		return false
	}
	// A line ending a sentence or a bracket is whole; one ending with a
	// colon or comma may be wrapped at that punctuation (an issue page's
	// wrap), and the next line decides (continuation).
	switch text[len(text)-1] {
	case '.', '!', '?', ')', ']', '}', '>', '\'', '"':
		return false
	}
	return true
}

// cutWords are the words of a line that may be the head of a failure
// message cut in two.
var infoCutWords = [][]byte{[]byte("rror"), []byte("ailed")}

var cutWords = [][]byte{[]byte("WARN"), []byte("rror"), []byte("ERROR"), []byte("ailed"), []byte("NCCL"), []byte("imed out"),
	[]byte("imeout"), []byte("xception"), []byte("exitcode"), []byte("ignal"), []byte("Killed"), []byte("gloo")}

// continuation returns the part of next that continues prev, or nil.
func continuation(prev, next []byte, last, width int) []byte {
	// A coloured line (a logger's) is a record of its own; so is an
	// indented one, unless the held line was cut hard at a width (its
	// last piece as long as the paste's lines, the space kept at the cut).
	if len(next) == 0 || next[0] == 0x1b {
		return nil
	}
	if next[0] == '>' {
		// A quoted paste quotes every line: the marker is no text.
		next = linetext.TrimQuote(next)
		prev = linetext.TrimQuote(prev)
		if len(next) == 0 {
			return nil
		}
	}
	hard := width > 0 && last == width
	if next[0] == ' ' || next[0] == '\t' {
		if !hard || next[0] == '\t' || len(next) > width || len(bytes.TrimLeft(next, " ")) < len(next)-1 {
			return nil
		}
	}
	// The same launcher prefix repeated (an issue page, kubectl), or none
	// (a terminal wraps the text, not the prefix), and nothing that
	// starts a record.
	launcher := linetext.Parse(prev).Launcher
	rest := next
	if bytes.HasPrefix(next, []byte(launcher)) {
		rest = next[len(launcher):]
	}
	if rm := linetext.Parse(rest); rm.Launcher != "" || rm.Level != "" || rm.TS.OK {
		return nil
	}
	if len(rest) == 0 || reShellPrompt.Match(rest) || !hard && reNewRecord.Match(bytes.TrimLeft(rest, " ")) {
		return nil
	}
	return rest
}

// wrapWidth finds the width a chunk's lines were cut at: among its first
// lines, a length of 60 or more that three lines share exactly, each
// followed by a line that continues it (no record of its own), is a fold,
// not a coincidence (repeated messages of one format, separators). 0 when
// there is none.
func wrapWidth(data []byte) int {
	const sample = 64
	var lines [sample][]byte
	n := 0
	for off := 0; off < len(data) && n < sample; {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			break
		}
		lines[n] = trimEnd(data[off : off+nl])
		n++
		off += nl + 1
	}
	return foldWidth(lines[:n], false)
}

// foldWidth is wrapWidth over lines. A tail (the last lines of an input,
// few of them long) also takes two lines of 100 or more cut at one width.
func foldWidth(lines [][]byte, tail bool) int {
	n := len(lines)
	counts := map[int]int{}
	for i := 0; i+1 < n; i++ {
		l, next := lines[i], lines[i+1]
		if len(l) < minCutLine || len(next) == 0 || next[0] == '[' || next[0] == 0x1b || oneChar(l) ||
			reNewRecord.Match(bytes.TrimLeft(next, " ")) {
			continue
		}
		counts[len(l)]++
	}
	best, bestN := 0, 0
	for w, c := range counts {
		if c < 3 && (!tail || c < 2 || w < 100) {
			continue
		}
		if c > bestN || c == bestN && w < best {
			best, bestN = w, c
		}
	}
	return best
}

// oneChar tells a separator line ("-----", "=====", quoted or not, after
// a launcher's prefix: a prefix makes no cut width of the separators).
func oneChar(l []byte) bool {
	l = linetext.TrimQuote(linetext.ParseRaw(l).Msg())
	return len(l) > 0 && len(bytes.Trim(l, string(l[:1]))) == 0
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
	if n == 0 || len(cont) == 0 || !linetext.IsWordByte(prev[n-1]) || !linetext.IsWordByte(cont[0]) {
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
	linetext.SetClear(s.cand2)
	s.e.ac.Scan(text, s.cand2)
	n := 0
	linetext.SetEach(s.cand2, func(int) { n++ })
	return n
}

// joinBack holds the line before text when text continues it: a line cut
// at a terminal's width whose first part names nothing the prefilter knows
// ("… [Rank 0] Watchdog ca" + "ught collective operation timeout: …") is
// only seen from its second part. skipped is the data between the last
// visited line and text (the previous line ends it).
func (s *scan) joinBack(fs *fileState, skipped, text []byte, n int64) {
	if len(text) == 0 || text[0] == '[' || !continuationStart(text) {
		return
	}
	prev := bytes.TrimRight(skipped, "\n")
	if i := bytes.LastIndexByte(prev, '\n'); i >= 0 {
		prev = prev[i+1:]
	}
	prev = trimEnd(prev)
	if !mayBeCut(prev) || continuation(prev, text, len(prev), fs.wrapWidth) == nil {
		return
	}
	fs.join = &heldLine{text: append([]byte(nil), prev...), n: n - 1, last: len(prev)}
}

// continuationStart is a cheap test that text may continue a cut line: it
// is no NCCL line, no launcher-prefixed or timestamped one.
func continuationStart(text []byte) bool {
	head := text[:min(len(text), 96)]
	return !bytes.Contains(head, []byte(" NCCL ")) && !bytes.Contains(head, []byte("] ")) && !bytes.HasPrefix(text, []byte("NCCL "))
}
