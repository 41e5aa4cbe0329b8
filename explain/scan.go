package explain

import (
	"bytes"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// Limits that keep memory constant.
const (
	maxRanksTracked = 4096
	maxHostsTracked = 256
	maxUnrecognised = 5
	maxEvidenceText = 2048
)

// sigAgg accumulates the hits of one signature.
type sigAgg struct {
	def        *sigDef
	count      int
	firstSeq   int64
	first      Evidence
	earliestTS linetext.Stamp
	earliest   Evidence
	evidence   []Evidence
	evKeys     map[string]bool
	fields     map[string]string
	ranks      map[int]bool
	hosts      map[string]bool
	payload    bool // some hit came through a Last error payload
	direct     bool // some hit was a line of its own
	explained  bool // a wrapper whose Last error payload matched a cause
	lastErrors []Evidence
	benignName string
	// catalogued counts warnings the catalogue knows and places in their
	// subsystem (the rest of an unknown aggregate is unrecognised).
	catalogued int
	// lastSeq is the seq of the last line recorded.
	lastSeq int64
}

// scan is the state of one Analyze call.
type scan struct {
	e     *Explainer
	seq   int64
	cand  []uint64
	cand2 []uint64
	synth []byte
	clean []byte
	// seam, seam2: scratch for joinBest.
	seam, seam2 []byte
	strs        linetext.StrCache // hosts and launchers of parsed lines
	// preMeta is the worker's parse of preText, the line being visited.
	preMeta  *linetext.Packed
	preText  []byte
	aggs     map[string]*sigAgg
	notes    map[string]*sigAgg
	digest   *digestAcc
	unknown  *sigAgg
	ranks    map[int]bool
	wd       map[int]wdRecord
	wdSeq    map[int]seqRecord
	errs     []errorHit
	root     *TorchrunFailure
	inputs   []InputInfo
	warnings []string
	// earliest failure by timestamp, and first by order.
	earliest   *Evidence
	earliestTS linetext.Stamp
	// trail is the first frame of NCCL's INFO return-code trail.
	trail    *Evidence
	firstSig *SignatureFirst
	// failAt is the seq of the first failure line per input and rank
	// (rank -1: not known), to tell an exception raised after its own
	// rank failed (a knock-on) from one raised before.
	failAt map[[2]int]int64
	// timeoutAt is the same for a waiter's failure (a timeout): what a
	// rank reports after its own collective timed out is its knock-on.
	timeoutAt map[[2]int]int64
	// cat is the catalogue analysis (catalog_use.go); failures is every
	// entry of torchrun's failure summaries (ranks.go).
	cat      *catState
	failures []TorchrunFailure
	// seenRanks and seenLocal are the global and local ranks the launcher
	// prefixes of the inputs' last lines name (ranks.go).
	seenRanks, seenLocal map[int]bool
	// desyncOps is the collective each rank ran in PyTorch's mismatch
	// lines (ranks.go).
	desyncOps map[int]string
}

// errorHit is a non-NCCL error line.
type errorHit struct {
	line ErrorLine
	seq  int64
	ts   linetext.Stamp
	file int
}

func (e *Explainer) newScan() *scan {
	s := &scan{
		e: e, cand: make([]uint64, e.words), cand2: make([]uint64, e.words),
		aggs: map[string]*sigAgg{}, notes: map[string]*sigAgg{}, digest: newDigestAcc(),
		ranks: map[int]bool{}, wd: map[int]wdRecord{}, wdSeq: map[int]seqRecord{},
		failAt: map[[2]int]int64{}, timeoutAt: map[[2]int]int64{}, cat: newCatState(), seenRanks: map[int]bool{}, seenLocal: map[int]bool{}, desyncOps: map[int]string{},
	}
	s.digest.hang.isInit = s.isInitLine
	return s
}

// sigHit is one signature matched on one line.
type sigHit struct {
	def  *sigDef
	caps []string
}

// line processes one line (or one \r segment of it) whose prefilter
// candidates are in s.cand.
func (s *scan) line(fs *fileState, text []byte, n int64, trunc bool, hit bool) {
	s.seq++
	if !hit && fs.pendingLE == nil && fs.rootLeft == 0 && len(s.e.always) == 0 {
		return
	}
	// The most common hit of an INFO log: a transport line and nothing else.
	if hit && fs.pendingLE == nil && fs.rootLeft == 0 && slices64Equal(s.cand, s.e.channelOnly) {
		s.channel(fs, text, n)
		return
	}
	var m linetext.Meta
	if p := s.preMeta; p != nil && len(text) > 0 && len(text) == len(s.preText) && &text[0] == &s.preText[0] {
		m = p.Meta(text, &s.strs) // a worker parsed this very text
	} else {
		m = linetext.ParseIn(text, &s.strs)
	}
	if m.Rank < 0 {
		m.Rank = s.digest.rankOf(m)
	}
	if m.Rank < 0 && fs.fileRank >= 0 {
		m.Rank = fs.fileRank
	}
	if m.Rank < 0 {
		m.Rank = inlineLabelRank(m.Msg)
	}
	if fs.rootLeft > 0 {
		s.rootBlock(fs, m.Msg, n)
		// A line of a failure summary's entry (an @record traceback)
		// belongs to the entry's rank.
		if e := fs.entry; e != nil && fs.rootLeft > 0 && m.Rank < 0 && e.Rank >= 0 {
			m.Rank = e.Rank
		}
	}
	if fs.spawnLeft > 0 {
		fs.spawnLeft--
		if m.Rank < 0 {
			m.Rank = fs.spawnRank
		}
	}
	ev := func() Evidence { return s.evidence(fs, text, n, trunc, m) }

	if fs.pendingLE != nil && !linetext.SetHas(s.cand, s.e.tagLastError) {
		p := fs.pendingLE
		if m.Launcher == p.launcher {
			if payload := bytes.TrimSpace(m.Msg); len(payload) > 0 {
				fs.pendingLE = nil
				s.payload(fs, payload, ev(), m)
				return
			}
		}
		if p.ttl--; p.ttl <= 0 {
			fs.pendingLE = nil
		}
	}
	if !hit && len(s.e.always) == 0 {
		return
	}
	if linetext.SetHas(s.cand, s.e.tagChannel) {
		s.channel(fs, text, n)
	}
	if linetext.SetHas(s.cand, s.e.tagRoot) {
		s.tableStart(fs, m.Msg, n)
	}
	if linetext.SetHas(s.cand, s.e.tagFrame) {
		if msg := stripLogLevel(m.Msg); linetext.PyFrame.Match(msg) {
			fs.lastFrame, fs.lastFrameN = strings.TrimSpace(string(truncText(msg))), n
		}
	}

	// Benign lines feed notes and the digest, never diagnoses.
	if linetext.SetHas(s.cand, s.e.tagBenign) {
		for _, b := range benign {
			if b.Re.Match(text) {
				if b.Name == "cumem-host-fallback" {
					s.digest.cumemFallback(m, fs.name)
				}
				for _, h := range s.matchSigs(text, s.cand) {
					s.record(s.notes, h, ev(), m, fs, false).benignName = b.Name
				}
				return
			}
		}
	}

	// "Last error: <WARN text>" on one line: the text after the marker is
	// the payload, matched as such; the rest of the line as usual.
	matchText := text
	var samePayload []byte
	if linetext.SetHas(s.cand, s.e.tagLastError) {
		if i := bytes.Index(text, []byte("Last error:")); i >= 0 {
			if p := bytes.TrimSpace(text[i+len("Last error:"):]); len(p) > 0 {
				matchText, samePayload = text[:i], p
			}
		}
	}
	hits := s.matchSigs(matchText, s.cand)
	hits = s.overrideHits(fs, hits, m, text, ev)
	for _, h := range hits {
		if warningSignatures[h.def.ID] {
			s.record(s.notes, h, ev(), m, fs, false)
			continue
		}
		a := s.record(s.aggs, h, ev(), m, fs, false)
		s.failureSeen(h.def, ev, m)
		s.markFailed(fs, h.def, m)
		if h.def.Role == RoleWrapper {
			fs.lastWrapper = a
		}
	}
	if kinds := s.e.infoKinds(s.cand); kinds != 0 {
		s.digest.info(text, m, fs.name, n, kinds)
	}
	if samePayload != nil {
		s.payload(fs, samePayload, ev(), m)
	} else if linetext.SetHas(s.cand, s.e.tagLastError) && bytes.Contains(m.Msg, []byte("Last error:")) {
		fs.pendingLE = &pendingLastError{launcher: m.Launcher, ttl: 6}
	}
	catOK := linetext.SetHas(s.cand, s.e.tagCatalog) || linetext.SetHas(s.cand, s.e.tagError)
	if len(hits) > 0 {
		if catOK && samePayload == nil && fs.pendingLE == nil {
			s.catalogLine(fs, m, ev, true)
		}
		return
	}
	if linetext.SetHas(s.cand, s.e.tagWarn) && m.Level == "WARN" {
		if !s.catalogWarn(fs, ev, m, text) {
			s.unrecognised(fs, ev(), m)
		}
		return
	}
	if catOK && samePayload == nil && fs.pendingLE == nil && s.catalogLine(fs, m, ev, false) {
		return
	}
	if linetext.SetHas(s.cand, s.e.tagError) {
		if kind := classifyError(m.Msg); kind != "" {
			s.errorLine(fs, kind, ev(), m)
		} else {
			s.noteUnplaced(m.Msg, ev)
		}
	}
}

func slices64Equal(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s *scan) channel(fs *fileState, text []byte, n int64) {
	cl, ok := parseChannel(text)
	s.channelParsed(fs, text, n, cl, ok)
}

// channelParsed is channel with the line already parsed (by a pipeline
// worker, for lines that are transport lines and nothing else).
func (s *scan) channelParsed(fs *fileState, text []byte, n int64, cl channelLine, ok bool) {
	if !ok {
		// Not a transport line: perhaps a backtrace ("shm.cc:169 -> 2").
		had := s.digest.origin != ""
		s.digest.backtrace(text)
		if !had && s.digest.origin != "" {
			m := linetext.Parse(text)
			if m.Rank < 0 {
				m.Rank = s.digest.rankOf(m)
			}
			if m.Rank < 0 && fs.fileRank >= 0 {
				m.Rank = fs.fileRank
			}
			e := s.evidence(fs, text, n, false, m)
			s.trail = &e
		}
		return
	}
	s.digest.channel(cl)
	s.digest.hang.channel(cl, text, fs.name)
	// P2P transport lines are the context of the p2p-hang-acs-iommu
	// signature: kept as evidence should a hang point at P2P.
	t := s.e.transportSig
	if t == nil || !bytes.HasPrefix(cl.Via, []byte("P2P")) {
		return
	}
	if a := s.aggs[t.ID]; a != nil {
		a.count++
		return
	}
	m := linetext.Parse(text)
	m.Rank = cl.From
	caps := make([]string, t.Re.NumSubexp())
	s.record(s.aggs, sigHit{def: t, caps: caps}, s.evidence(fs, text, n, false, m), m, fs, false)
}

// matchSigs runs the regexps of the candidate signatures on text. Of two
// causes matching the same line only the more specific is kept
// (fabric-manager-not-ready over cuda-init-failure, cumem-host-alloc over
// gpu-oom-init).
func (s *scan) matchSigs(text []byte, cand []uint64) []sigHit {
	var hits []sigHit
	try := func(d *sigDef) {
		if d == s.e.transportSig || d.Re == nil {
			return
		}
		loc := d.Re.FindSubmatchIndex(text)
		if loc == nil {
			return
		}
		caps := make([]string, len(loc)/2-1)
		for g := 1; g < len(loc)/2; g++ {
			if loc[2*g] >= 0 {
				caps[g-1] = string(text[loc[2*g]:loc[2*g+1]])
			}
		}
		hits = append(hits, sigHit{def: d, caps: caps})
	}
	linetext.SetEach(cand, func(t int) {
		if t < len(s.e.sigs) {
			try(s.e.sigs[t])
		}
	})
	for _, d := range s.e.always {
		try(d)
	}
	// Keep the most specific cause.
	best := -1
	for i, h := range hits {
		if h.def.Role == RoleCause && !warningSignatures[h.def.ID] && (best < 0 || h.def.Prec < hits[best].def.Prec) {
			best = i
		}
	}
	if best >= 0 {
		out := hits[:0]
		for i, h := range hits {
			if h.def.Role == RoleCause && !warningSignatures[h.def.ID] && i != best {
				continue
			}
			out = append(out, h)
		}
		hits = out
	}
	return hits
}

// record adds a hit to the aggregate of its signature.
func (s *scan) record(into map[string]*sigAgg, h sigHit, ev Evidence, m linetext.Meta, fs *fileState, viaPayload bool) *sigAgg {
	a := into[h.def.ID]
	if a == nil {
		a = newSigAgg(h.def, s.seq, ev)
		into[h.def.ID] = a
	}
	a.count++
	a.lastSeq = s.seq
	if viaPayload {
		a.payload = true
	} else {
		a.direct = true
	}
	key := evKey(m)
	if len(a.evidence) < s.e.opts.MaxEvidence && (len(a.evidence) < 2 || !a.evKeys[key]) {
		a.evidence = append(a.evidence, ev)
		a.evKeys[key] = true
	}
	for i, name := range h.def.Fields {
		if name == "" || i >= len(h.caps) || h.caps[i] == "" {
			continue
		}
		if _, ok := a.fields[name]; !ok {
			a.fields[name] = h.caps[i]
		}
	}
	a.where(m, ev)
	switch h.def.ID {
	case idCollectiveDesync:
		s.desyncSides(ev.Text)
	case "watchdog-timeout":
		if _, ok := s.wd[m.Rank]; !ok && len(s.wd) < maxRanksTracked {
			s.wd[m.Rank] = recordFromFields(m.Rank, h.caps).withLine(ev)
		}
	case "watchdog-seq-status":
		if len(h.caps) >= 3 && len(s.wdSeq) < maxRanksTracked {
			if _, ok := s.wdSeq[m.Rank]; !ok {
				s.wdSeq[m.Rank] = seqRecord{Rank: m.Rank, TimeoutSeq: parseInt64(h.caps[0], -1),
					LastEnq: parseInt64(h.caps[1], -1), LastComplete: parseInt64(h.caps[2], -1)}
			}
		}
	}
	return a
}

func evKey(m linetext.Meta) string {
	switch {
	case m.Rank >= 0:
		return "r" + itoa(m.Rank)
	case m.Host != "":
		return "h" + m.Host + ":" + itoa(m.PID)
	}
	return ""
}

func itoa(n int) string { return string(appendInt(nil, n)) }

func appendInt(b []byte, n int) []byte {
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}

// failureSeen tracks the earliest failure by time and the first by order.
func (s *scan) failureSeen(d *sigDef, ev func() Evidence, m linetext.Meta) {
	if d.Role == RoleContext {
		return
	}
	if s.firstSig == nil {
		e := ev()
		s.firstSig = &SignatureFirst{ID: d.ID, File: e.File, Line: e.Line}
	}
	if m.TS.OK && (s.earliest == nil || m.TS.Before(s.earliestTS)) {
		e := ev()
		e.Signature = d.ID
		s.earliest, s.earliestTS = &e, m.TS
	}
}

// markFailed records the first failure (and the first timeout) line of
// this input and rank.
func (s *scan) markFailed(fs *fileState, d *sigDef, m linetext.Meta) {
	if len(s.failAt) >= maxRanksTracked {
		return
	}
	k := [2]int{fs.idx, m.Rank}
	// The watchdog's "Timeout at NCCL work: N" is context for a diagnosis
	// but still says this rank's collective timed out (its timeout line
	// may be wrapped or elided past reading).
	if _, ok := s.timeoutAt[k]; !ok && (d.waiter || d.ID == "watchdog-seq-status") {
		s.timeoutAt[k] = s.seq
	}
	if d.Role == RoleContext {
		return
	}
	if _, ok := s.failAt[k]; !ok {
		s.failAt[k] = s.seq
	}
}

// evidence copies a line into an Evidence (text is capped for display).
func (s *scan) evidence(fs *fileState, text []byte, n int64, trunc bool, m linetext.Meta) Evidence {
	t := truncText(text)
	ev := Evidence{File: fs.name, Line: n, Text: string(t), Rank: m.Rank,
		Host: m.Host, PID: m.PID, Time: m.TS.String(), Truncated: trunc || len(t) < len(text)}
	if m.LocalRank >= 0 {
		lr := m.LocalRank
		ev.LocalRank = &lr
	}
	return ev
}

func truncText(b []byte) []byte {
	if len(b) > maxEvidenceText {
		return trimPartialRune(b[:maxEvidenceText])
	}
	return b
}

// payload re-matches the text of PyTorch's "Last error:" against the
// signatures: it is the last NCCL WARN message, without its prefix.
func (s *scan) payload(fs *fileState, payload []byte, ev Evidence, m linetext.Meta) {
	ev.ViaLastError = true
	s.synth = append(append(s.synth[:0], "NCCL WARN "...), payload...)
	linetext.SetClear(s.cand2)
	s.e.ac.Scan(s.synth, s.cand2)
	matched := false
	for _, h := range s.matchSigs(s.synth, s.cand2) {
		if warningSignatures[h.def.ID] {
			continue
		}
		a := s.record(s.aggs, h, ev, m, fs, true)
		s.failureSeen(h.def, func() Evidence { return ev }, m)
		if h.def.Role == RoleCause {
			matched = true
		}
		_ = a
	}
	if !matched {
		matched = s.catalogPayload(fs, payload, ev, m)
	}
	if matched {
		if w := fs.lastWrapper; w != nil {
			w.explained = true
		}
		return
	}
	// No signature explains it: the wrapper it belongs to carries it.
	if w := fs.lastWrapper; w != nil {
		if len(w.lastErrors) < s.e.opts.MaxEvidence {
			w.lastErrors = append(w.lastErrors, ev)
		}
		if _, ok := w.fields["last_error"]; !ok && !isUnknownPayload(payload) {
			w.fields["last_error"] = string(truncText(payload))
		}
	}
}

// newSigAgg starts the aggregate of def at its first line (seq, ev).
func newSigAgg(def *sigDef, seq int64, ev Evidence) *sigAgg {
	return &sigAgg{def: def, firstSeq: seq, first: ev, evKeys: map[string]bool{}, fields: map[string]string{},
		ranks: map[int]bool{}, hosts: map[string]bool{}}
}

// where notes the rank, host and time of one more line of a.
func (a *sigAgg) where(m linetext.Meta, ev Evidence) {
	if m.Rank >= 0 && len(a.ranks) < maxRanksTracked {
		a.ranks[m.Rank] = true
	}
	if m.Host != "" && len(a.hosts) < maxHostsTracked {
		a.hosts[m.Host] = true
	}
	if m.TS.OK && (!a.earliestTS.OK || m.TS.Before(a.earliestTS)) {
		a.earliestTS, a.earliest = m.TS, ev
	}
}

func isUnknownPayload(p []byte) bool {
	p = bytes.TrimSpace(p)
	return len(p) == 0 || bytes.EqualFold(p, []byte("unknown"))
}

// unrecognised keeps NCCL WARN lines no signature explains.
func (s *scan) unrecognised(fs *fileState, ev Evidence, m linetext.Meta) {
	if s.unknown == nil {
		s.unknown = newSigAgg(&sigDef{ID: idUnrecognisedWarn, Role: RoleCause, Prec: len(precedence)}, s.seq, ev)
		if i := indexOf(precedence, idUnrecognisedWarn); i >= 0 {
			s.unknown.def.Prec = i
		}
	}
	a := s.unknown
	a.count++
	// The first WARN whose source file names a subsystem places them all.
	if _, ok := a.fields["source"]; !ok {
		if file, _, ok := s.e.subsystemOf(ev.Text); ok {
			a.fields["source"] = file
		}
	}
	if len(a.evidence) < maxUnrecognised {
		a.evidence = append(a.evidence, ev)
	}
	a.where(m, ev)
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// errorLine keeps non-NCCL errors (bounded).
func (s *scan) errorLine(fs *fileState, kind string, ev Evidence, m linetext.Meta) {
	if len(s.errs) >= 64 {
		return
	}
	el := ErrorLine{Kind: kind, Evidence: ev}
	if fs.lastFrame != "" && ev.Line-fs.lastFrameN <= 4 && ev.Line >= fs.lastFrameN {
		el.Frame = fs.lastFrame
	}
	s.errs = append(s.errs, errorHit{line: el, seq: s.seq, ts: m.TS, file: fs.idx})
}

// signalName maps torchrun's negative exit codes to signal names.
func signalName(code string) string {
	switch code {
	case "-6":
		return "SIGABRT"
	case "-7":
		return "SIGBUS"
	case "-9":
		return "SIGKILL"
	case "-11":
		return "SIGSEGV"
	case "-15":
		return "SIGTERM"
	}
	return ""
}
