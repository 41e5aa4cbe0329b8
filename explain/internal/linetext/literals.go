package linetext

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxExactSet bounds the cross products built while extracting literals
// (e.g. "(?:Channel|Ring) " gives two strings; a long chain of
// alternations would explode).
const maxExactSet = 16

// RequiredLiterals returns strings of which at least one occurs, compared
// ASCII-case-insensitively, in every text the pattern matches. ok is false
// when no such set exists (the pattern must then run on every line). The
// strings are lower-cased ASCII.
func RequiredLiterals(pattern string) (lits []string, ok bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, false
	}
	return mustSet(re.Simplify(), true)
}

// caseLiteralGroups returns, for a pattern without case folding, several
// sets of case-kept strings such that every match contains a string of
// each set: the exact runs of a top-level concatenation (`NCCL INFO `, the
// alternatives of `\.(?:cc|h)`, ` -> `), longest first, at most max. Requiring
// all of them rejects more lines than RequiredLiterals' one set.
func caseLiteralGroups(pattern string, max int) [][]string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil || folds(re) {
		return nil
	}
	re = re.Simplify()
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	if re.Op != syntax.OpConcat {
		if set, ok := mustSet(re, false); ok {
			return [][]string{TrimContained(set)}
		}
		return nil
	}
	var groups [][]string
	add := func(set []string) {
		if len(set) > 0 && MinLen(set) > 0 {
			groups = append(groups, TrimContained(set))
		}
	}
	var run []string
	for _, sub := range re.Sub {
		if ex, ok := exactSet(sub, false); ok {
			if run == nil {
				run = ex
			} else if next, ok := cross(run, ex); ok {
				run = next
			} else {
				add(run)
				run = ex
			}
			continue
		}
		add(run)
		run = nil
		if set, ok := mustSet(sub, false); ok {
			add(set)
		}
	}
	add(run)
	slices.SortStableFunc(groups, func(a, b []string) int { return MinLen(b) - MinLen(a) })
	if len(groups) > max {
		groups = groups[:max]
	}
	return groups
}

func folds(re *syntax.Regexp) bool {
	if re.Flags&syntax.FoldCase != 0 && (re.Op == syntax.OpLiteral || re.Op == syntax.OpCharClass) {
		return true
	}
	for _, sub := range re.Sub {
		if folds(sub) {
			return true
		}
	}
	return false
}

// mustSet returns a set of non-empty strings one of which every match of re
// contains.
func mustSet(re *syntax.Regexp, lower bool) ([]string, bool) {
	if ex, ok := exactSet(re, lower); ok && MinLen(ex) > 0 {
		return ex, true
	}
	switch re.Op {
	case syntax.OpLiteral:
		// A case-insensitive literal with letters that fold outside ASCII:
		// the longest piece between them is still required.
		if p := longestFoldSafePiece(string(re.Rune)); p != "" {
			return []string{p}, true
		}
		return nil, false
	case syntax.OpCapture, syntax.OpPlus:
		return mustSet(re.Sub[0], lower)
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return mustSet(re.Sub[0], lower)
		}
		return nil, false
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			s, ok := mustSet(sub, lower)
			if !ok {
				return nil, false
			}
			all = append(all, s...)
		}
		return dedup(all), true
	case syntax.OpConcat:
		var best []string
		consider := func(s []string) {
			if len(s) == 0 || MinLen(s) == 0 {
				return
			}
			if best == nil || better(s, best) {
				best = s
			}
		}
		// Runs of exactly-known pieces are joined by cross product.
		var run []string
		flush := func() {
			if run != nil {
				consider(run)
			}
			run = nil
		}
		for _, sub := range re.Sub {
			ex, ok := exactSet(sub, lower)
			if ok {
				if run == nil {
					run = ex
					continue
				}
				if next, ok := cross(run, ex); ok {
					run = next
					continue
				}
				flush()
				run = ex
				continue
			}
			flush()
			if s, ok := mustSet(sub, lower); ok {
				consider(s)
			}
		}
		flush()
		return best, best != nil
	}
	return nil, false
}

// better prefers the set whose shortest string is longer, then the smaller
// set: fewer, longer literals mean fewer false candidates.
func better(a, b []string) bool {
	la, lb := MinLen(a), MinLen(b)
	if la != lb {
		return la > lb
	}
	return len(a) < len(b)
}

// exactSet returns every string re can match when that set is small and
// finite. Zero-width assertions match "". With lower, strings are
// lower-cased for ASCII-case-insensitive matching.
func exactSet(re *syntax.Regexp, lower bool) ([]string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpWordBoundary, syntax.OpNoWordBoundary,
		syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return []string{""}, true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			s, ok := foldSafe(string(re.Rune))
			return []string{s}, ok
		}
		return []string{lowerIf(lower, string(re.Rune))}, true
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi-lo > 3 {
				return nil, false
			}
			for r := lo; r <= hi; r++ {
				if r >= utf8.RuneSelf && re.Flags&syntax.FoldCase != 0 {
					return nil, false
				}
				out = append(out, lowerIf(lower, string(r)))
			}
		}
		// Case-insensitive classes already list their non-ASCII fold
		// partners (ſ, K), which were rejected above.
		out = dedup(out)
		if len(out) == 0 || len(out) > 4 {
			return nil, false
		}
		return out, true
	case syntax.OpCapture:
		return exactSet(re.Sub[0], lower)
	case syntax.OpQuest:
		s, ok := exactSet(re.Sub[0], lower)
		if !ok {
			return nil, false
		}
		return dedup(append(slices.Clone(s), "")), true
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			s, ok := exactSet(sub, lower)
			if !ok {
				return nil, false
			}
			all = append(all, s...)
		}
		all = dedup(all)
		return all, len(all) <= maxExactSet
	case syntax.OpConcat:
		out := []string{""}
		for _, sub := range re.Sub {
			s, ok := exactSet(sub, lower)
			if !ok {
				return nil, false
			}
			if out, ok = cross(out, s); !ok {
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

func cross(a, b []string) ([]string, bool) {
	if len(a)*len(b) > maxExactSet {
		return nil, false
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return dedup(out), true
}

// foldSafe lower-cases a case-insensitive literal. Go folds k and s with
// non-ASCII runes (K KELVIN SIGN, ſ LONG S) and any non-ASCII rune may have
// other forms, so such a literal cannot be matched byte-wise; it reports
// false then. Case-sensitive literals never need this.
func foldSafe(s string) (string, bool) {
	for _, r := range s {
		switch {
		case r >= utf8.RuneSelf:
			return "", false
		case r == 'k' || r == 'K' || r == 's' || r == 'S':
			return "", false
		}
	}
	return lowerASCII(s), true
}

// longestFoldSafePiece splits s at runes foldSafe rejects and returns the
// longest remaining piece, lower-cased.
func longestFoldSafePiece(s string) string {
	best, cur := "", ""
	for _, r := range s {
		if p, ok := foldSafe(string(r)); ok {
			cur += p
			if len(cur) > len(best) {
				best = cur
			}
			continue
		}
		cur = ""
	}
	return best
}

func lowerIf(lower bool, s string) string {
	if lower {
		return lowerASCII(s)
	}
	return s
}

func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// MinLen is the length of the shortest string of s (0 for none): explain
// rejects literal sets too short for the GramScanner with it.
func MinLen(s []string) int {
	m := -1
	for _, x := range s {
		if m < 0 || len(x) < m {
			m = len(x)
		}
	}
	if m < 0 {
		return 0
	}
	return m
}

func dedup(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// TrimContained removes strings that contain another string of the set:
// if "abc" must be found, "xabcx" adds nothing to the prefilter.
func TrimContained(s []string) []string {
	var out []string
	for i, x := range s {
		redundant := false
		for j, y := range s {
			if i != j && y != "" && strings.Contains(x, y) && (len(y) < len(x) || j < i) {
				redundant = true
				break
			}
		}
		if !redundant {
			out = append(out, x)
		}
	}
	return out
}
