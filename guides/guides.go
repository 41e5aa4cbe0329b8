// Package guides is ncclwiz's offline library: markdown guides embedded in
// the binary, each with front matter naming the failure signatures it
// explains (used by the log explainer), the checks that confirm it, the
// fixes that answer it and the sources it is written from. It imports no
// other ncclwiz package.
package guides

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

//go:embed content
var content embed.FS

// Roles of a signature.
const (
	RoleCause       = "cause"       // names a root cause
	RoleWrapper     = "wrapper"     // a generic error whose cause is another line
	RoleConsequence = "consequence" // follows another failure
	RoleContext     = "context"     // informs; never a failure on its own
)

// Signature is one log pattern a guide explains.
type Signature struct {
	ID      string   `yaml:"id"`
	Pattern string   `yaml:"pattern"`
	Role    string   `yaml:"role"`
	Fields  []string `yaml:"fields"`
	// Re is the compiled pattern.
	Re *regexp.Regexp `yaml:"-"`
}

// Guide is one parsed guide.
type Guide struct {
	ID         string      `yaml:"id"`
	Title      string      `yaml:"title"`
	Summary    string      `yaml:"summary"`
	Lang       string      `yaml:"lang"`
	Tags       []string    `yaml:"tags"`
	Order      int         `yaml:"order"`
	Signatures []Signature `yaml:"signatures"`
	Checks     []string    `yaml:"checks"`
	Fixes      []string    `yaml:"fixes"`
	Related    []string    `yaml:"related"`
	Sources    []string    `yaml:"sources"`
	// Body is the markdown after the front matter.
	Body string `yaml:"-"`
	// File is the embedded path, for error messages.
	File string `yaml:"-"`

	// lower-cased text for Search, built once at load.
	idx searchIndex
}

type searchIndex struct{ title, summary, tags, body, sigs string }

// SignatureRef is a signature with the guide that declares it.
type SignatureRef struct {
	Signature
	GuideID string
}

// Library is the parsed set of guides. It is immutable after Load and safe
// for concurrent use.
type Library struct {
	byLang map[string]map[string]*Guide
	sigs   []SignatureRef
}

// Languages with guides; English is the fallback for every guide.
const (
	English = "en"
	Chinese = "zh"
)

// Languages lists the supported language codes.
var Languages = []string{English, Chinese}

// NormalizeLang maps a language tag or locale ("zh", "zh-CN",
// "zh_CN.UTF-8", "en_US") to a supported code, or "" when unsupported.
func NormalizeLang(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.IndexAny(s, "_-.@"); i >= 0 {
		s = s[:i]
	}
	for _, l := range Languages {
		if s == l {
			return l
		}
	}
	return ""
}

var idRe = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Load parses every embedded guide. Errors name the file.
func Load() (*Library, error) { return LoadFS(content, "content") }

// LoadFS parses guides from root/<lang>/<id>.md in fsys (tests use it with
// synthetic trees).
func LoadFS(fsys fs.FS, root string) (*Library, error) {
	l := &Library{byLang: map[string]map[string]*Guide{}}
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return fmt.Errorf("guide %s: %w", p, err)
		}
		g, err := Parse(b)
		if err != nil {
			return fmt.Errorf("guide %s: %w", p, err)
		}
		g.File = p
		dirLang := path.Base(path.Dir(p))
		if NormalizeLang(dirLang) != dirLang {
			return fmt.Errorf("guide %s: directory %s/ is not a supported language (%s)", p, dirLang, strings.Join(Languages, ", "))
		}
		if g.Lang == "" {
			g.Lang = dirLang
		}
		if g.Lang != dirLang {
			return fmt.Errorf("guide %s: lang %q but lives in %s/", p, g.Lang, dirLang)
		}
		if want := strings.TrimSuffix(path.Base(p), ".md"); g.ID != want {
			return fmt.Errorf("guide %s: id %q does not match the file name", p, g.ID)
		}
		if l.byLang[g.Lang] == nil {
			l.byLang[g.Lang] = map[string]*Guide{}
		}
		l.byLang[g.Lang][g.ID] = g
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := l.linkTranslations(); err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for _, g := range l.List(English) {
		for _, s := range g.Signatures {
			if other, dup := seen[s.ID]; dup {
				return nil, fmt.Errorf("guide %s: signature %s is already declared by %s", g.File, s.ID, other)
			}
			seen[s.ID] = g.File
			l.sigs = append(l.sigs, SignatureRef{Signature: s, GuideID: g.ID})
		}
	}
	sort.Slice(l.sigs, func(i, j int) bool { return l.sigs[i].ID < l.sigs[j].ID })
	for _, m := range l.byLang {
		for _, g := range m {
			g.buildIndex()
		}
	}
	return l, nil
}

// linkTranslations checks that every translation has an English original
// and fills the fields a translation may leave out (signatures, checks,
// fixes, related, tags, order) from it, so metadata is written once.
func (l *Library) linkTranslations() error {
	for lang, m := range l.byLang {
		if lang == English {
			continue
		}
		for id, g := range m {
			en, ok := l.byLang[English][id]
			if !ok {
				return fmt.Errorf("guide %s: translation of %q, which has no English original (content/en/%s.md)", g.File, id, id)
			}
			if len(g.Signatures) > 0 {
				return fmt.Errorf("guide %s: translations inherit signatures from %s; remove them", g.File, en.File)
			}
			g.Signatures = en.Signatures
			if g.Order == 0 {
				g.Order = en.Order
			}
			if g.Order != en.Order {
				return fmt.Errorf("guide %s: order %d differs from %s (%d)", g.File, g.Order, en.File, en.Order)
			}
			for _, f := range []struct {
				dst *[]string
				src []string
			}{{&g.Tags, en.Tags}, {&g.Checks, en.Checks}, {&g.Fixes, en.Fixes}, {&g.Related, en.Related}} {
				if len(*f.dst) == 0 {
					*f.dst = f.src
				}
			}
			if !sameSet(g.Checks, en.Checks) || !sameSet(g.Fixes, en.Fixes) || !sameSet(g.Related, en.Related) {
				return fmt.Errorf("guide %s: checks, fixes and related must match %s (or be left out)", g.File, en.File)
			}
		}
	}
	return nil
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// Parse reads one guide: YAML front matter between --- lines, then markdown.
func Parse(b []byte) (*Guide, error) {
	b = bytes.TrimPrefix(b, []byte("\ufeff"))
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	if !bytes.HasPrefix(b, []byte("---\n")) {
		return nil, fmt.Errorf("no front matter (the file must start with ---)")
	}
	rest := b[4:]
	var fm, body []byte
	switch {
	case bytes.HasPrefix(rest, []byte("---\n")):
		fm, body = nil, rest[4:]
	default:
		end := bytes.Index(rest, []byte("\n---\n"))
		if end < 0 {
			if bytes.HasSuffix(rest, []byte("\n---")) {
				return nil, fmt.Errorf("the guide has no body")
			}
			return nil, fmt.Errorf("front matter is not closed by ---")
		}
		fm, body = rest[:end], rest[end+5:]
	}
	var g Guide
	dec := yaml.NewDecoder(bytes.NewReader(fm))
	dec.KnownFields(true)
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("front matter: %w", err)
	}
	g.Body = strings.TrimLeft(string(body), "\n")
	switch {
	case !idRe.MatchString(g.ID):
		return nil, fmt.Errorf("id %q must be kebab-case", g.ID)
	case strings.TrimSpace(g.Title) == "":
		return nil, fmt.Errorf("%s: title is required", g.ID)
	case strings.TrimSpace(g.Summary) == "":
		return nil, fmt.Errorf("%s: summary is required", g.ID)
	case len(g.Sources) == 0:
		return nil, fmt.Errorf("%s: sources are required", g.ID)
	case strings.TrimSpace(g.Body) == "":
		return nil, fmt.Errorf("%s: the guide has no body", g.ID)
	case g.Order < 0:
		return nil, fmt.Errorf("%s: order must be 0 (not in the Learn track) or positive", g.ID)
	}
	for i := range g.Signatures {
		s := &g.Signatures[i]
		if !idRe.MatchString(s.ID) {
			return nil, fmt.Errorf("%s: signature id %q must be kebab-case", g.ID, s.ID)
		}
		switch s.Role {
		case RoleCause, RoleWrapper, RoleConsequence, RoleContext:
		default:
			return nil, fmt.Errorf("%s: signature %s: role %q (want cause, wrapper, consequence or context)", g.ID, s.ID, s.Role)
		}
		if strings.TrimSpace(s.Pattern) == "" {
			return nil, fmt.Errorf("%s: signature %s: empty pattern", g.ID, s.ID)
		}
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%s: signature %s: %w", g.ID, s.ID, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("%s: signature %s matches the empty line", g.ID, s.ID)
		}
		if n := re.NumSubexp(); len(s.Fields) > n {
			return nil, fmt.Errorf("%s: signature %s names %d fields but the pattern has %d groups", g.ID, s.ID, len(s.Fields), n)
		}
		s.Re = re
	}
	return &g, nil
}

func (g *Guide) buildIndex() {
	var sigs []string
	for _, s := range g.Signatures {
		sigs = append(sigs, s.ID)
	}
	g.idx = searchIndex{
		title:   strings.ToLower(g.Title),
		summary: strings.ToLower(g.Summary),
		tags:    strings.ToLower(strings.Join(g.Tags, " ")),
		body:    strings.ToLower(g.Body),
		sigs:    strings.ToLower(strings.Join(sigs, " ")),
	}
}

// Get returns a guide in lang, falling back to English (lang may be a
// locale such as "zh_CN.UTF-8").
func (l *Library) Get(id, lang string) (*Guide, bool) {
	if g, ok := l.byLang[NormalizeLang(lang)][id]; ok {
		return g, true
	}
	g, ok := l.byLang[English][id]
	return g, ok
}

// List returns every guide in lang (English where no translation), by id.
func (l *Library) List(lang string) []*Guide {
	out := make([]*Guide, 0, len(l.byLang[English]))
	for id := range l.byLang[English] {
		g, _ := l.Get(id, lang)
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// IDs returns every guide id, sorted.
func (l *Library) IDs() []string {
	out := make([]string, 0, len(l.byLang[English]))
	for id := range l.byLang[English] {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Learn returns the onboarding track in order.
func (l *Library) Learn(lang string) []*Guide {
	var out []*Guide
	for _, g := range l.List(lang) {
		if g.Order > 0 {
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out
}

// LearnNeighbours returns the guides before and after id in the Learn
// track (nil at either end, or both when id is not in the track).
func (l *Library) LearnNeighbours(id, lang string) (prev, next *Guide) {
	track := l.Learn(lang)
	for i, g := range track {
		if g.ID != id {
			continue
		}
		if i > 0 {
			prev = track[i-1]
		}
		if i+1 < len(track) {
			next = track[i+1]
		}
	}
	return prev, next
}

// ByTag returns the guides carrying tag.
func (l *Library) ByTag(tag, lang string) []*Guide {
	var out []*Guide
	for _, g := range l.List(lang) {
		if slices.Contains(g.Tags, tag) {
			out = append(out, g)
		}
	}
	return out
}

// BySignature returns the guide declaring a signature id.
func (l *Library) BySignature(sigID, lang string) (*Guide, bool) {
	i, ok := slices.BinarySearchFunc(l.sigs, sigID, func(s SignatureRef, id string) int { return strings.Compare(s.ID, id) })
	if !ok {
		return nil, false
	}
	return l.Get(l.sigs[i].GuideID, lang)
}

// Signatures returns every failure signature, compiled, sorted by id.
func (l *Library) Signatures() []SignatureRef { return slices.Clone(l.sigs) }

// Translated reports whether a guide exists in lang itself.
func (l *Library) Translated(id, lang string) bool {
	_, ok := l.byLang[NormalizeLang(lang)][id]
	return ok
}

// Search ranks guides by how well they match every word of query: title
// hits count most, then ids, tags, signature ids, summary and body. Words
// are matched as substrings, so "shm" finds "/dev/shm" and Chinese text
// without spaces still matches.
func (l *Library) Search(query, lang string) []*Guide {
	words := tokenize(query)
	if len(words) == 0 {
		return nil
	}
	type hit struct {
		g     *Guide
		score int
	}
	phrase := strings.Join(words, " ")
	var hits []hit
	for _, g := range l.List(lang) {
		score := 0
		all := true
		for _, w := range words {
			s := 10*b2i(strings.Contains(g.idx.title, w)) +
				8*b2i(strings.Contains(g.ID, w)) +
				6*b2i(strings.Contains(g.idx.tags, w)) +
				5*b2i(strings.Contains(g.idx.sigs, w)) +
				4*b2i(strings.Contains(g.idx.summary, w)) +
				min(strings.Count(g.idx.body, w), 10)
			if s == 0 {
				all = false
				break
			}
			score += s
		}
		if !all {
			continue
		}
		// The reader typed the guide's name, or its title's words in order.
		if g.ID == strings.Join(words, "-") {
			score += 40
		}
		if len(words) > 1 && strings.Contains(g.idx.title, phrase) {
			score += 20
		}
		hits = append(hits, hit{g, score})
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].g.ID < hits[j].g.ID
	})
	out := make([]*Guide, len(hits))
	for i, h := range hits {
		out[i] = h.g
	}
	return out
}

// Suggest returns up to n guide ids that look like what a mistyped id or a
// few words meant: ids sharing a prefix or within a small edit distance
// first, then full-text hits.
func (l *Library) Suggest(query string, n int) []string {
	q := strings.ToLower(strings.TrimSpace(query))
	var out []string
	add := func(id string) {
		if len(out) < n && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	type cand struct {
		id string
		d  int
	}
	var cs []cand
	for _, id := range l.IDs() {
		d := editDistance(q, id)
		if strings.HasPrefix(id, q) || strings.HasPrefix(q, id) {
			d = min(d, 1)
		}
		if d <= max(2, len(q)/3) {
			cs = append(cs, cand{id, d})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	for _, c := range cs {
		add(c.id)
	}
	for _, g := range l.Search(strings.NewReplacer("-", " ", "_", " ").Replace(q), English) {
		add(g.ID)
	}
	return out
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			c := 1
			if ra[i-1] == rb[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func tokenize(q string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '/' || r == '.')
	}) {
		f = strings.Trim(f, "-./")
		if f == "" {
			continue
		}
		if len(f) > 1 || unicode.Is(unicode.Han, []rune(f)[0]) {
			out = append(out, f)
		}
	}
	return out
}

// Links returns the targets of guide: links in a body, e.g.
// [x](guide:shm-no-space), in order of appearance.
func Links(body string) []string {
	var out []string
	for _, m := range linkRe.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

var linkRe = regexp.MustCompile(`\]\(guide:([a-z0-9-]+)\)`)

// guideLinkFull matches a whole guide link with its text.
var guideLinkFull = regexp.MustCompile(`\[([^\]]+)\]\(guide:([a-z0-9-]+)\)`)

// ExpandLinks rewrites guide: links for a terminal reader: the link text
// stays and the target becomes the command that opens it, e.g.
// "[container /dev/shm](guide:container-shm)" → "container /dev/shm
// (`ncclwiz guides container-shm`)".
func ExpandLinks(body string) string {
	return guideLinkFull.ReplaceAllString(body, "$1 (`ncclwiz guides $2`)")
}

// Document returns the guide as one markdown document for reading: the
// title as a heading, the body with links expanded, and the sources. It is
// what `ncclwiz guides ID` prints to a pipe and what the renderer draws.
func (g *Guide) Document() string {
	var b strings.Builder
	b.WriteString("# " + g.Title + "\n\n")
	b.WriteString(strings.TrimSpace(ExpandLinks(g.Body)))
	b.WriteString("\n")
	if len(g.Sources) > 0 {
		head := "Sources"
		if g.Lang == Chinese {
			head = "资料来源"
		}
		b.WriteString("\n## " + head + "\n\n")
		for _, s := range g.Sources {
			b.WriteString("- " + s + "\n")
		}
	}
	return b.String()
}
