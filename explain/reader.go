package explain

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// DefaultMaxLine is how much of one line is kept when Options.MaxLineBytes
// is zero. Longer lines keep their first DefaultMaxLine bytes and are marked
// truncated; the rest is skipped without being held in memory.
const DefaultMaxLine = 64 << 10

// readBufSize is the bufio buffer: large enough that most reads are one
// syscall per 256 KiB, small enough to keep memory constant.
const readBufSize = 256 << 10

// LineReader reads a log line by line in constant memory. Lines of any
// length are accepted: a line longer than the cap keeps its first max bytes
// and reports Truncated. A trailing "\r" is removed (CRLF logs). The slice
// returned by Bytes is valid until the next call to Next.
type LineReader struct {
	r         *bufio.Reader
	max       int
	buf       []byte // assembles lines that span bufio buffers
	line      []byte
	n         int64 // line number, 1-based
	truncated bool
	err       error
	done      bool

	stats     ReadStats
	curLength int64
}

// ReadStats describes everything a LineReader has read.
type ReadStats struct {
	Bytes          int64 // bytes read (after decompression), newlines included
	Lines          int64
	TruncatedLines int64 // lines cut at the cap
	NULBytes       int64 // NUL bytes in the kept text
	ControlBytes   int64 // other C0 controls (not \t \r ESC) in the kept text
	BadUTF8Lines   int64 // lines with invalid UTF-8
	Longest        int64 // longest line, newline included
}

// NewLineReader returns a reader that keeps at most max bytes of a line
// (DefaultMaxLine when max <= 0).
func NewLineReader(r io.Reader, max int) *LineReader {
	if max <= 0 {
		max = DefaultMaxLine
	}
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < readBufSize {
		br = bufio.NewReaderSize(r, readBufSize)
	}
	return &LineReader{r: br, max: max}
}

// Next advances to the next line. It returns false at the end of the input
// or on a read error (see Err).
func (lr *LineReader) Next() bool {
	if lr.done {
		return false
	}
	lr.truncated = false
	lr.buf = lr.buf[:0]
	lr.curLength = 0
	var line []byte
	for {
		chunk, err := lr.r.ReadSlice('\n')
		lr.stats.Bytes += int64(len(chunk))
		lr.curLength += int64(len(chunk))
		if err == nil {
			// A whole line (possibly completing an assembled one).
			if len(lr.buf) == 0 && !lr.truncated {
				line = chunk[:len(chunk)-1]
			} else {
				lr.appendCapped(chunk[:len(chunk)-1])
				line = lr.buf
			}
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			lr.appendCapped(chunk)
			continue
		}
		// EOF or a real error: the last line may lack a newline.
		if len(chunk) > 0 || len(lr.buf) > 0 || lr.truncated {
			lr.appendCapped(chunk)
			line = lr.buf
		} else {
			line = nil
		}
		lr.done = true
		if err != io.EOF {
			lr.err = err
		}
		if line == nil && !lr.truncated && lr.curLength == 0 {
			return false
		}
		break
	}
	if len(line) > lr.max {
		line = line[:lr.max]
		lr.truncated = true
	}
	if n := len(line); n > 0 && line[n-1] == '\r' && !lr.truncated {
		line = line[:n-1]
	}
	if lr.truncated {
		lr.stats.TruncatedLines++
		// Do not end in the middle of a UTF-8 sequence.
		line = trimPartialRune(line)
	}
	if lr.curLength > lr.stats.Longest {
		lr.stats.Longest = lr.curLength
	}
	lr.stats.Lines++
	lr.line = line
	lr.n++
	lr.scanStats(line)
	return true
}

// appendCapped adds p to the assembly buffer up to the cap; beyond it the
// bytes are dropped and the line is marked truncated.
func (lr *LineReader) appendCapped(p []byte) {
	room := lr.max - len(lr.buf)
	if room <= 0 {
		if len(p) > 0 {
			lr.truncated = true
		}
		return
	}
	if len(p) > room {
		p = p[:room]
		lr.truncated = true
	}
	lr.buf = append(lr.buf, p...)
}

func (lr *LineReader) scanStats(line []byte) {
	// Fast path: pure printable ASCII is by far the common case.
	ascii := true
	for _, c := range line {
		if c < 0x20 || c >= 0x7f {
			ascii = false
			break
		}
	}
	if ascii {
		return
	}
	for _, c := range line {
		switch {
		case c == 0:
			lr.stats.NULBytes++
		case c < 0x20 && c != '\t' && c != '\r' && c != 0x1b:
			lr.stats.ControlBytes++
		}
	}
	if !utf8.Valid(line) {
		lr.stats.BadUTF8Lines++
	}
}

func trimPartialRune(b []byte) []byte {
	// Walk back over at most 3 continuation bytes.
	for i := len(b) - 1; i >= 0 && i >= len(b)-4; i-- {
		c := b[i]
		if c < 0x80 {
			return b
		}
		if c >= 0xc0 { // a lead byte: complete only if enough bytes follow
			need := 2
			switch {
			case c >= 0xf0:
				need = 4
			case c >= 0xe0:
				need = 3
			}
			if len(b)-i < need {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// Bytes returns the current line without its newline.
func (lr *LineReader) Bytes() []byte { return lr.line }

// N is the current line number (1-based).
func (lr *LineReader) N() int64 { return lr.n }

// Truncated reports whether the current line was cut at the cap.
func (lr *LineReader) Truncated() bool { return lr.truncated }

// Err returns the read error that ended the input, if any (not io.EOF).
func (lr *LineReader) Err() error { return lr.err }

// Stats returns what has been read so far.
func (lr *LineReader) Stats() ReadStats { return lr.stats }

// gzipMagic starts every gzip member (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// openMaybeGzip wraps r in a gzip reader when its first bytes are the gzip
// magic, whatever the file is called. It returns the reader to use and
// whether it decompresses.
func openMaybeGzip(r io.Reader) (io.Reader, bool, error) {
	br := bufio.NewReaderSize(r, readBufSize)
	head, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	if !bytes.Equal(head, gzipMagic) {
		return br, false, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, true, fmt.Errorf("gzip header: %w", err)
	}
	// Logs are sometimes concatenated .gz members (rotations); keep reading.
	zr.Multistream(true)
	return bufio.NewReaderSize(zr, readBufSize), true, nil
}
