package loggen

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"unicode"
)

// ERE rewrites a Go (RE2) pattern as a POSIX extended regular expression
// for GNU grep -E, so the benchmark can run grep on the very patterns the
// explainer uses. It works on the parsed syntax tree: (?i) becomes [xX]
// classes, \d \s \w and [^\r\n] become bracket expressions, non-capturing
// groups become groups and lazy quantifiers greedy (same matches per line).
func ERE(pattern string) (string, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := writeERE(&b, re.Simplify()); err != nil {
		return "", fmt.Errorf("%s: %w", pattern, err)
	}
	return b.String(), nil
}

const ereSpecial = `.[]()*+?{}|^$\`

func writeERE(b *strings.Builder, re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpNoMatch:
		b.WriteString("[^[:print:][:cntrl:][:space:]]{2}") // never matches ASCII text
	case syntax.OpEmptyMatch:
		b.WriteString("()")
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			writeRune(b, r, re.Flags&syntax.FoldCase != 0)
		}
	case syntax.OpCharClass:
		writeClass(b, re.Rune)
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteByte('.')
	case syntax.OpBeginLine, syntax.OpBeginText:
		b.WriteByte('^')
	case syntax.OpEndLine, syntax.OpEndText:
		b.WriteByte('$')
	case syntax.OpWordBoundary:
		b.WriteString(`\b`)
	case syntax.OpNoWordBoundary:
		b.WriteString(`\B`)
	case syntax.OpCapture:
		b.WriteByte('(')
		if err := writeERE(b, re.Sub[0]); err != nil {
			return err
		}
		b.WriteByte(')')
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		if err := writeAtom(b, re.Sub[0]); err != nil {
			return err
		}
		b.WriteByte(map[syntax.Op]byte{syntax.OpStar: '*', syntax.OpPlus: '+', syntax.OpQuest: '?'}[re.Op])
	case syntax.OpRepeat:
		if err := writeAtom(b, re.Sub[0]); err != nil {
			return err
		}
		if re.Max < 0 {
			fmt.Fprintf(b, "{%d,}", re.Min)
		} else {
			fmt.Fprintf(b, "{%d,%d}", re.Min, re.Max)
		}
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if s.Op == syntax.OpAlternate {
				if err := writeAtom(b, s); err != nil {
					return err
				}
				continue
			}
			if err := writeERE(b, s); err != nil {
				return err
			}
		}
	case syntax.OpAlternate:
		for i, s := range re.Sub {
			if i > 0 {
				b.WriteByte('|')
			}
			if err := writeERE(b, s); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unsupported operator %v", re.Op)
	}
	return nil
}

// writeAtom writes re so that a following quantifier applies to all of it.
func writeAtom(b *strings.Builder, re *syntax.Regexp) error {
	single := false
	switch re.Op {
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL, syntax.OpCapture:
		single = true
	case syntax.OpLiteral:
		single = len(re.Rune) == 1
	}
	if single {
		return writeERE(b, re)
	}
	b.WriteByte('(')
	if err := writeERE(b, re); err != nil {
		return err
	}
	b.WriteByte(')')
	return nil
}

func writeRune(b *strings.Builder, r rune, fold bool) {
	if fold && unicode.IsLetter(r) && r < 128 {
		lo, up := unicode.ToLower(r), unicode.ToUpper(r)
		if lo != up {
			fmt.Fprintf(b, "[%c%c]", up, lo)
			return
		}
	}
	if r < 128 && strings.ContainsRune(ereSpecial, r) {
		b.WriteByte('\\')
	}
	b.WriteRune(r)
}

// writeClass writes a bracket expression. Classes that cover most of
// Unicode ([^\r\n], \S) are written as the complement of their ASCII gaps;
// whitespace sets become [:space:] (control bytes cannot appear raw in a
// pattern file).
func writeClass(b *strings.Builder, ranges []rune) {
	if len(ranges) >= 2 && ranges[len(ranges)-1] == unicode.MaxRune {
		var gaps []rune
		if ranges[0] > 0 {
			gaps = append(gaps, 0, ranges[0]-1)
		}
		for i := 1; i+1 < len(ranges); i += 2 {
			gaps = append(gaps, ranges[i]+1, ranges[i+1]-1)
		}
		switch ws, sp := onlyWhitespace(gaps); {
		case ws && sp:
			b.WriteString("[^[:space:]]")
		case ws:
			b.WriteByte('.') // [^\r\n]: a line has no newline
		default:
			b.WriteString("[^")
			writeRanges(b, gaps)
			b.WriteByte(']')
		}
		return
	}
	if ws, sp := onlyWhitespace(ranges); ws && sp {
		b.WriteString("[[:space:]]")
		return
	}
	b.WriteByte('[')
	writeRanges(b, ranges)
	b.WriteByte(']')
}

// onlyWhitespace reports whether every rune of ranges is ASCII whitespace,
// and whether the space character is among them.
func onlyWhitespace(ranges []rune) (all, space bool) {
	all = len(ranges) > 0
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1]; r++ {
			switch {
			case r == ' ':
				space = true
			case r >= 9 && r <= 13:
			default:
				return false, space
			}
		}
	}
	return all, space
}

// writeRanges writes ranges inside brackets with ']' first, '-' last and
// '^' never first, as POSIX requires.
func writeRanges(b *strings.Builder, ranges []rune) {
	hasBracket, hasDash := false, false
	var segs [][2]rune
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], min(ranges[i+1], 127)
		if lo > 127 || lo > hi {
			continue
		}
		cur := lo
		for r := lo; r <= hi; r++ {
			if r == ']' || r == '-' {
				hasBracket = hasBracket || r == ']'
				hasDash = hasDash || r == '-'
				if cur < r {
					segs = append(segs, [2]rune{cur, r - 1})
				}
				cur = r + 1
			}
		}
		if cur <= hi {
			segs = append(segs, [2]rune{cur, hi})
		}
	}
	if !hasBracket && len(segs) > 0 && segs[0][0] == '^' {
		first := segs[0]
		segs = segs[1:]
		if first[1] > first[0] {
			segs = append(segs, [2]rune{first[0] + 1, first[1]})
		}
		if len(segs) == 0 && !hasDash {
			b.WriteString("[.^.]")
			return
		}
		segs = append(segs, [2]rune{'^', '^'})
		if len(segs) == 1 && hasDash {
			b.WriteString("-^")
			return
		}
	}
	if hasBracket {
		b.WriteByte(']')
	}
	for _, s := range segs {
		switch {
		case s[0] == s[1]:
			b.WriteRune(s[0])
		case s[1] == s[0]+1:
			b.WriteRune(s[0])
			b.WriteRune(s[1])
		default:
			fmt.Fprintf(b, "%c-%c", s[0], s[1])
		}
	}
	if hasDash {
		b.WriteByte('-')
	}
}
