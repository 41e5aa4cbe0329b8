// Package catalog is the explainer's message catalogue as data: every
// warning and error format string NCCL prints (derived from its sources for
// every release 2.4-2.30, nccl.tsv), the messages of PyTorch's c10d, gloo,
// torchelastic, Open MPI, Slurm and the frameworks that wrap NCCL errors
// (catalog.yaml), what each one means (a cause, or deliberately the part of
// NCCL it comes from), CUDA's error codes, and a matcher that finds the
// message a log line prints even when its prefix, fields or tail are
// missing. It imports no other ncclwiz package.
//
// Adding a message or a cause touches catalog.yaml only; the tests fail on
// a message without a diagnosis, and docs/explain-catalog.md is generated
// from the catalogue (go test ./explain/catalog -run TestDocTable -update).
package catalog

import (
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

//go:embed catalog.yaml
var catalogYAML []byte

//go:embed nccl.tsv
var ncclTSV string

// Roles of a cause or message.
const (
	RoleCause       = "cause"       // names the failure
	RoleWaiter      = "waiter"      // a rank that waited for another: the failure is elsewhere
	RoleWrapper     = "wrapper"     // a generic error around another message (its payload)
	RoleConsequence = "consequence" // follows another failure
	RoleContext     = "context"     // informs; never a failure on its own
	RoleBenign      = "benign"      // printed by healthy jobs too
	RoleSignal      = "signal"      // a process death (fields: rank, signal or exit code)
	RoleInit        = "init"        // a framework starting its process group: a log that stops after it hangs in init
	RoleRetry       = "retry"       // a retry warning: its cause only when it repeats (RetryCount times)
)

// RetryCount is how often a retry warning must repeat to name its cause.
const RetryCount = 3

// CauseBenign is the diagnosis of messages healthy jobs print.
const CauseBenign = "benign"

// Cause is a diagnosis the catalogue names that no guide signature
// declares.
type Cause struct {
	ID      string   `yaml:"id"`
	Title   string   `yaml:"title"`
	Guide   string   `yaml:"guide"`
	Role    string   `yaml:"role"`
	NotNCCL bool     `yaml:"not_nccl"`
	Summary string   `yaml:"summary"`
	Advice  []string `yaml:"advice"`
	// Replaces are diagnoses that read the same failure less well: found
	// together with this cause they are dropped (an attach error without
	// its errno reads as a vanished segment; with "Permission denied" in
	// the WARN before it, it is not).
	Replaces []string `yaml:"replaces"`
}

// Subsystem is the part of NCCL a source file belongs to.
type Subsystem struct {
	Prefix string   `yaml:"prefix"`
	Name   string   `yaml:"name"`
	Guide  string   `yaml:"guide"`
	Checks []string `yaml:"checks"`
	// API files check the caller's arguments: there a wrapper's generic
	// return code says as much as the warning.
	API bool `yaml:"api"`
}

// CudaError is one of CUDA's errors NCCL and PyTorch surface.
type CudaError struct {
	Code    int    `yaml:"code"`
	Name    string `yaml:"name"`
	Text    string `yaml:"text"`
	Meaning string `yaml:"meaning"`
	Guide   string `yaml:"guide"`
	// Cause is what the error names when it is the payload of a generic
	// wrapper; "" keeps the wrapper's diagnosis.
	Cause string `yaml:"cause"`
}

// Rule says what an NCCL message means.
type Rule struct {
	Format string `yaml:"format"` // text within the message's format
	File   string `yaml:"file"`   // prefix of one of its source files
	Value  string `yaml:"value"`  // text the printed message contains (refines by value)
	Cause  string `yaml:"cause"`
	// Overrides is a guide signature that matches the same line by its
	// wording but not by its value (an attach that failed with EACCES,
	// not ENOENT): the rule's cause replaces it.
	Overrides string `yaml:"overrides"`
}

// Message is one message of the catalogue.
type Message struct {
	// Source: nccl, pytorch, gloo, torchelastic, openmpi, slurm, vllm, ...
	Source string `yaml:"source"`
	// Kind of an NCCL row: warn (a WARN site) or errstr (ncclGetErrorString).
	Kind string `yaml:"-"`
	// Format is the printf format (the first of its alternatives).
	Format string `yaml:"format"`
	// File names the source file(s) that print it.
	File string `yaml:"file"`
	// Releases is the release range that prints it ("2.4.2-2.30.7").
	Releases string `yaml:"releases"`
	// Tags and Minors count the NCCL release tags and minors that print
	// it (NCCL rows).
	Tags, Minors int      `yaml:"-"`
	Fields       []string `yaml:"fields"`
	Role         string   `yaml:"role"`
	// Cause is the diagnosis ("" when Subsystem places it instead).
	Cause     string     `yaml:"cause"`
	Subsystem *Subsystem `yaml:"-"`

	formats []*format
	values  []*Rule // value rules that apply to this message, in order (c.Rules')
	payload int     // index of the payload field, -1 none
}

// Formats returns the message's formats (alternatives of other releases).
func (m *Message) Formats() []string {
	out := make([]string, 0, len(m.formats))
	for _, f := range m.formats {
		out = append(out, f.text)
	}
	return out
}

// IsNCCL tells a message of NCCL's own sources.
func (m *Message) IsNCCL() bool { return m.Source == "nccl" }

// Catalog is the loaded catalogue. It is immutable and safe for concurrent
// use.
type Catalog struct {
	Messages   []*Message
	Causes     map[string]*Cause
	Analyses   []string
	Subsystems []Subsystem
	Cuda       []CudaError
	Rules      []Rule

	idx index
}

type fileData struct {
	Causes     []Cause     `yaml:"causes"`
	Analyses   []string    `yaml:"analyses"`
	Subsystems []Subsystem `yaml:"subsystems"`
	Cuda       []CudaError `yaml:"cuda"`
	Rules      []Rule      `yaml:"rules"`
	Messages   []*Message  `yaml:"messages"`
}

// Load parses the embedded catalogue and resolves every message's
// diagnosis.
func Load() (*Catalog, error) { return Parse(catalogYAML, ncclTSV) }

// Parse builds a catalogue from its two files (tests use it on variants).
func Parse(yamlData []byte, tsv string) (*Catalog, error) {
	var fd fileData
	dec := yaml.NewDecoder(strings.NewReader(string(yamlData)))
	dec.KnownFields(true)
	if err := dec.Decode(&fd); err != nil {
		return nil, fmt.Errorf("catalog.yaml: %w", err)
	}
	c := &Catalog{Causes: map[string]*Cause{}, Analyses: fd.Analyses, Subsystems: fd.Subsystems, Cuda: fd.Cuda, Rules: fd.Rules}
	for i := range fd.Causes {
		cs := &fd.Causes[i]
		if _, dup := c.Causes[cs.ID]; dup {
			return nil, fmt.Errorf("catalog.yaml: cause %s declared twice", cs.ID)
		}
		c.Causes[cs.ID] = cs
	}
	nccl, err := parseTSV(tsv)
	if err != nil {
		return nil, err
	}
	for _, m := range nccl {
		c.resolve(m)
	}
	c.Messages = append(c.Messages, nccl...)
	for i, m := range fd.Messages {
		if m.Format == "" || m.Source == "" {
			return nil, fmt.Errorf("catalog.yaml: message %d has no format or source", i)
		}
		if err := m.compile(); err != nil {
			return nil, fmt.Errorf("catalog.yaml: %q: %w", m.Format, err)
		}
		if m.Role == "" {
			m.Role = c.roleOf(m.Cause)
		}
		c.Messages = append(c.Messages, m)
	}
	c.idx = buildIndex(c.Messages)
	return c, nil
}

// parseTSV reads nccl.tsv.
func parseTSV(tsv string) ([]*Message, error) {
	var out []*Message
	for n, line := range strings.Split(tsv, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 7 {
			return nil, fmt.Errorf("nccl.tsv:%d: %d columns, want 7", n+1, len(f))
		}
		m := &Message{Source: "nccl", Kind: f[0], Format: f[1], File: f[2], Releases: f[3] + "-" + f[4]}
		m.Tags, _ = strconv.Atoi(f[5])
		m.Minors, _ = strconv.Atoi(f[6])
		if m.Kind == "errstr" {
			// "ncclSystemError=unhandled system error": the text is what
			// a wrapper prints.
			if i := strings.IndexByte(m.Format, '='); i >= 0 {
				m.Fields = []string{m.Format[:i]}
			}
		}
		if err := m.compile(); err != nil {
			return nil, fmt.Errorf("nccl.tsv:%d: %w", n+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// files lists the message's source files.
func (m *Message) files() []string { return strings.Split(m.File, ",") }

// matchText is the text of an errstr row a log prints (after "Name=").
func (m *Message) matchText(f string) string {
	if m.Kind == "errstr" {
		if i := strings.IndexByte(f, '='); i >= 0 {
			return f[i+1:]
		}
	}
	return f
}

func (m *Message) compile() error {
	m.payload = -1
	for i, name := range m.Fields {
		if name == "payload" {
			m.payload = i
		}
	}
	alts := []string{m.Format}
	if m.Source != "nccl" {
		alts = strings.Split(m.Format, "|")
	}
	for _, a := range alts {
		f, err := compileFormat(m.matchText(a))
		if err != nil {
			return err
		}
		f.text, f.match = a, m.matchText(a)
		m.formats = append(m.formats, f)
	}
	return nil
}

// resolve names an NCCL message's diagnosis: the first format rule that
// fits it, else the subsystem of its first placed file. Value rules that
// fit its format and files are kept for Match.
func (c *Catalog) resolve(m *Message) {
	for i := range c.Rules {
		r := &c.Rules[i]
		if r.Format != "" && !strings.Contains(m.Format, r.Format) {
			continue
		}
		if r.Value != "" {
			// The file of a value rule may be the one the log prints (a
			// macro's call site), so it is checked at Match.
			m.values = append(m.values, r)
			continue
		}
		if !r.fitsFiles(m) {
			continue
		}
		if m.Cause == "" {
			m.Cause = r.Cause
		}
	}
	if m.Cause == "" {
		for _, f := range m.files() {
			if s, ok := c.SubsystemOf(f); ok {
				m.Subsystem = s
				break
			}
		}
	}
	m.Role = c.roleOf(m.Cause)
	if m.Cause == "" {
		m.Role = RoleCause
	}
}

func (r Rule) fitsFiles(m *Message) bool {
	if r.File == "" {
		return true
	}
	for _, f := range m.files() {
		if strings.HasPrefix(f, r.File) {
			return true
		}
	}
	return false
}

// roleOf is the role of a cause id as the catalogue knows it.
func (c *Catalog) roleOf(cause string) string {
	if cause == CauseBenign {
		return RoleBenign
	}
	if cs := c.Causes[cause]; cs != nil && cs.Role != "" {
		return cs.Role
	}
	return RoleCause
}

// SubsystemOf places an NCCL source file ("transport/net_ib.cc", with or
// without "src/").
func (c *Catalog) SubsystemOf(file string) (*Subsystem, bool) {
	file = trimSrc(file)
	if file == "" {
		return nil, false
	}
	for i := range c.Subsystems {
		if strings.HasPrefix(file, c.Subsystems[i].Prefix) {
			return &c.Subsystems[i], true
		}
	}
	return nil, false
}

// CudaByCode and CudaByText find a CUDA error.
func (c *Catalog) CudaByCode(code int) (CudaError, bool) {
	for _, e := range c.Cuda {
		if e.Code == code {
			return e, true
		}
	}
	return CudaError{}, false
}

// CudaByText finds the CUDA error whose text or enumerator name is text.
func (c *Catalog) CudaByText(text string) (CudaError, bool) {
	for _, e := range c.Cuda {
		if e.Text == text || e.Name == text {
			return e, true
		}
	}
	return CudaError{}, false
}

// CudaIn finds a CUDA error named anywhere in text by a distinctive text
// (20 characters or more) or its enumerator name.
func (c *Catalog) CudaIn(text string) (CudaError, bool) {
	for _, e := range c.Cuda {
		if len(e.Text) >= 20 && strings.Contains(text, e.Text) || strings.Contains(text, e.Name) {
			return e, true
		}
	}
	return CudaError{}, false
}

// Known tells whether the catalogue itself defines a diagnosis id (its
// causes and analyses; guide signatures are known to the explainer).
func (c *Catalog) Known(id string) bool {
	return id == CauseBenign || c.Causes[id] != nil || slices.Contains(c.Analyses, id)
}

// Query is a line to find in the catalogue.
type Query struct {
	// Text is the message, its launcher and NCCL prefixes removed.
	Text string
	// NCCL allows NCCL's own messages (a WARN line or a Last error
	// payload); other lines are matched against the other sources only,
	// so that a short NCCL format never claims an application's line.
	NCCL bool
	// File is the NCCL source file the line printed before "NCCL WARN"
	// (a macro's call site, which nccl.tsv cannot know).
	File string
}

// Hit is a message found in a log line.
type Hit struct {
	Message *Message
	// Cause is the diagnosis for this line (a value rule may refine the
	// message's); "" when Subsystem places it.
	Cause     string
	Subsystem *Subsystem
	Role      string
	// Fields are the named conversions the line filled (exact matches).
	Fields map[string]string
	// Exact: the whole format matched; otherwise enough of its literal
	// text was found (a cut, wrapped or abridged line).
	Exact bool
	// Payload is the text of a "payload" field: another message.
	Payload string
	// Overrides is the guide signature the hit's value rule replaces.
	Overrides string
}

// Match finds the catalogue message a line prints.
func (c *Catalog) Match(q Query) (Hit, bool) {
	text := q.Text
	best, bestScore := (*candidate)(nil), score{}
	c.idx.candidates(text, func(m *Message, f *format) {
		if m.IsNCCL() && !q.NCCL {
			return
		}
		sc, ok := f.score(text)
		if !ok {
			return
		}
		// Lines pasted together hold several messages: the one with a
		// cause of its own tells more than a launcher's or a wrapper's.
		sc.cause = m.Role == RoleCause && m.Cause != "" && f.total >= 16
		if best == nil || sc.better(bestScore) {
			best, bestScore = &candidate{m, f}, sc
		}
	})
	if best == nil {
		return Hit{}, false
	}
	m := best.m
	h := Hit{Message: m, Cause: m.Cause, Role: m.Role, Exact: bestScore.exact}
	if bestScore.exact {
		h.Fields = best.f.fields(text, m.Fields)
		if m.payload >= 0 {
			h.Payload = strings.TrimSpace(h.Fields["payload"])
		}
	} else {
		// A field elided ("(pid: ...)") still names the others.
		h.Fields = best.f.fields(text, m.Fields)
		if m.payload >= 0 {
			// A cut line: the payload is what follows the last literal seen.
			h.Payload = best.f.tailAfterLiterals(text)
		}
	}
	for _, r := range m.values {
		if strings.Contains(text, r.Value) && (r.fitsFiles(m) || q.File != "" && strings.HasPrefix(trimSrc(q.File), r.File)) {
			h.Cause = r.Cause
			h.Role = c.roleOf(r.Cause)
			h.Overrides = r.Overrides
			break
		}
	}
	if h.Cause == "" {
		if s, ok := c.SubsystemOf(q.File); ok && q.File != "" {
			h.Subsystem = s
		} else {
			h.Subsystem = m.Subsystem
		}
		h.Role = RoleCause
	}
	return h, true
}

func trimSrc(file string) string {
	if i := strings.Index(file, "src/"); i >= 0 && (i == 0 || file[i-1] == '/') {
		return file[i+len("src/"):]
	}
	return file
}

type candidate struct {
	m *Message
	f *format
}

// Anchors are the literal texts that can start a match of a non-NCCL
// message (the explainer's prefilter looks for them).
func (c *Catalog) Anchors() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range c.Messages {
		if m.IsNCCL() {
			continue
		}
		for _, f := range m.formats {
			if a := f.anchor; a != "" && !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	sort.Strings(out)
	return out
}

// format is one compiled printf format.
type format struct {
	text  string // as the catalogue writes it
	match string // the text a log prints (an error string without its name)
	// re is the regexp of the whole format, compiled on first use: most
	// of the thousand formats never meet a line that holds their anchor.
	once sync.Once
	re   *regexp.Regexp
	// tolRe is re where every field may also be elided ("...", "…"), as
	// a paste abridges a pid or a path.
	tolOnce sync.Once
	tolRe   *regexp.Regexp
	lits    []string // literal runs, in order
	anchor  string   // the longest literal run (the index key)
	total   int      // total literal length
}

// minAnchor is the shortest literal run that can anchor a message: shorter
// formats must match exactly.
const minAnchor = 5

// compileFormat reads a printf format's literal runs; its regexps are
// built from the format on first use (few of the thousand formats ever
// meet a line holding their anchor, and the strings would stay on the
// heap the collector scans under the explainer's memory limit).
func compileFormat(f string) (*format, error) {
	fm, _, _ := parseFormat(f, false)
	return fm, nil
}

// parseFormat reads f's literal runs and, when regexps is set, writes the
// source of its exact and its elision-tolerant regexps.
func parseFormat(f string, regexps bool) (fm *format, src, tolSrc string) {
	var re, tol strings.Builder
	var lits []string
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			lits = append(lits, lit.String())
			if regexps {
				re.WriteString(regexp.QuoteMeta(lit.String()))
				tol.WriteString(regexp.QuoteMeta(lit.String()))
			}
			lit.Reset()
		}
	}
	conv := func(pat string) {
		if regexps {
			re.WriteString(pat)
			tol.WriteString(`(` + pat[1:len(pat)-1] + `|\.\.\.+|…)`)
		}
	}
	convs := 0
	for i := 0; i < len(f); i++ {
		ch := f[i]
		if ch != '%' {
			lit.WriteByte(ch)
			continue
		}
		if i+1 < len(f) && f[i+1] == '%' {
			lit.WriteByte('%')
			i++
			continue
		}
		// %[flags][width][.prec][length]verb
		j := i + 1
		for j < len(f) && strings.IndexByte("-+ #0*.123456789", f[j]) >= 0 {
			j++
		}
		for j < len(f) && strings.IndexByte("hlLqjzt", f[j]) >= 0 {
			j++
		}
		if j >= len(f) {
			lit.WriteString(f[i:])
			break
		}
		flush()
		convs++
		last := strings.Trim(f[j+1:], " .") == ""
		switch f[j] {
		case 'd', 'i', 'u':
			conv(`(-?\d+)`)
		case 'x', 'X':
			conv(`((?:0x)?[0-9a-fA-F]+)`)
		case 'p':
			conv(`((?:0x)?[0-9a-fA-F]+|\(nil\))`)
		case 'f', 'g', 'e':
			conv(`([-+0-9.eE]+|nan|inf)`)
		case 'c':
			conv(`(.)`)
		case 'm':
			conv(`(.*?)`)
		default: // s and anything else
			if last {
				conv(`(.*)`)
			} else {
				conv(`(.*?)`)
			}
		}
		i = j
	}
	flush()
	fm = &format{text: f, match: f, lits: lits}
	for _, l := range lits {
		fm.total += len(strings.TrimSpace(l))
		if t := strings.TrimSpace(l); len(t) > len(fm.anchor) {
			fm.anchor = t
		}
	}
	if len(fm.anchor) < minAnchor {
		fm.anchor = ""
	}
	return fm, re.String(), tol.String()
}

// score is how well a format fits a line.
type score struct {
	exact   bool
	cause   bool // the message's role is a cause
	covered int  // literal characters found
	total   int
}

func (a score) better(b score) bool {
	if a.exact != b.exact {
		return a.exact
	}
	if a.cause != b.cause {
		return a.cause
	}
	if a.covered != b.covered {
		return a.covered > b.covered
	}
	return a.total < b.total
}

// score matches f against text: exactly, or by its literal runs when the
// line was cut, wrapped or abridged ("..." for a field): the anchor must be
// there and most of the literal text (or an anchor long enough to be
// unambiguous on its own).
func (f *format) score(text string) (score, bool) {
	sc := score{total: f.total}
	if re := f.regexp(); re != nil && re.MatchString(text) {
		sc.exact, sc.covered = true, f.total
		return sc, true
	}
	if f.anchor == "" || !strings.Contains(text, f.anchor) {
		return sc, false
	}
	if (strings.Contains(text, "...") || strings.Contains(text, "…")) && f.tolerant() != nil && f.tolerant().MatchString(text) {
		sc.covered = f.total // every literal there, a field elided
		return sc, true
	}
	for _, l := range f.lits {
		if t := strings.TrimSpace(l); t != "" && strings.Contains(text, t) {
			sc.covered += len(t)
		}
	}
	// A short anchor alone is too common a word ("connect", "failed"):
	// it needs most of the format's text around it.
	if len(f.anchor) >= 16 || len(f.anchor) >= 8 && sc.covered*10 >= f.total*6 {
		return sc, true
	}
	return sc, false
}

// regexp compiles the format's regexp once; nil if it cannot (the format
// then matches by its literal text only).
func (f *format) regexp() *regexp.Regexp {
	f.once.Do(func() {
		_, src, _ := parseFormat(f.match, true)
		f.re, _ = regexp.Compile(src)
	})
	return f.re
}

// tolerant compiles the elision-tolerant regexp once.
func (f *format) tolerant() *regexp.Regexp {
	f.tolOnce.Do(func() {
		_, _, tol := parseFormat(f.match, true)
		f.tolRe, _ = regexp.Compile(tol)
	})
	return f.tolRe
}

// fields names the conversions of an exact match, or of one with fields
// elided (an elided field is left out).
func (f *format) fields(text string, names []string) map[string]string {
	re := f.regexp()
	if re == nil {
		return nil
	}
	sm := re.FindStringSubmatch(text)
	if sm == nil {
		if t := f.tolerant(); t != nil {
			sm = t.FindStringSubmatch(text)
		}
	}
	if sm == nil {
		return nil
	}
	out := map[string]string{}
	for i, v := range sm[1:] {
		if v == "..." || v == "…" || strings.HasPrefix(v, "...") && strings.Trim(v, ".") == "" {
			continue
		}
		if i < len(names) && names[i] != "" {
			if _, ok := out[names[i]]; !ok {
				out[names[i]] = v
			}
		}
	}
	return out
}

// tailAfterLiterals is the text after the last literal run of f found in
// text (the payload of a cut wrapper line).
func (f *format) tailAfterLiterals(text string) string {
	end := -1
	for _, l := range f.lits {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		if i := strings.LastIndex(text, t); i >= 0 && i+len(t) > end {
			end = i + len(t)
		}
	}
	if end < 0 {
		return ""
	}
	return strings.Trim(strings.TrimSpace(text[end:]), "'\"")
}

// index finds candidate formats for a line by the first bytes of their
// anchors.
type index struct {
	byKey map[string][]candidate
	keyN  int
	weak  []candidate // formats with no anchor: tried on every line
}

func buildIndex(ms []*Message) index {
	ix := index{byKey: map[string][]candidate{}, keyN: minAnchor}
	for _, m := range ms {
		for _, f := range m.formats {
			if f.anchor == "" {
				ix.weak = append(ix.weak, candidate{m, f})
				continue
			}
			k := f.anchor[:ix.keyN]
			ix.byKey[k] = append(ix.byKey[k], candidate{m, f})
		}
	}
	return ix
}

// candidates calls fn for every format whose anchor key occurs in text
// (once each) and for the weak formats.
func (ix *index) candidates(text string, fn func(*Message, *format)) {
	var seen map[*format]bool
	for i := 0; i+ix.keyN <= len(text); i++ {
		cs, ok := ix.byKey[text[i:i+ix.keyN]]
		if !ok {
			continue
		}
		for _, c := range cs {
			if seen == nil {
				seen = map[*format]bool{}
			}
			if !seen[c.f] {
				seen[c.f] = true
				fn(c.m, c.f)
			}
		}
	}
	for _, c := range ix.weak {
		fn(c.m, c.f)
	}
}
