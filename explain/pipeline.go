package explain

import (
	"bytes"
	"context"
	"sort"
	"sync"
	"unicode/utf8"
)

// The read loop is a two-stage pipeline. A producer goroutine takes chunks
// of whole lines from the chunkReader and does all per-byte work: the
// literal prefilter over the whole chunk, finding lines with escapes, NULs
// or carriage returns, counting lines, UTF-8 validation and the ranks of
// launcher prefixes. The consumer (the caller's goroutine) visits only the
// lines the producer flagged, in order, and owns all analysis state. Two
// cores each do one stage; a fixed pool of chunk buffers bounds memory.

// pipelineBuffers bounds the chunks in flight (each about 1 MiB).
const pipelineBuffers = 4

// pipelineWorkers prepare chunks in parallel; the consumer takes them in
// input order.
const pipelineWorkers = 2

// event is a line the consumer must look at.
type event struct {
	start   int
	special bool // escapes, NULs or an interior \r: clean and re-scan
	tagOff  int  // offset of its candidate set in prepped.tags, -1 none
}

// prepped is one chunk after the producer's pass.
type prepped struct {
	data      []byte
	giant     bool
	events    []event
	tags      []uint64
	lines     int64 // lines in data
	truncated int64
	nul       int64
	badUTF8   int64
	ranks     []int
	ready     chan struct{}
}

// producer runs the first stage: one reader, several workers.
type producer struct {
	e     *Explainer
	max   int
	cr    *chunkReader
	free  chan *prepped
	work  chan *prepped
	order chan *prepped
	done  chan struct{}
}

func (p *producer) run() {
	defer close(p.order)
	defer close(p.work)
	for {
		var b *prepped
		select {
		case b = <-p.free:
		case <-p.done:
			return
		}
		chunk, giant, ok := p.cr.next()
		if !ok {
			return
		}
		b.data = append(b.data[:0], chunk...)
		b.giant = giant
		b.ready = make(chan struct{})
		select {
		case p.work <- b:
		case <-p.done:
			return
		}
		select {
		case p.order <- b:
		case <-p.done:
			return
		}
	}
}

func (p *producer) worker() {
	for b := range p.work {
		p.prep(b)
		close(b.ready)
	}
}

// prep finds the lines of b.data that need the consumer.
func (p *producer) prep(b *prepped) {
	b.events, b.tags, b.ranks = b.events[:0], b.tags[:0], b.ranks[:0]
	b.truncated, b.nul, b.badUTF8 = 0, 0, 0
	data := b.data
	words := p.e.words
	if b.giant {
		// One line cut at the cap: always the careful path.
		b.lines, b.truncated = 1, 1
		nul, bad := lineStats(data)
		b.nul = int64(nul)
		if bad {
			b.badUTF8 = 1
		}
		b.events = append(b.events, event{start: 0, special: true, tagOff: -1})
		return
	}
	b.lines = int64(bytes.Count(data, []byte{'\n'}))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		b.lines++
	}

	// Literal hits, grouped by line.
	curStart, curEnd := -1, -1
	p.e.ac.scanAll(data, func(pos, tag int) {
		if pos >= curEnd || curStart < 0 {
			curStart = bytes.LastIndexByte(data[:pos], '\n') + 1
			if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
				curEnd = pos + i
			} else {
				curEnd = len(data)
			}
			b.events = append(b.events, event{start: curStart, tagOff: len(b.tags)})
			b.tags = append(b.tags, make([]uint64, words)...)
		}
		off := b.events[len(b.events)-1].tagOff
		b.tags[off+tag/64] |= 1 << (uint(tag) % 64)
	})

	// Lines with escapes, NULs or a \r that is not the CR of CRLF.
	sorted := true
	mark := func(pos int) int {
		start := bytes.LastIndexByte(data[:pos], '\n') + 1
		b.events = append(b.events, event{start: start, special: true, tagOff: -1})
		sorted = false
		// Continue after this line: one mark per line is enough.
		if nl := bytes.IndexByte(data[pos:], '\n'); nl >= 0 {
			return pos + nl + 1
		}
		return len(data)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		b.nul = int64(bytes.Count(data, []byte{0}))
	}
	for _, c := range []byte{0x1b, 0} {
		for off := 0; off < len(data); {
			i := bytes.IndexByte(data[off:], c)
			if i < 0 {
				break
			}
			off = mark(off + i)
		}
	}
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '\r')
		if i < 0 {
			break
		}
		at := off + i
		if at+1 < len(data) && data[at+1] != '\n' {
			off = mark(at)
			continue
		}
		off = at + 1
	}
	if len(p.e.always) > 0 {
		// A signature without a required literal: every line is a candidate.
		for off := 0; off < len(data); {
			b.events = append(b.events, event{start: off, special: true, tagOff: -1})
			nl := bytes.IndexByte(data[off:], '\n')
			if nl < 0 {
				break
			}
			off += nl + 1
		}
		sorted = false
	}
	if !sorted {
		sort.SliceStable(b.events, func(i, j int) bool { return b.events[i].start < b.events[j].start })
	}

	// Lines longer than the cap: such a line contains a whole aligned block
	// of max/2 bytes without a newline, which is cheap to look for.
	if len(data) > p.max {
		half := max(p.max/2, 1)
		lastCounted := -1
		for blk := 0; blk < len(data); blk += half {
			end := min(blk+half, len(data))
			if end-blk < half || bytes.IndexByte(data[blk:end], '\n') >= 0 {
				continue
			}
			start := bytes.LastIndexByte(data[:blk], '\n') + 1
			if start == lastCounted {
				continue
			}
			stop := len(data)
			if i := bytes.IndexByte(data[blk:], '\n'); i >= 0 {
				stop = blk + i
			}
			line := data[start:stop]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			if len(line) > p.max {
				b.truncated++
				lastCounted = start
			}
		}
	}

	// Invalid UTF-8: count the lines (rare, so a per-line pass is fine).
	if !utf8.Valid(data) {
		for off := 0; off < len(data); {
			i := bytes.IndexByte(data[off:], '\n')
			end := len(data)
			if i >= 0 {
				end = off + i
			}
			if !utf8.Valid(data[off:end]) {
				b.badUTF8++
			}
			off = end + 1
		}
	}

	// Ranks from launcher prefixes at line starts ("[rank3]:").
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte("[rank"))
		if i < 0 {
			break
		}
		at := off + i
		if at == 0 || data[at-1] == '\n' {
			if q, ok := skipDigits(data[at+5:]); ok && len(q) >= 2 && q[0] == ']' && q[1] == ':' {
				r := atoi(data[at+5:])
				if len(b.ranks) < maxRanksTracked && (len(b.ranks) == 0 || b.ranks[len(b.ranks)-1] != r) {
					b.ranks = append(b.ranks, r)
				}
			}
		}
		nl := bytes.IndexByte(data[at:], '\n')
		if nl < 0 {
			break
		}
		off = at + nl + 1
	}
}

// consume runs the second stage over one prepared chunk. line is the
// number of lines before the chunk.
func (s *scan) consume(fs *fileState, b *prepped, line int64) {
	data := b.data
	max := s.maxLine()
	for _, r := range b.ranks {
		if len(s.ranks) < maxRanksTracked {
			s.ranks[r] = true
		}
	}
	if b.giant {
		s.visitLine(fs, data, line+1, true, nil, true)
		return
	}
	cur, curLine := 0, line+1
	ei := 0
	for {
		var start int
		forced := fs.pendingLE != nil || fs.rootLeft > 0 || fs.join != nil
		switch {
		case forced && cur < len(data):
			start = cur
		case ei < len(b.events):
			start = b.events[ei].start
		default:
			return
		}
		if start < cur { // an event on a line already visited
			ei++
			continue
		}
		curLine += int64(bytes.Count(data[cur:start], []byte{'\n'}))
		end := len(data)
		if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
			end = start + i
		}
		var cand []uint64
		special := forced
		for ei < len(b.events) && b.events[ei].start == start {
			ev := b.events[ei]
			special = special || ev.special
			if ev.tagOff >= 0 && cand == nil {
				cand = b.tags[ev.tagOff : ev.tagOff+s.e.words]
			}
			ei++
		}
		text, trunc := capLine(data[start:end], max)
		if trunc {
			special = true // the prefilter saw the whole line; rescan the kept part
		}
		s.visit(fs, text, curLine, trunc, cand, special)
		cur, curLine = end+1, curLine+1
	}
}

// visit processes one line, first joining it to a held line it
// continues (join.go).
func (s *scan) visit(fs *fileState, text []byte, n int64, trunc bool, cand []uint64, careful bool) {
	if h := fs.join; h != nil {
		fs.join = nil
		if cont := continuation(h.text, text); cont != nil && len(h.text)+len(cont) < s.maxLine() {
			fs.joinBuf = joinLines(fs.joinBuf, h.text, cont)
			h.text, h.joins = append(h.text[:0], fs.joinBuf...), h.joins+1
			h.trunc = h.trunc || trunc
			if h.joins < maxJoins && mayBeCut(h.text) {
				fs.join = h // wrapped over more lines
				return
			}
			s.visitLine(fs, h.text, h.n, h.trunc, nil, true)
			return
		}
		s.visitLine(fs, h.text, h.n, h.trunc, nil, true)
	}
	channel := cand != nil && slices64Equal(cand, s.e.channelOnly)
	if !channel && !trunc && mayBeCut(text) && bytes.IndexByte(text, '\r') < 0 {
		fs.join = &heldLine{text: append([]byte(nil), text...), n: n}
		return
	}
	s.visitLine(fs, text, n, trunc, cand, careful)
}

// flushJoin processes a line still held at the end of an input.
func (s *scan) flushJoin(fs *fileState) {
	if h := fs.join; h != nil {
		fs.join = nil
		s.visitLine(fs, h.text, h.n, h.trunc, nil, true)
	}
}

// visitLine processes one line: the careful path cleans escapes and NULs,
// splits at interior carriage returns and re-runs the prefilter.
func (s *scan) visitLine(fs *fileState, text []byte, n int64, trunc bool, cand []uint64, careful bool) {
	if !careful && cand != nil {
		copy(s.cand, cand)
		s.line(fs, text, n, trunc, true)
		return
	}
	if needsCleaning(text) {
		s.clean = stripANSI(s.clean, text)
		text = s.clean
	}
	if bytes.IndexByte(text, '\r') < 0 {
		setClear(s.cand)
		hit := s.e.ac.scan(text, s.cand)
		s.line(fs, text, n, trunc, hit)
		return
	}
	// Progress bars redraw a line with \r; each segment is what the
	// terminal showed. Match them separately under one line number.
	for _, seg := range bytes.Split(text, []byte{'\r'}) {
		if len(seg) > 0 {
			setClear(s.cand)
			hit := s.e.ac.scan(seg, s.cand)
			s.line(fs, seg, n, trunc, hit)
		}
	}
}

// readInput runs the pipeline over one input.
func (s *scan) readInput(ctx context.Context, fs *fileState, cr *chunkReader) (stats ReadStats, err error) {
	p := &producer{e: s.e, max: s.maxLine(), cr: cr, free: make(chan *prepped, pipelineBuffers),
		work: make(chan *prepped, pipelineBuffers), order: make(chan *prepped, pipelineBuffers), done: make(chan struct{})}
	for i := 0; i < pipelineBuffers; i++ {
		p.free <- &prepped{}
	}
	var wg sync.WaitGroup
	for i := 0; i < pipelineWorkers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); p.worker() }()
	}
	go p.run()
	defer func() {
		close(p.done)
		for range p.order { // let the reader stop
		}
		wg.Wait()
	}()
	var lines int64
	for b := range p.order {
		<-b.ready
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		s.consume(fs, b, lines)
		fs.tail.add(b.data)
		lines += b.lines
		stats.Lines = lines
		stats.TruncatedLines += b.truncated
		stats.NULBytes += b.nul
		stats.BadUTF8Lines += b.badUTF8
		p.free <- b
	}
	stats.Bytes = cr.bytes
	return stats, nil
}
