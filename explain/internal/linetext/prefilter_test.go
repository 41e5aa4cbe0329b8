package linetext

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestRequiredLiterals(t *testing.T) {
	tests := []struct {
		pattern string
		want    []string // nil: no literal set
	}{
		{`Too many open files`, []string{"too many open files"}},
		{`(?:Channel|Ring) (\d+)`, []string{"channel ", "ring "}},
		{`\bBus error\b|[Ss]ignal:? 7\b`, []string{"bus error", "signal 7", "signal: 7"}},
		{`failed to extend (/dev/shm/nccl-\S+) to (\d+) bytes`, []string{"failed to extend "}},
		{`a.*`, []string{"a"}},
		{`.*`, nil},
		{`\d+`, nil},
		{`x|\d`, nil},
		// Go folds s and k with non-ASCII runes: those letters split the literal.
		{`(?i)last enqueued`, []string{"t enqueued"}},
	}
	for _, tt := range tests {
		got, ok := RequiredLiterals(tt.pattern)
		if tt.want == nil {
			if ok {
				t.Errorf("%s: got %q, want none", tt.pattern, got)
			}
			continue
		}
		if !ok || !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q (%v), want %q", tt.pattern, got, ok, tt.want)
		}
	}
}

// The gram scanner reports exactly the literals a naive search finds.
func TestGramScannerMatchesNaive(t *testing.T) {
	lits := []string{"failed to extend", "nccl warn", "bus error", "localranks", "] -> ", "abcda", "bcdab"}
	tags := []int{0, 1, 2, 3, 4, 5, 5}
	g := NewGramScanner(lits, tags, 6)
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := "abcd ->]NCCLWARNfailedtoextendBus error localRanks\n"
	for i := 0; i < 5000; i++ {
		n := rng.IntN(80)
		b := make([]byte, n)
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		if rng.IntN(3) == 0 {
			l := lits[rng.IntN(len(lits))]
			at := rng.IntN(len(b) + 1)
			b = append(b[:at], append(flipCase(rng, l), b[at:]...)...)
		}
		set := make([]uint64, 1)
		g.Scan(b, set)
		var want uint64
		lower := strings.ToLower(string(b))
		for k, l := range lits {
			if strings.Contains(lower, l) {
				want |= 1 << uint(tags[k])
			}
		}
		if set[0] != want {
			t.Fatalf("scan(%q) = %b, want %b", b, set[0], want)
		}
		// scanAll over the same text finds the same set.
		var all uint64
		g.ScanAll(b, func(pos, tag int) { all |= 1 << uint(tag) })
		if all != want {
			t.Fatalf("scanAll(%q) = %b, want %b", b, all, want)
		}
	}
}

// The arrow trigger reports exactly the lines where one of the literals it
// replaces ("] -> ", " -> 1" … " -> 8") occurs, in position order.
func TestGramScannerArrow(t *testing.T) {
	g := NewGramScanner([]string{"nccl warn"}, []int{0}, 2)
	g.ArrowTag = 1
	old := []string{"] -> ", " -> 1", " -> 2", " -> 3", " -> 4", " -> 5", " -> 6", " -> 7", " -> 8"}
	rng := rand.New(rand.NewPCG(5, 6))
	alphabet := "] ->0123456789[xNCCL WARN"
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		want := false
		for _, l := range old {
			want = want || strings.Contains(string(b), l)
		}
		set := make([]uint64, 1)
		g.Scan(b, set)
		if got := SetHas(set, 1); got != want {
			t.Fatalf("scan(%q): arrow %v, want %v", b, got, want)
		}
		last := -1
		g.ScanAll(b, func(pos, _ int) {
			if pos < last {
				t.Fatalf("scanAll(%q): position %d after %d", b, pos, last)
			}
			last = pos
		})
	}
}

// flipCase is l with random ASCII letters in the other case.
func flipCase(rng *rand.Rand, l string) []byte {
	b := []byte(l)
	for i, c := range b {
		if rng.IntN(4) == 0 && c|0x20 >= 'a' && c|0x20 <= 'z' {
			b[i] ^= 0x20
		}
	}
	return b
}
