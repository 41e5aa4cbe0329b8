package explain

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain/catalog"
	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
	"github.com/ncclwiz/ncclwiz/guides"
)

// Input is one log to read: a file, stdin, or anything else. Open is called
// once; the explainer closes what it returns. Gzip data is recognised by
// its magic bytes, whatever the name.
type Input struct {
	Name string
	Open func() (io.ReadCloser, error)
}

// Message returns a log line without its launcher, timestamp, glog and NCCL
// prefixes: the words a person reads first when space is short. It is
// explain's API over the line parser in explain/internal/linetext.
func Message(line string) string { return linetext.Message(line) }

// FileInput reads a file.
func FileInput(path string) Input {
	return Input{Name: path, Open: func() (io.ReadCloser, error) { return os.Open(path) }}
}

// ReaderInput reads r (e.g. stdin) under the given name. It can be
// analysed once.
func ReaderInput(name string, r io.Reader) Input {
	return Input{Name: name, Open: func() (io.ReadCloser, error) { return io.NopCloser(r), nil }}
}

// Options tune the explainer. The zero value is ready to use.
type Options struct {
	// Library supplies the signatures and the guides they route to; nil
	// loads the embedded library.
	Library *guides.Library
	// Catalog is the message catalogue; nil loads the embedded one.
	Catalog *catalog.Catalog
	// Lang picks translated guide titles ("" or "en" for English).
	Lang string
	// MaxLineBytes caps how much of one line is kept (DefaultMaxLine).
	MaxLineBytes int
	// MaxEvidence caps the evidence lines per diagnosis (default 5).
	MaxEvidence int
	// pipe overrides the pipeline's shape (tests).
	pipe pipeShape
}

// pipeShape is the read pipeline's shape; zero fields take the defaults.
type pipeShape struct {
	workers, buffers, bufSize int
}

// Explainer holds compiled signatures; it is immutable and safe for
// concurrent use. Compile once, analyse many logs.
type Explainer struct {
	lib   *guides.Library
	cat   *catalog.Catalog
	opts  Options
	sigs  []*sigDef
	byID  map[string]*sigDef
	ac    *linetext.GramScanner
	words int
	// tag numbers of the auxiliary triggers.
	tagChannel, tagLastError, tagWarn, tagError, tagFrame, tagBenign, tagRoot, tagCatalog int
	// tagInfo[k] is the trigger of the INFO digest line kind 1<<k
	// (digest.go): the digest runs only the parsers whose literal is on
	// the line.
	tagInfo      [numInfoKinds]int
	channelOnly  []uint64
	transportSig *sigDef
	// overridable are the signatures a catalogue value rule may replace.
	overridable map[string]bool
	always      []*sigDef
}

// sigDef is one compiled signature, or one of the catalogue's causes
// (Re nil: the catalogue finds its lines).
type sigDef struct {
	ID, Role, GuideID string
	Fields            []string
	Re                *regexp.Regexp
	Lits              []string
	Prec              int
	tag               int
	// waiter: a rank that waited for another reports it (a timeout).
	waiter bool
	// cause is the catalogue's description (catalogue causes only).
	cause *catalog.Cause
}

// idTransport is the signature whose pattern is the transport line of
// NCCL_DEBUG=INFO (reference §5). It fires on every channel line, so the
// explainer parses those lines by hand (parseChannel, tested to agree with
// the pattern) instead of running the regexp.
const idTransport = "p2p-hang-acs-iommu"

// Analyze reads the inputs (several inputs = several ranks or nodes of one
// job) and explains them. The error is non-nil only when an input cannot be
// opened or the library cannot be loaded; read errors part-way through an
// input become report warnings.
func Analyze(ctx context.Context, inputs []Input, opts Options) (*Report, error) {
	e, err := New(opts)
	if err != nil {
		return nil, err
	}
	return e.Analyze(ctx, inputs)
}

// New compiles the signatures of opts.Library (or the embedded library).
func New(opts Options) (*Explainer, error) {
	lib := opts.Library
	if lib == nil {
		l, err := guides.Load()
		if err != nil {
			return nil, fmt.Errorf("load guides: %w", err)
		}
		lib = l
	}
	if opts.MaxEvidence <= 0 {
		opts.MaxEvidence = 5
	}
	cat := opts.Catalog
	if cat == nil {
		c, err := catalog.Load()
		if err != nil {
			return nil, fmt.Errorf("load the message catalogue: %w", err)
		}
		cat = c
	}
	e := &Explainer{lib: lib, cat: cat, opts: opts, byID: map[string]*sigDef{}}
	for _, s := range lib.Signatures() {
		re := s.Re
		if re == nil {
			r, err := regexp.Compile(s.Pattern)
			if err != nil {
				return nil, fmt.Errorf("signature %s: %w", s.ID, err)
			}
			re = r
		}
		e.add(&sigDef{ID: s.ID, Role: s.Role, GuideID: s.GuideID, Fields: s.Fields, Re: re})
	}
	e.transportSig = e.byID[idTransport]
	// The catalogue's causes no guide signature declares: the catalogue
	// finds their lines, the decider weighs them like signatures.
	var ids []string
	for id := range cat.Causes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		cs := cat.Causes[id]
		if e.byID[id] != nil {
			continue
		}
		role := cs.Role
		switch role {
		case catalog.RoleWaiter:
			role = RoleCause
		case RoleCause, RoleWrapper, RoleConsequence, RoleContext:
		default:
			role = RoleCause
		}
		e.add(&sigDef{ID: id, Role: role, GuideID: cs.Guide, waiter: cs.Role == catalog.RoleWaiter, cause: cs})
	}
	for _, s := range e.sigs {
		s.waiter = s.waiter || waiters[s.ID]
	}
	e.overridable = map[string]bool{}
	for _, r := range cat.Rules {
		if r.Overrides != "" {
			e.overridable[r.Overrides] = true
		}
	}

	var lits []string
	var tags []int
	tag := 0
	for _, s := range e.sigs {
		s.tag = tag
		tag++
		if s == e.transportSig || s.Re == nil {
			continue // parsed by hand from the channel trigger, or found by the catalogue
		}
		l, ok := linetext.RequiredLiterals(s.Re.String())
		if ok && linetext.MinLen(l) < linetext.MinLiteral {
			ok = false // too short to anchor the prefilter
		}
		if !ok {
			// No literal is required: the signature must run on every
			// line (slow; tests keep the real library free of these).
			e.always = append(e.always, s)
			continue
		}
		s.Lits = linetext.TrimContained(l)
		for _, x := range s.Lits {
			lits = append(lits, x)
			tags = append(tags, s.tag)
		}
	}
	addAux := func(ls ...string) int {
		t := tag
		tag++
		for _, l := range ls {
			lits = append(lits, strings.ToLower(l))
			tags = append(tags, t)
		}
		return t
	}
	// Transport lines ("0[0] -> 1[1]") and NCCL backtraces
	// ("shm.cc:114 -> 2") both carry " -> " and a digit: the scanner's
	// arrow trigger, not literals.
	e.tagChannel = addAux()
	for k, ls := range infoLiterals {
		e.tagInfo[k] = addAux(ls...)
	}
	e.tagLastError = addAux("last error:")
	e.tagWarn = addAux("nccl warn", " warn ") // NCCL 2.0-2.2 printed "file:line WARN" without NCCL
	e.tagError = addAux(errorLiterals...)
	e.tagFrame = addAux(`file "`)
	var bl []string
	for _, b := range benign {
		l, ok := linetext.RequiredLiterals(b.Re.String())
		if !ok {
			panic("explain: benign pattern without a literal: " + b.Name)
		}
		bl = append(bl, l...)
	}
	e.tagBenign = addAux(bl...)
	e.tagRoot = addAux("root cause (first observed failure)", "failures:")
	// The first bytes of the catalogue's anchors (the prefilter is a
	// 4-byte gram scanner; the catalogue confirms).
	e.tagCatalog = addAux(cat.Anchors()...)
	e.ac = linetext.NewGramScanner(lits, tags, tag)
	e.ac.ArrowTag = e.tagChannel
	e.words = e.ac.Words()
	e.channelOnly = make([]uint64, e.words)
	linetext.SetAdd(e.channelOnly, e.tagChannel)
	return e, nil
}

func (e *Explainer) add(s *sigDef) {
	s.Prec = slices.Index(precedence, s.ID)
	if s.Prec < 0 {
		s.Prec = len(precedence)
	}
	e.sigs = append(e.sigs, s)
	e.byID[s.ID] = s
}

// isWaiter tells a diagnosis id that a waiting rank reports.
func (e *Explainer) isWaiter(id string) bool {
	if d := e.byID[id]; d != nil {
		return d.waiter
	}
	return waiters[id]
}

// Library returns the guides library the explainer routes to.
func (e *Explainer) Library() *guides.Library { return e.lib }

// Analyze explains the inputs; see the package-level Analyze.
func (e *Explainer) Analyze(ctx context.Context, inputs []Input) (*Report, error) {
	s := e.newScan()
	if err := s.analyze(ctx, inputs); err != nil {
		return nil, err
	}
	return s.report(), nil
}

// pendingLastError waits for the payload of a "Last error:" line printed
// on its own (PyTorch puts the WARN text on the next line).
type pendingLastError struct {
	launcher string
	ttl      int
}

// fileState is per-input scanning state.
type fileState struct {
	idx       int
	name      string
	fileRank  int
	pendingLE *pendingLastError
	// lastWrapper is the wrapper signature most recently seen, to which an
	// unmatched Last error payload belongs.
	lastWrapper *sigAgg
	lastFrame   string
	lastFrameN  int64
	rootLeft    int
	// entries are this input's failure-summary entries; entry is the one
	// being read, tableRoot whether it is under "Root Cause".
	entries []TorchrunFailure
	entry   *TorchrunFailure
	// traceLeft bounds the lines of an entry's @record traceback.
	traceLeft int
	tableRoot bool
	// spawnRank is the process mp.spawn named ("-- Process N terminated
	// with the following error:") for the next spawnLeft lines.
	spawnRank, spawnLeft int
	join                 *heldLine // a line that may continue on the next (join.go)
	// wrapWidth is the width the current chunk's lines were cut at (0:
	// none).
	wrapWidth int
	joinBuf   []byte
	tail      tailKeeper // the last lines, for how the input ends (hang_tail.go)
}

var reFileRank = regexp.MustCompile(`(?i)(?:^|[^a-z])rank[_\-.]?(\d{1,5})(?:[^0-9]|$)`)

// Patterns returns the regexp of every signature the explainer matches,
// in matching order (the benchmark gives the same list to grep).
func (e *Explainer) Patterns() []string {
	out := make([]string, 0, len(e.sigs))
	for _, s := range e.sigs {
		if s.Re != nil {
			out = append(out, s.Re.String())
		}
	}
	return out
}
