package explain

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/ncclwiz/ncclwiz/internal/units"
)

// DefaultMaxLine is how much of one line is kept when Options.MaxLineBytes
// is zero. Longer lines keep their first DefaultMaxLine bytes and are marked
// truncated; the rest is skipped without being held in memory.
const DefaultMaxLine = 64 << 10

// minBufSize is the smallest read buffer: big enough that a chunk holds
// thousands of lines, small enough to keep memory constant.
const minBufSize = 1 << 20

// bufSizeFor returns the buffer size for a line cap: a capped line must fit
// in one buffer.
func bufSizeFor(maxLine int) int {
	return max(minBufSize, 2*maxLine)
}

// chunkReader yields runs of whole lines read straight into the caller's
// buffer (no copy through a bufio buffer): every chunk ends with '\n',
// except the last one of the input and a "giant" chunk, which is the first
// max bytes of a line longer than the buffer (the rest of that line is then
// skipped, never held). Only the start of the line cut by a buffer's end
// is carried over to the next. Memory stays at the buffers whatever the
// input.
type chunkReader struct {
	r       io.Reader
	max     int
	size    int
	carry   []byte // start of the line cut by the end of the last buffer
	own     []byte // next's buffer
	skip    bool   // discard through the next '\n' (tail of a giant line)
	done    bool
	err     error
	bytes   int64 // bytes consumed, skipped tails included
	skipped int64 // bytes of the last giant line beyond its chunk
	// nulTail, when set, ends the input inside a giant line whose skipped
	// tail is nothing but NULs past binaryCheckBytes (a gzip bomb of
	// zeros, a sparse file): binaryTail then reports it.
	nulTail    bool
	binaryTail bool
}

func newChunkReader(r io.Reader, maxLine int) *chunkReader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return newChunkReaderSize(r, maxLine, bufSizeFor(maxLine))
}

// newChunkReaderSize uses buffers of the given size, which must exceed
// maxLine (tests use tiny buffers to reach the giant-line path).
func newChunkReaderSize(r io.Reader, maxLine, size int) *chunkReader {
	return &chunkReader{r: r, max: maxLine, size: size}
}

func (c *chunkReader) finish(err error) {
	c.done = true
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = err
	}
}

// read fills p as far as the reader allows in one call; a reader that
// keeps returning nothing ends the input (as bufio does).
func (c *chunkReader) read(p []byte) int {
	for range 100 {
		n, err := c.r.Read(p)
		if err != nil {
			c.finish(err)
		}
		if n > 0 || c.done {
			return n
		}
	}
	c.finish(io.ErrNoProgress)
	return 0
}

// next is nextInto with the reader's own buffer (LineReader).
func (c *chunkReader) next() (chunk []byte, giant, ok bool) {
	chunk, giant, ok = c.nextInto(c.own)
	if ok {
		c.own = chunk[:0]
	}
	return chunk, giant, ok
}

// nextInto fills buf (grown to the reader's size) with the next chunk and
// returns it, whether it is a cut giant line, and false at the end of the
// input (see err).
func (c *chunkReader) nextInto(buf []byte) (chunk []byte, giant, ok bool) {
	if cap(buf) < c.size {
		buf = make([]byte, c.size)
	}
	buf = buf[:c.size]
	if c.skip {
		c.skipTail(buf)
	}
	n := copy(buf, c.carry)
	c.carry = c.carry[:0]
	for n < len(buf) && !c.done {
		n += c.read(buf[n:])
	}
	data := buf[:n]
	if n == 0 {
		return nil, false, false
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		c.carry = append(c.carry, data[i+1:]...)
		c.bytes += int64(i + 1)
		return data[:i+1], false, true
	}
	c.bytes += int64(n)
	if c.done { // the last line, without a newline
		return data, false, true
	}
	// A full buffer without a newline: one giant line.
	c.skip = true
	return trimPartialRune(data[:min(c.max, n)]), true, true
}

// skipTail discards the rest of a giant line through its '\n', using buf
// as scratch; what follows the '\n' is carried to the next chunk.
func (c *chunkReader) skipTail(buf []byte) {
	c.skip = false
	c.skipped = 0
	var nul int64
	for !c.done {
		m := c.read(buf)
		sl := buf[:m]
		if i := bytes.IndexByte(sl, '\n'); i >= 0 {
			c.carry = append(c.carry, sl[i+1:]...)
			sl = sl[:i+1]
			c.bytes += int64(len(sl))
			c.skipped += int64(len(sl))
			return
		}
		c.bytes += int64(m)
		c.skipped += int64(m)
		if c.nulTail {
			nul += int64(bytes.Count(sl, []byte{0}))
			if c.skipped >= binaryCheckBytes && nul*10 > 9*c.skipped {
				c.binaryTail = true
				c.finish(nil)
				return
			}
		}
	}
}

// LineReader reads a log line by line in constant memory. Lines of any
// length are accepted: a line longer than the cap keeps its first max bytes
// and reports Truncated. A trailing "\r" is removed (CRLF logs). The slice
// returned by Bytes is valid until the next call to Next.
type LineReader struct {
	c         *chunkReader
	chunk     []byte
	giant     bool
	pos       int
	line      []byte
	n         int64
	truncated bool
	stats     ReadStats
}

// ReadStats describes everything a LineReader has read.
type ReadStats struct {
	Bytes          int64 // bytes read (after decompression), newlines included
	Lines          int64
	TruncatedLines int64 // lines cut at the cap
	NULBytes       int64 // NUL bytes in the kept text
	BadUTF8Lines   int64 // lines with invalid UTF-8
	Longest        int64 // longest line, newline included
	// ContentChunks counts the chunks read that hold a byte other than
	// NUL and white space.
	ContentChunks int64
}

// NewLineReader returns a reader that keeps at most max bytes of a line
// (DefaultMaxLine when max <= 0).
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{c: newChunkReader(r, max)}
}

// Next advances to the next line. It returns false at the end of the input
// or on a read error (see Err).
func (lr *LineReader) Next() bool {
	for lr.pos >= len(lr.chunk) {
		chunk, giant, ok := lr.c.next()
		if !ok {
			lr.stats.Bytes = lr.c.bytes
			return false
		}
		lr.chunk, lr.giant, lr.pos = chunk, giant, 0
		if giant {
			break // a cut line, possibly empty after trimming a partial rune
		}
	}
	var line []byte
	full := 0
	if lr.giant {
		lr.giant = false
		line, lr.pos = lr.chunk, len(lr.chunk)
		lr.truncated = true
		lr.chunk = nil
		full = lr.c.size // at least; the tail is counted when skipped
	} else {
		rest := lr.chunk[lr.pos:]
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, lr.pos, full = rest[:i], lr.pos+i+1, i+1
		} else {
			line, lr.pos, full = rest, len(lr.chunk), len(rest)
		}
		line, lr.truncated = capLine(line, lr.c.max)
	}
	lr.line = line
	lr.n++
	lr.stats.Lines++
	lr.stats.Bytes = lr.c.bytes
	if lr.truncated {
		lr.stats.TruncatedLines++
	}
	if int64(full) > lr.stats.Longest {
		lr.stats.Longest = int64(full)
	}
	nul, bad := lineStats(line)
	lr.stats.NULBytes += int64(nul)
	if bad {
		lr.stats.BadUTF8Lines++
	}
	return true
}

// capLine removes a trailing '\r' and the blanks before it and cuts the
// line at max bytes (on a rune boundary). A console's copy of its screen
// pads every row with spaces to the width; the padding is no text, and a
// padded row is not one cut at the width (join.go).
func capLine(line []byte, max int) ([]byte, bool) {
	if len(line) > max {
		return trimPartialRune(line[:max]), true
	}
	return trimEnd(line), false
}

// trimEnd removes a trailing '\r' and the spaces and tabs before it.
func trimEnd(line []byte) []byte {
	n := len(line)
	if n > 0 && line[n-1] == '\r' {
		n--
	}
	for n > 0 && (line[n-1] == ' ' || line[n-1] == '\t') {
		n--
	}
	line = line[:n]
	// Ray folds a line repeated by several workers into one with this
	// suffix: no part of the message.
	if n > 0 && line[n-1] == ']' && bytes.HasSuffix(line, []byte("x across cluster]")) {
		if i := bytes.LastIndex(line, []byte(" [repeated ")); i >= 0 {
			line = trimEnd(line[:i])
		}
	}
	return line
}

// lineStats counts NUL bytes and checks UTF-8 validity.
func lineStats(line []byte) (nul int, badUTF8 bool) {
	if bytes.IndexByte(line, 0) >= 0 {
		nul = bytes.Count(line, []byte{0})
	}
	return nul, !utf8.Valid(line)
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
func (lr *LineReader) Err() error { return lr.c.err }

// Stats returns what has been read so far.
func (lr *LineReader) Stats() ReadStats { return lr.stats }

// gzipMagic starts every gzip member (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// openMaybeGzip wraps r in a gzip reader when its first bytes are the gzip
// magic, whatever the file is called. It returns the reader to use and
// whether it decompresses.
func openMaybeGzip(r io.Reader) (io.Reader, bool, error) {
	// Small: it only peeks at the magic (and feeds gzip); the chunk
	// reader's big reads go around it.
	br := bufio.NewReaderSize(r, 64<<10)
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
	return zr, true, nil
}

// DefaultStreamLimit is how much of an input that is not a regular file (a
// FIFO, a character device such as /dev/zero) is read when the caller does
// not say: such an input may never end.
const DefaultStreamLimit = 256 << 20

// LimitError ends the reading of a stream at its bound.
type LimitError struct {
	Name  string
	Limit int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s is not a regular file: read its first %s; the rest was not read", e.Name, units.Bytes(uint64(e.Limit)))
}

// InputError is a path that cannot be explained (missing, a directory,
// unreadable); its message is for the user as is.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// PathInput checks path (exists, is not a directory, is readable) without
// opening it, and returns an Input that opens it exactly once when it is
// read: a check that opened and closed a FIFO would consume its writer's
// output and leave the real open waiting forever. Opening a FIFO waits for
// its writer, and any read that can block waits for data, only until ctx
// is done. An input that is not a regular file is read up to limit bytes
// (DefaultStreamLimit when limit <= 0); the report then says what was left
// unread. shown is the path as it may be printed.
func PathInput(ctx context.Context, path, shown string, limit int64) (Input, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Input{}, openError(shown, err)
	}
	if st.IsDir() {
		return Input{}, &InputError{fmt.Sprintf("%s is a directory; pass the log files in it (e.g. %s/*.log)", shown, trimSlash(shown))}
	}
	if err := syscall.Access(path, 4 /* R_OK */); err != nil {
		return Input{}, openError(shown, &fs.PathError{Op: "access", Path: path, Err: err})
	}
	if limit <= 0 {
		limit = DefaultStreamLimit
	}
	return Input{Name: path, Open: func() (io.ReadCloser, error) {
		f, err := openCtx(ctx, path)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		if st.Mode().IsRegular() {
			return wrapFile(ctx, path, f, false, 0, true), nil
		}
		return wrapFile(ctx, path, f, true, limit, true), nil
	}}, nil
}

// openCtx opens path for reading; when ctx ends first (open(2) of a FIFO
// without a writer blocks in the kernel) it returns ctx's error, and the
// goroutine left waiting closes the file should a writer ever come.
func openCtx(ctx context.Context, path string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			var pe *fs.PathError
			if errors.As(o.err, &pe) {
				return nil, pe.Err
			}
		}
		return o.f, o.err
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.f != nil {
				_ = o.f.Close()
			}
		}()
		return nil, fmt.Errorf("waiting for a writer: %w", ctx.Err())
	}
}

// StreamInput reads r (stdin) under name, stopping when ctx is done even
// while a read waits for data. A file that is a character device (stdin
// redirected from /dev/zero, say) is bounded like PathInput's streams; a
// pipe is not, since it is how a running job's output is followed, and
// closing it early would end that job with SIGPIPE. stdin is never closed.
func StreamInput(ctx context.Context, name string, r io.Reader, limit int64) Input {
	return Input{Name: name, Open: func() (io.ReadCloser, error) {
		f, ok := r.(*os.File)
		if !ok {
			return io.NopCloser(&ctxReader{ctx: ctx, r: r, async: true}), nil
		}
		st, err := f.Stat()
		switch {
		case err != nil || st.Mode().IsRegular():
			return wrapFile(ctx, name, f, false, 0, false), nil
		case st.Mode()&fs.ModeCharDevice == 0:
			return wrapFile(ctx, name, f, true, 0, false), nil // a pipe: follow it to its end
		case limit <= 0:
			limit = DefaultStreamLimit
		}
		return wrapFile(ctx, name, f, true, limit, false), nil
	}}
}

// wrapFile reads f: when it can block (not a regular file), a read that
// waits ends when ctx is done; limit > 0 bounds it; own closes f after
// reading.
func wrapFile(ctx context.Context, name string, f *os.File, canBlock bool, limit int64, own bool) io.ReadCloser {
	cr := &ctxReader{ctx: ctx, r: f}
	if canBlock {
		// A FIFO, a pipe or a terminal is pollable: a read deadline wakes
		// a read that waits. Others get a reading goroutine.
		if f.SetReadDeadline(time.Time{}) == nil {
			cr.stop = context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
		} else {
			cr.async = true
		}
	}
	var r io.Reader = cr
	if limit > 0 {
		r = &limitReader{r: cr, left: limit, err: &LimitError{Name: name, Limit: limit}}
	}
	return readCloser{r, func() error {
		if cr.stop != nil {
			cr.stop()
		}
		if own {
			return f.Close()
		}
		return nil
	}}
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// ctxReader ends reading with ctx.Err() once ctx is done. With async, each
// read runs in a goroutine into a private buffer, so a read that blocks
// forever is abandoned instead of waited for.
type ctxReader struct {
	ctx   context.Context
	r     io.Reader
	stop  func() bool
	async bool
	buf   []byte
	res   chan readResult
}

type readResult struct {
	n   int
	err error
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if !c.async {
		n, err := c.r.Read(p)
		if err != nil && c.ctx.Err() != nil {
			return n, c.ctx.Err() // the deadline set on cancel
		}
		return n, err
	}
	if c.res == nil {
		c.res = make(chan readResult, 1)
	}
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	buf := c.buf[:len(p)]
	go func() {
		n, err := c.r.Read(buf)
		c.res <- readResult{n, err}
	}()
	select {
	case r := <-c.res:
		return copy(p, buf[:r.n]), r.err
	case <-c.ctx.Done():
		// The goroutine still owns buf; this reader is never read again.
		c.buf = nil
		return 0, c.ctx.Err()
	}
}

// limitReader returns err after left bytes.
type limitReader struct {
	r    io.Reader
	left int64
	err  error
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, l.err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

func openError(shown string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &InputError{shown + ": no such file"}
	case errors.Is(err, fs.ErrPermission):
		return &InputError{shown + ": permission denied"}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &InputError{fmt.Sprintf("%s: %v", shown, err)}
}

func trimSlash(s string) string {
	for len(s) > 1 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}
