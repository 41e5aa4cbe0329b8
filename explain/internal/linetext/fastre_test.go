package linetext

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// FastRe's guards are exact necessary conditions: on every line of the
// corpus and on hand-made edge cases, it matches exactly when the plain
// regexp does (explain's digest test checks its own patterns so).
func TestFastReAgreesWithRegexp(t *testing.T) {
	patterns := []string{
		reLeadTS.String(), reGlog.String(), reMsgRank.String(), reRay.String(), reBracket.String(), reLabel.String(),
		`^(?i)kernel`, `(?i)^Ssh`, `^a?b`, `^(?:x|)y`, `^\s*File "`, `^(?:[a-c]+|d*)z`, `^[^x]`, `^$`, `^(?i)[k-m]q`,
	}
	lines := []string{"", "k", "Kernel", "\u212aernel", "ssh", "\u017fsh", "b", "ab", "y", "xy", "z", "dz", "abcz", "\xffq", "lq", "Lq", "\u212aq",
		`  File "x.py", line 3, in f`, "[rank3]:x", "[2024-01-02 03:04:05] y", "(Worker pid=12) x"}
	for _, l := range corpusLines(t) {
		lines = append(lines, string(l))
	}
	for _, p := range patterns {
		fast, slow := MustFastRe(p), regexp.MustCompile(p)
		for _, l := range lines {
			for _, s := range []string{l, strings.TrimSpace(l)} {
				if got, want := fast.FindSubmatchIndex([]byte(s)), slow.FindSubmatchIndex([]byte(s)); !equalInts(got, want) {
					t.Errorf("%s on %q: FastRe %v, regexp %v", p, s, got, want)
				}
			}
		}
	}
}

// The guards are present where they pay: a literal for unanchored
// patterns, a first-byte set for anchored ones.
func TestFastReGuards(t *testing.T) {
	for _, tt := range []struct {
		pattern   string
		lit, anch bool
	}{
		{`comm 0x[0-9a-f]+ rank (\d+) nRanks`, true, false},
		{`^\[(?:rank(\d+)|(\d+),(\d+))\]`, true, true},
		{`(?i)nccl`, false, false},
		{`^\s*File "`, true, true},
		{`^(?i)kernel`, false, false},
		{`^(?i)nvidia`, false, true},
	} {
		f := MustFastRe(tt.pattern)
		if (f.lits != nil) != tt.lit || (f.first != nil) != tt.anch {
			t.Errorf("%s: literal guard %v (want %v), first-byte guard %v (want %v)", tt.pattern, f.lits != nil, tt.lit, f.first != nil, tt.anch)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCaseLiteralGroups(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		want    [][]string
	}{
		{`NCCL INFO ([\w./\-]+\.(?:cc|h|cu|c|cpp)):(\d+) -> (\d+)`, [][]string{{"NCCL INFO "}, {" -> "}, {".c", ".h"}}},
		{`comm 0x[0-9a-f]+ rank (\d+)`, [][]string{{"comm 0x"}, {" rank "}}},
		{`(?i)nccl`, nil},
		{`^(a|b)$`, [][]string{{"a", "b"}}},
		{`x*`, nil},
	} {
		if got := caseLiteralGroups(tt.pattern, 3); !slices.EqualFunc(got, tt.want, slices.Equal) {
			t.Errorf("%s: %q, want %q", tt.pattern, got, tt.want)
		}
	}
}

// guardLit.in is bytes.Contains.
func TestGuardLit(t *testing.T) {
	for _, l := range []string{" -> ", "NCCL INFO ", "a", " set by environment to ", "xx"} {
		g := newGuardLit(l)
		for _, b := range []string{"", l, "x" + l, l + "x", " -> NCCL INFO  set by environment t", "xxx", "a -> ", " ->", "NCCL INFO"} {
			if got, want := g.in([]byte(b)), strings.Contains(b, l); got != want {
				t.Errorf("%q in %q: %v, want %v", l, b, got, want)
			}
		}
	}
}
