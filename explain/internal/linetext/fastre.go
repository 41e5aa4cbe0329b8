package linetext

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"slices"
)

// FastRe is a regexp that rejects most lines before running: Go's regexp
// engines try every start position of a line without a literal prefix, so
// a pattern that fails on nearly every line it sees (the INFO digest's, the
// prefix parsers') costs far more than finding out cheaply that it cannot
// match. Two exact necessary conditions are checked first: the pattern's
// required literals occur in the text (bytes.Index, SIMD; up to three
// groups of alternatives, each of which must be present), and
// for a pattern anchored at ^, the first byte can start a match. Every
// other method is the embedded regexp's, unguarded.
type FastRe struct {
	*regexp.Regexp
	lits  [][]guardLit // every match holds one string of each group, rarest group first
	first *[256]bool   // bytes a match anchored at ^ can start with; nil: any
}

// guardLit is a required string and the index of its rarest byte, which
// IndexByte looks for (bytes.Index would look for the first byte, often a
// space).
type guardLit struct {
	s    []byte
	rare int
}

func newGuardLit(l string) guardLit {
	g := guardLit{s: []byte(l)}
	for i := range len(l) {
		if byteRarity(lowerByte(l[i])) > byteRarity(lowerByte(l[g.rare])) {
			g.rare = i
		}
	}
	return g
}

// in reports whether g occurs in b.
func (g guardLit) in(b []byte) bool {
	c, n := g.s[g.rare], len(g.s)
	for from := g.rare; from < len(b); {
		i := bytes.IndexByte(b[from:], c)
		if i < 0 {
			return false
		}
		at := from + i - g.rare
		if at+n <= len(b) && bytes.Equal(b[at:at+n], g.s) {
			return true
		}
		from += i + 1
	}
	return false
}

// rarity scores a group: its most common string's rarest five bytes.
func rarity(group []string) int {
	worst := 1 << 30
	for _, l := range group {
		score := 0
		if len(l) >= 5 {
			o := rarestWindow(lowerASCII(l))
			for j := o; j < o+5; j++ {
				score += byteRarity(lowerByte(l[j]))
			}
		} else {
			for j := range len(l) {
				score += byteRarity(lowerByte(l[j]))
			}
		}
		worst = min(worst, score)
	}
	return worst
}

// MustFastRe compiles pattern like regexp.MustCompile.
func MustFastRe(pattern string) *FastRe {
	f := &FastRe{Regexp: regexp.MustCompile(pattern)}
	groups := caseLiteralGroups(pattern, 3)
	slices.SortStableFunc(groups, func(a, b []string) int { return rarity(b) - rarity(a) })
	for _, g := range groups {
		var gl []guardLit
		for _, l := range g {
			gl = append(gl, newGuardLit(l))
		}
		f.lits = append(f.lits, gl)
	}
	if re, err := syntax.Parse(pattern, syntax.Perl); err == nil {
		if set, ok := anchoredFirst(re.Simplify()); ok {
			f.first = set
		}
	}
	return f
}

// may reports whether the pattern can match b; false is certain.
func (f *FastRe) may(b []byte) bool {
	if f.first != nil && (len(b) == 0 || !f.first[b[0]]) {
		return false // a match is at least one byte, starting at b[0]
	}
	for _, g := range f.lits {
		found := false
		for _, l := range g {
			if l.in(b) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// The methods explain calls run the guards first; see FastRe.

func (f *FastRe) Match(b []byte) bool { return f.may(b) && f.Regexp.Match(b) }

func (f *FastRe) FindSubmatch(b []byte) [][]byte {
	if !f.may(b) {
		return nil
	}
	return f.Regexp.FindSubmatch(b)
}

func (f *FastRe) FindSubmatchIndex(b []byte) []int {
	if !f.may(b) {
		return nil
	}
	return f.Regexp.FindSubmatchIndex(b)
}

func (f *FastRe) FindAllSubmatch(b []byte, n int) [][][]byte {
	if !f.may(b) {
		return nil
	}
	return f.Regexp.FindAllSubmatch(b, n)
}

func (f *FastRe) MatchString(s string) bool {
	if !f.may([]byte(s)) {
		return false
	}
	return f.Regexp.MatchString(s)
}

func (f *FastRe) FindStringSubmatch(s string) []string {
	if !f.may([]byte(s)) {
		return nil
	}
	return f.Regexp.FindStringSubmatch(s)
}

// anchoredFirst returns the bytes a match of re can begin with when every
// match starts at ^ (begin of text) and the set is known; ok is false
// otherwise (no guard).
func anchoredFirst(re *syntax.Regexp) (*[256]bool, bool) {
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText {
		return nil, false
	}
	var set [256]bool
	if !firstBytes(re.Sub[1:], &set) {
		return nil, false
	}
	return &set, true
}

// firstBytes adds to set the bytes a match of the sequence seq can start
// with; false when that is unknown or the sequence can match "" (then any
// byte, or the end of the text, may follow).
func firstBytes(seq []*syntax.Regexp, set *[256]bool) bool {
	for _, re := range seq {
		nonEmpty, ok := firstOf(re, set)
		if !ok {
			return false
		}
		if nonEmpty {
			return true
		}
	}
	return false
}

// firstOf adds the first bytes of re to set; nonEmpty says whether every
// match of re is at least one byte long.
func firstOf(re *syntax.Regexp, set *[256]bool) (nonEmpty, ok bool) {
	fold := re.Flags&syntax.FoldCase != 0
	switch re.Op {
	case syntax.OpLiteral:
		r := re.Rune[0]
		if r >= 0x80 || fold && (lowerByte(byte(r)) == 'k' || lowerByte(byte(r)) == 's') {
			return false, false // k and s fold to non-ASCII runes too
		}
		set[r] = true
		if fold {
			set[lowerByte(byte(r))] = true
			set[upperByte(byte(r))] = true
		}
		return true, true
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi >= 0x80 {
				return false, false // a UTF-8 lead byte set; not worth it
			}
			for r := lo; r <= hi; r++ {
				set[r] = true
			}
		}
		return true, true
	case syntax.OpCapture:
		return firstOf(re.Sub[0], set)
	case syntax.OpPlus:
		return firstOf(re.Sub[0], set)
	case syntax.OpRepeat:
		ne, ok := firstOf(re.Sub[0], set)
		return ne && re.Min >= 1, ok
	case syntax.OpQuest, syntax.OpStar:
		_, ok := firstOf(re.Sub[0], set)
		return false, ok
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			ne, ok := firstOf(sub, set)
			if !ok {
				return false, false
			}
			if ne {
				return true, true
			}
		}
		return false, true
	case syntax.OpAlternate:
		all := true
		for _, sub := range re.Sub {
			ne, ok := firstOf(sub, set)
			if !ok {
				return false, false
			}
			all = all && ne
		}
		return all, true
	case syntax.OpEmptyMatch:
		return false, true
	}
	return false, false
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func upperByte(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}
