package explain

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// The read loop is a two-stage pipeline over all inputs. A producer
// goroutine opens the inputs one after another and cuts them into chunks
// of whole lines; a pool of workers (one per core) does all per-byte work
// on the chunks, whatever input they belong to: the literal prefilter,
// finding lines with escapes, NULs or carriage returns, counting lines,
// UTF-8 validation and the ranks of launcher prefixes. The consumer (the
// caller's goroutine) takes the chunks in input order, visits only the
// lines the workers flagged and owns all analysis state, so the report is
// the same as reading the inputs one by one, while the scanning of several
// rank files proceeds on every core. A fixed pool of chunk buffers bounds
// memory whatever the number and size of the inputs.

// maxPipelineBuffers caps the chunks in flight (each about 1 MiB) on
// machines with many cores: memory, not cores, sets the bound.
const maxPipelineBuffers = 8

// pipelineSize returns the number of workers and chunk buffers.
func pipelineSize(o pipeShape) (workers, buffers int) {
	buffers = min(max(runtime.GOMAXPROCS(0)+2, 4), maxPipelineBuffers)
	workers = min(max(runtime.GOMAXPROCS(0), 2), buffers-1)
	if o.buffers > 0 {
		buffers = o.buffers
	}
	if o.workers > 0 {
		workers = o.workers
	}
	return workers, buffers
}

// binaryCheckBytes is how much of a gzip input is read before it may be
// judged binary and left unread: a gzip bomb of zeros or a compressed core
// dump ends there instead of being decompressed to its end.
const binaryCheckBytes = 64 << 20

// event is a line the consumer must look at.
type event struct {
	start   int
	tagOff  int32 // offset of its candidate set in prepped.tags, -1 none
	special bool  // escapes, NULs or an interior \r: clean and re-scan
	// A line whose only candidate is the transport trigger is parsed by
	// the worker (parseChannel is pure): pre is preParsed (from, to and
	// the via text at data[viaOff:viaOff+viaLen]) or preNot. Offsets, not
	// a slice: events hold no pointers for the collector to scan.
	pre                      int8
	from, to, viaOff, viaLen int32
	// meta is 1 + the index in prepped.metas of the line's prefixes,
	// parsed by the worker (linetext.ParseRaw is pure), or 0.
	meta int32
}

const (
	preParsed int8 = 1 // ch holds the transport line
	preNot    int8 = 2 // not a transport line (a trail, a Ring line)
)

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
	// content: some byte of data is neither NUL nor white space (an
	// input of NULs and newlines only is no text log).
	content bool
	// wrapWidth is the width at which the chunk's lines were cut hard (a
	// paste folded at a terminal's width), 0 when they were not.
	wrapWidth int
	ranks     []int
	metas     []linetext.Packed
	scratch   []event
	ready     chan struct{}
}

// itemKind says what a pipeline item carries.
type itemKind int

const (
	itemOpen  itemKind = iota // an input was opened (or could not be)
	itemChunk                 // a chunk of the current input
	itemEnd                   // the current input ended
)

// item is what the producer hands the consumer, in input order.
type item struct {
	kind  itemKind
	input int
	b     *prepped
	gzip  bool
	fatal error // itemOpen: the input cannot be opened; Analyze fails
	err   error // itemOpen: not readable (gzip header); itemEnd: read error
	bytes int64 // itemEnd: bytes read
	// itemEnd: reading stopped in a line of NULs (chunkReader.nulTail)
	binaryTail bool
}

// producer runs the first stage: one reader, several workers.
type producer struct {
	e      *Explainer
	inputs []Input
	max    int
	size   int // chunk buffer size; 0 for the default
	free   chan *prepped
	work   chan *prepped
	order  chan item
	done   chan struct{}
	// skip is the index of an input the consumer wants no more of
	// (judged binary), or -1.
	skip atomic.Int64
}

// send passes it to the consumer; false when the consumer has gone.
func (p *producer) send(it item) bool {
	select {
	case p.order <- it:
		return true
	case <-p.done:
		return false
	}
}

func (p *producer) run() {
	defer close(p.order)
	defer close(p.work)
	for i, in := range p.inputs {
		if !p.input(i, in) {
			return
		}
	}
}

// input reads one input to its end; false stops the producer.
func (p *producer) input(idx int, in Input) bool {
	if in.Open == nil {
		p.send(item{kind: itemOpen, input: idx, fatal: fmt.Errorf("%s: nothing to read", in.Name)})
		return false
	}
	rc, err := in.Open()
	if err != nil {
		p.send(item{kind: itemOpen, input: idx, fatal: fmt.Errorf("%s: %w", in.Name, err)})
		return false
	}
	defer rc.Close()
	r, gz, err := openMaybeGzip(rc)
	if err != nil {
		return p.send(item{kind: itemOpen, input: idx, gzip: gz, err: err})
	}
	if !p.send(item{kind: itemOpen, input: idx, gzip: gz}) {
		return false
	}
	cr := newChunkReader(r, p.max)
	if p.size > 0 {
		cr = newChunkReaderSize(r, p.max, p.size)
	}
	// A compressed input can expand a thousandfold (a gzip bomb): once it
	// shows itself binary it is left unread. An uncompressed one reads at
	// disk speed and a device is bounded by its stream limit.
	cr.nulTail = gz
	for p.skip.Load() != int64(idx) {
		var b *prepped
		select {
		case b = <-p.free:
		case <-p.done:
			return false
		}
		chunk, giant, ok := cr.nextInto(b.data)
		if !ok {
			p.free <- b // never blocks: the buffer came from there
			break
		}
		b.data = chunk // read in place: no copy
		b.giant = giant
		b.ready = make(chan struct{})
		select {
		case p.work <- b:
		case <-p.done:
			return false
		}
		if !p.send(item{kind: itemChunk, input: idx, b: b}) {
			return false
		}
	}
	return p.send(item{kind: itemEnd, input: idx, bytes: cr.bytes, err: cr.err, binaryTail: cr.binaryTail})
}

func (p *producer) worker() {
	for b := range p.work {
		p.prep(b)
		close(b.ready)
	}
}

// prep finds the lines of b.data that need the consumer.
func (p *producer) prep(b *prepped) {
	b.events, b.tags, b.ranks, b.metas = b.events[:0], b.tags[:0], b.ranks[:0], b.metas[:0]
	b.truncated, b.nul, b.badUTF8 = 0, 0, 0
	data := b.data
	b.content = hasContent(data)
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
	p.e.ac.ScanAll(data, func(pos, tag int) {
		if pos >= curEnd || curStart < 0 {
			curStart = bytes.LastIndexByte(data[:pos], '\n') + 1
			if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
				curEnd = pos + i
			} else {
				curEnd = len(data)
			}
			b.events = append(b.events, event{start: curStart, tagOff: int32(len(b.tags))})
			b.tags = append(b.tags, make([]uint64, words)...)
		}
		off := int(b.events[len(b.events)-1].tagOff)
		b.tags[off+tag/64] |= 1 << (uint(tag) % 64)
	})

	// Lines with escapes, NULs or a \r that is not the CR of CRLF.
	sorted, nLit := true, len(b.events)
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
	// Open MPI's tags inside a line: another rank's output without a
	// newline ran into it, and the line is read in its parts.
	for off := 0; off < len(data); {
		i := bytes.Index(data[off:], []byte("]<std"))
		if i < 0 {
			break
		}
		at := off + i
		start := bytes.LastIndexByte(data[:at], '\n') + 1
		if midTag(data[start:at+5]) >= 0 {
			off = mark(at)
			continue
		}
		off = at + 5
	}
	// A paste folded at a fixed width: its cut lines are visited so that
	// their parts are joined, whatever literal the cut split.
	if b.wrapWidth = wrapWidth(data); b.wrapWidth > 0 {
		for off := 0; off < len(data); {
			nl := bytes.IndexByte(data[off:], '\n')
			end := len(data)
			if nl >= 0 {
				end = off + nl
			}
			if l := trimEnd(data[off:end]); len(l) == b.wrapWidth {
				b.events = append(b.events, event{start: off, special: true, tagOff: -1})
				sorted = false
			}
			if nl < 0 {
				break
			}
			off = end + 1
		}
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
		// The literal events are in order; sort the few others and merge
		// (as a stable sort of all would, literal events first on a tie).
		extra := b.events[nLit:]
		slices.SortStableFunc(extra, func(x, y event) int { return x.start - y.start })
		b.scratch = append(b.scratch[:0], b.events...)
		lit, ext := b.scratch[:nLit], b.scratch[nLit:]
		out := b.events[:0]
		for len(lit) > 0 && len(ext) > 0 {
			if ext[0].start < lit[0].start {
				out, ext = append(out, ext[0]), ext[1:]
			} else {
				out, lit = append(out, lit[0]), lit[1:]
			}
		}
		b.events = append(append(out, lit...), ext...)
	}

	// Transport lines, the bulk of an INFO log, parsed here on all cores.
	for i := range b.events {
		ev := &b.events[i]
		if ev.special || ev.tagOff < 0 || !slices64Equal(b.tags[ev.tagOff:int(ev.tagOff)+words], p.e.channelOnly) {
			continue
		}
		end := len(data)
		if j := bytes.IndexByte(data[ev.start:], '\n'); j >= 0 {
			end = ev.start + j
		}
		text, trunc := capLine(data[ev.start:end], p.max)
		if trunc {
			continue
		}
		cl, ok := parseChannel(text)
		if !ok {
			ev.pre = preNot
			continue
		}
		via, inText := viaOffset(text, cl.Via)
		if !inText || cl.From != int(int32(cl.From)) || cl.To != int(int32(cl.To)) {
			continue // not expressible as offsets: the consumer parses it
		}
		ev.pre, ev.from, ev.to = preParsed, int32(cl.From), int32(cl.To)
		ev.viaOff, ev.viaLen = int32(ev.start+via), int32(len(cl.Via))
	}

	// The prefixes of the other candidate lines, parsed here on all cores;
	// the consumer uses them for exactly this text (scan.line).
	for i := range b.events {
		ev := &b.events[i]
		if ev.special || ev.tagOff < 0 || ev.pre != 0 {
			continue
		}
		end := len(data)
		if j := bytes.IndexByte(data[ev.start:], '\n'); j >= 0 {
			end = ev.start + j
		}
		text, trunc := capLine(data[ev.start:end], p.max)
		if trunc || len(text) == 0 {
			continue
		}
		r := linetext.ParseRaw(text)
		if pm, ok := r.Pack(text); ok {
			b.metas = append(b.metas, pm)
			ev.meta = int32(len(b.metas))
		}
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
			if q, ok := linetext.SkipDigits(data[at+5:]); ok && len(q) >= 2 && q[0] == ']' && q[1] == ':' {
				r := linetext.Atoi(data[at+5:])
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
		var pre *event
		special := forced
		for ei < len(b.events) && b.events[ei].start == start {
			ev := &b.events[ei]
			special = special || ev.special
			if ev.tagOff >= 0 && cand == nil {
				cand = b.tags[ev.tagOff : int(ev.tagOff)+s.e.words]
				pre = ev
			}
			ei++
		}
		text, trunc := capLine(data[start:end], max)
		if trunc {
			special = true // the prefilter saw the whole line; rescan the kept part
		}
		if !special && pre != nil && pre.pre != 0 {
			// What visit → visitLine → line do with a transport-only
			// line when nothing is held or pending, minus the parsing.
			copy(s.cand, cand)
			s.seq++
			var cl channelLine
			if pre.pre == preParsed {
				cl = channelLine{From: int(pre.from), To: int(pre.to), Via: data[pre.viaOff : pre.viaOff+pre.viaLen]}
			}
			s.channelParsed(fs, text, curLine, cl, pre.pre == preParsed)
		} else {
			if pre != nil && pre.meta > 0 {
				s.preMeta, s.preText = &b.metas[pre.meta-1], text
			}
			if fs.join == nil && start > cur && !trunc {
				s.joinBack(fs, data[cur:start], text, curLine)
			}
			s.visit(fs, text, curLine, trunc, cand, special)
			s.preMeta, s.preText = nil, nil
		}
		cur, curLine = end+1, curLine+1
	}
}

// visit processes one line, first joining it to a held line it
// continues (join.go).
func (s *scan) visit(fs *fileState, text []byte, n int64, trunc bool, cand []uint64, careful bool) {
	if h := fs.join; h != nil {
		fs.join = nil
		if cont := continuation(h.text, text, h.last, fs.wrapWidth); cont != nil && len(h.text)+len(cont) < s.maxLine() {
			if fs.wrapWidth > 0 && h.last == fs.wrapWidth {
				// Cut hard at the width: nothing was lost at the seam.
				fs.joinBuf = joinLines(fs.joinBuf, h.text, cont, false)
			} else {
				fs.joinBuf = s.joinBest(fs.joinBuf, h.text, cont)
			}
			h.text, h.joins, h.last = append(h.text[:0], fs.joinBuf...), h.joins+1, len(text)
			h.trunc = h.trunc || trunc
			if h.joins < maxJoins && (mayBeCut(h.text) || fs.wrapWidth > 0 && len(text) == fs.wrapWidth) {
				fs.join = h // wrapped over more lines
				return
			}
			s.visitLine(fs, h.text, h.n, h.trunc, nil, true)
			return
		}
		s.visitLine(fs, h.text, h.n, h.trunc, nil, true)
	}
	channel := cand != nil && slices64Equal(cand, s.e.channelOnly)
	if !channel && !trunc && (mayBeCut(text) || fs.wrapWidth > 0 && len(text) == fs.wrapWidth) && bytes.IndexByte(text, '\r') < 0 {
		fs.join = &heldLine{text: append([]byte(nil), text...), n: n, last: len(text)}
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
	if linetext.NeedsCleaning(text) {
		s.clean = linetext.StripANSI(s.clean, text)
		text = s.clean
	}
	if bytes.IndexByte(text, '\r') < 0 && midTag(text) < 0 {
		linetext.SetClear(s.cand)
		hit := s.e.ac.Scan(text, s.cand)
		s.line(fs, text, n, trunc, hit)
		return
	}
	// Progress bars redraw a line with \r; each segment is what the
	// terminal showed. An Open MPI tag inside a line starts another
	// process's output. Match the parts separately under one line number.
	for _, seg := range bytes.Split(text, []byte{'\r'}) {
		for len(seg) > 0 {
			part := seg
			if i := midTag(seg); i >= 0 {
				part, seg = seg[:i], seg[i:]
			} else {
				seg = nil
			}
			linetext.SetClear(s.cand)
			hit := s.e.ac.Scan(part, s.cand)
			s.line(fs, part, n, trunc, hit)
		}
	}
}

// midTag is the offset of the first Open MPI --tag-output tag
// ("[1,3]<stderr>:") in text after its first byte, -1 when there is none.
func midTag(text []byte) int {
	for off := 1; off < len(text); {
		i := bytes.Index(text[off:], []byte("]<std"))
		if i < 0 {
			return -1
		}
		at := off + i
		// Back over "[digits,digits".
		j := at - 1
		for j >= 0 && text[j] >= '0' && text[j] <= '9' {
			j--
		}
		if j < 0 || j == at-1 || text[j] != ',' {
			off = at + 5
			continue
		}
		k := j - 1
		for k >= 0 && text[k] >= '0' && text[k] <= '9' {
			k--
		}
		if k >= 1 && k < j-1 && text[k] == '[' {
			return k
		}
		off = at + 5
	}
	return -1
}

// analyze runs the pipeline over the inputs, in order.
func (s *scan) analyze(ctx context.Context, inputs []Input) error {
	workers, buffers := pipelineSize(s.e.opts.pipe)
	p := &producer{e: s.e, inputs: inputs, max: s.maxLine(), size: s.e.opts.pipe.bufSize, free: make(chan *prepped, buffers),
		work: make(chan *prepped, buffers), order: make(chan item, buffers), done: make(chan struct{})}
	p.skip.Store(-1)
	for i := 0; i < buffers; i++ {
		p.free <- &prepped{}
	}
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); p.worker() }()
	}
	go p.run()
	defer func() {
		close(p.done)
		for it := range p.order { // let the reader stop
			if it.b != nil {
				<-it.b.ready
			}
		}
		wg.Wait()
	}()
	var (
		fs    *fileState
		info  InputInfo
		stats ReadStats
	)
	for it := range p.order {
		switch it.kind {
		case itemOpen:
			if it.fatal != nil {
				return it.fatal
			}
			name := inputs[it.input].Name
			info, stats = InputInfo{Name: name, Gzip: it.gzip}, ReadStats{}
			if it.err != nil {
				info.Error = it.err.Error()
				s.inputs = append(s.inputs, info)
				s.warnings = append(s.warnings, fmt.Sprintf("%s: %v", name, it.err))
				fs = nil
				continue
			}
			fs = &fileState{idx: it.input, name: name, fileRank: -1}
			if sm := reFileRank.FindStringSubmatch(filepath.Base(name)); sm != nil {
				fs.fileRank = linetext.Atoi([]byte(sm[1]))
			}
		case itemChunk:
			b := it.b
			<-b.ready
			if err := ctx.Err(); err != nil {
				return err
			}
			if !info.Binary {
				fs.wrapWidth = b.wrapWidth
				s.consume(fs, b, stats.Lines)
				fs.tail.add(b.data)
			}
			stats.Lines += b.lines
			stats.TruncatedLines += b.truncated
			stats.NULBytes += b.nul
			if b.content {
				stats.ContentChunks++
			}
			stats.BadUTF8Lines += b.badUTF8
			stats.Bytes += int64(len(b.data))
			p.free <- b
			if info.Gzip && !info.Binary && stats.Bytes >= binaryCheckBytes && looksBinary(stats) {
				info.Binary = true
				p.skip.Store(int64(it.input))
			}
		case itemEnd:
			stats.Bytes = it.bytes
			info.Binary = info.Binary || it.binaryTail
			s.endInput(fs, info, stats, it.err)
		}
	}
	return nil
}

// viaOffset is the offset of sub in text when sub is a subslice of it.
func viaOffset(text, sub []byte) (int, bool) {
	if len(sub) == 0 {
		return 0, true
	}
	off := cap(text) - cap(sub)
	if off < 0 || off+len(sub) > len(text) || &text[off] != &sub[0] {
		return 0, false
	}
	return off, true
}

// looksBinary: many lines that are not UTF-8, or nothing but NULs (and
// the newlines between them, however long the lines that were cut) is not
// a text log. (NUL-filled holes inside a text log are common after a
// crash.)
func looksBinary(st ReadStats) bool {
	return st.Bytes > 0 && (st.BadUTF8Lines*10 > st.Lines || float64(st.NULBytes) > 0.9*float64(st.Bytes) ||
		st.NULBytes > 0 && st.ContentChunks == 0)
}

// hasContent tells whether data holds a byte that is neither NUL nor
// white space. A text chunk answers at its first byte; only chunks of
// NULs and blanks are read to their end.
func hasContent(data []byte) bool {
	for _, c := range data {
		switch c {
		case 0, '\n', '\r', '\t', ' ':
		default:
			return true
		}
	}
	return false
}

// endInput records what was read of one input.
func (s *scan) endInput(fs *fileState, info InputInfo, st ReadStats, readErr error) {
	s.flushJoin(fs)
	s.digest.hang.endInput(fs.name, &fs.tail, st.Lines)
	s.tailRanks(&fs.tail)
	info.Bytes, info.Lines, info.TruncatedLines = st.Bytes, st.Lines, st.TruncatedLines
	info.NULBytes, info.BadUTF8Lines = st.NULBytes, st.BadUTF8Lines
	info.Empty = st.Bytes == 0
	if info.Binary { // judged early, the rest left unread
		s.warnings = append(s.warnings, fmt.Sprintf("%s: not a text log (binary data or NULs in its first %s); the rest was not read", fs.name, units.Bytes(uint64(st.Bytes))))
	}
	info.Binary = info.Binary || looksBinary(st)
	if readErr != nil {
		info.Error = readErr.Error()
		s.warnings = append(s.warnings, fmt.Sprintf("%s: reading stopped after line %d: %v", fs.name, st.Lines, readErr))
	}
	s.endTables(fs)
	s.inputs = append(s.inputs, info)
}
