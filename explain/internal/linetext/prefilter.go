package linetext

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
)

// GramScanner finds which of many literals occur in a line in one pass.
// Each literal gets two anchors: the 4-byte windows at offsets o and o+1,
// chosen where its bytes are rarest. Text is examined only at even
// positions: wherever a literal starts, one of its two anchors lands on an
// even position. Each examined window is hashed into a 64-Kibit bitmap
// that stays in the L1 cache; only a bitmap hit is verified against the
// literals of that hash. There is no dependency from one position to the
// next (unlike an automaton), so the loop runs at about a cycle per byte.
//
// Matching is ASCII-case-insensitive (literals are lower case). Bytes are
// folded with |0x20, which maps upper to lower case letters and also
// conflates a few punctuation pairs ([ and {); that only adds candidates,
// which the verification rejects. The scanner never misses a literal (tests
// and fuzzing check this). Literals must be at least MinLiteral bytes.
type GramScanner struct {
	bitmap [1 << 10]uint64 // 65536 bits
	// anchors sorted by hash; those of hash h are
	// anchors[start[h]:start[h+1]] (a flat table: no map lookup per hit).
	anchors []anchor
	start   []int32
	lits    []string
	tags    []int
	words   int
	// ArrowTag, when >= 0, is reported for each " -> " that follows ']'
	// or precedes a digit 1-8: transport lines ("0[0] -> 1[1]") and NCCL
	// return-code trails ("shm.cc:114 -> 2"). As nine 5-byte literals
	// sharing the window " -> " they cost nine verifications per arrow;
	// bytes.Index finds the arrows at memory speed instead.
	ArrowTag int
}

// MinLiteral is the shortest literal the stride-2 scan can anchor.
const MinLiteral = 5

// anchor is one literal's window.
type anchor struct {
	lit int // index into lits
	off int // window offset inside the literal
}

const gramFold = 0x20202020

func gramHash(g uint32) uint32 { return (g * 0x9E3779B1) >> 16 }

// NewGramScanner builds the scanner. lits[i] is reported as tags[i].
func NewGramScanner(lits []string, tags []int, ntags int) *GramScanner {
	s := &GramScanner{lits: lits, tags: tags, words: (ntags + 63) / 64, start: make([]int32, 1<<16+1), ArrowTag: -1}
	type hashed struct {
		h uint32
		a anchor
	}
	var all []hashed
	for i, l := range lits {
		if len(l) < MinLiteral {
			panic("explain: prefilter literal shorter than 5 bytes: " + l)
		}
		o := rarestWindow(l)
		for _, off := range []int{o, o + 1} {
			g := binary.LittleEndian.Uint32([]byte(l[off:off+4])) | gramFold
			h := gramHash(g)
			s.bitmap[h>>6] |= 1 << (h & 63)
			all = append(all, hashed{h, anchor{lit: i, off: off}})
		}
	}
	// Counting sort by hash, keeping the literals' order within a hash.
	for _, x := range all {
		s.start[x.h+1]++
	}
	for h := 1; h < len(s.start); h++ {
		s.start[h] += s.start[h-1]
	}
	s.anchors = make([]anchor, len(all))
	next := slices.Clone(s.start[:1<<16])
	for _, x := range all {
		s.anchors[next[x.h]] = x.a
		next[x.h]++
	}
	return s
}

// Words is the length of the tag sets Scan fills: explain sizes its
// candidate sets by it.
func (s *GramScanner) Words() int { return s.words }

// byteRarity scores how rare a byte is in logs (higher is rarer).
func byteRarity(c byte) int {
	switch {
	case c == ' ':
		return 0
	case c >= '0' && c <= '9':
		return 1
	case c == 'e' || c == 't' || c == 'a' || c == 'o' || c == 'i' || c == 'n' || c == 's' || c == 'r':
		return 2
	case c == 'h' || c == 'l' || c == 'd' || c == 'c' || c == 'u' || c == 'm':
		return 3
	case c >= 'a' && c <= 'z':
		return 5
	case c == ':' || c == '.' || c == '[' || c == ']' || c == '/' || c == '_' || c == '-' || c == ',':
		return 3
	}
	return 6
}

// commonGrams are 4-byte sequences that fill NCCL_DEBUG=INFO and PyTorch
// logs ("NCCL INFO", "nranks", "comm 0x…", "Channel …"); an anchor on them
// would make nearly every line a candidate.
var commonGrams = map[string]bool{
	"nccl": true, "ccl ": true, "cl i": true, "l in": true, " inf": true, "info": true, "rank": true, "anks": true,
	"comm": true, "omm ": true, "chan": true, "hann": true, "anne": true, "nnel": true, "cuda": true, "init": true,
	" via": true, "via ": true, "p2p/": true, "tion": true, "ing ": true, " the": true, "the ": true, "and ": true,
	"send": true, "recv": true, "ount": true, "buff": true, "stre": true, "eam ": true, "ice ": true, "devi": true,
	"erro": true, "rror": true, "ror ": true, "ror:": true, " err": true, "fail": true, "aile": true, "iled": true,
	// "NCCL INFO ", "via NET/IB/0", "[receive]", "network" (counted in a
	// 16-rank INFO log: these windows caused nine false hits in ten).
	"nfo ": true, "et/i": true, "t/ib": true, "/ib/": true, "/ib ": true, "ecei": true, "ceiv": true, "eive": true,
	"work": true, "ocal": true,
	// NCCL_DEBUG_SUBSYS=GRAPH topology and search lines ("GPU/0-18000"),
	// COLL lines ("datatype 7"), torchrun's "[rankN]:" at every line start.
	"gpu/": true, "ype ": true, "\n[ra": true, "[ran": true,
}

// commonHashes are the bitmap positions of commonGrams: a window whose
// gram merely shares one (a hash collision) is checked as often as if it
// were common.
var commonHashes = func() map[uint32]bool {
	m := map[uint32]bool{}
	for g := range commonGrams {
		m[gramHash(binary.LittleEndian.Uint32([]byte(g))|gramFold)] = true
	}
	return m
}()

// rarestWindow picks the offset o whose windows o and o+1 (five bytes
// l[o:o+5]) are rarest.
func rarestWindow(l string) int {
	best, bestScore := 0, -1000
	for i := 0; i+5 <= len(l); i++ {
		score := 0
		for j := i; j < i+5; j++ {
			score += byteRarity(l[j])
		}
		for _, w := range []string{l[i : i+4], l[i+1 : i+5]} {
			if commonGrams[w] || commonHashes[gramHash(binary.LittleEndian.Uint32([]byte(w))|gramFold)] {
				score -= 20
			}
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// scan ORs the tags of every literal found in text into set (len = words)
// and reports whether any was found.
func (s *GramScanner) Scan(text []byte, set []uint64) bool {
	hit := false
	s.ScanAll(text, func(_, t int) {
		set[t/64] |= 1 << (uint(t) % 64)
		hit = true
	})
	return hit
}

// nextArrow returns the position of the first arrow (see ArrowTag) at or
// after from, or -1.
func nextArrow(text []byte, from int) int {
	// '>' is rare in logs, unlike the space bytes.Index would look for
	// first.
	for from += 2; from < len(text); {
		i := bytes.IndexByte(text[from:], '>')
		if i < 0 {
			return -1
		}
		gt := from + i
		from = gt + 1
		if gt+1 >= len(text) || text[gt+1] != ' ' || text[gt-1] != '-' || text[gt-2] != ' ' {
			continue
		}
		at := gt - 2
		if at > 0 && text[at-1] == ']' || at+4 < len(text) && text[at+4] >= '1' && text[at+4] <= '8' {
			return at
		}
	}
	return -1
}

// scanAll reports every literal occurrence in text (a line or a chunk of
// many lines) as fn(anchor position, tag), in increasing position order.
func (s *GramScanner) ScanAll(text []byte, fn func(pos, tag int)) {
	if s.ArrowTag >= 0 {
		// Merge the arrows into the literal hits, in position order.
		arrow, inner := nextArrow(text, 0), fn
		fn = func(pos, tag int) {
			for arrow >= 0 && arrow <= pos {
				inner(arrow, s.ArrowTag)
				arrow = nextArrow(text, arrow+1)
			}
			inner(pos, tag)
		}
		defer func() {
			for arrow >= 0 {
				inner(arrow, s.ArrowTag)
				arrow = nextArrow(text, arrow+1)
			}
		}()
	}
	bm := &s.bitmap
	n := len(text)
	p := 0
	// One 8-byte load gives the windows at p, p+2 and p+4.
	for ; p+8 <= n; p += 6 {
		w := binary.LittleEndian.Uint64(text[p:]) | gramFold<<32 | gramFold
		h0 := gramHash(uint32(w))
		h1 := gramHash(uint32(w >> 16))
		h2 := gramHash(uint32(w >> 32))
		if bm[h0>>6]&(1<<(h0&63))|bm[h1>>6]&(1<<(h1&63))|bm[h2>>6]&(1<<(h2&63)) != 0 {
			for k, h := range [3]uint32{h0, h1, h2} {
				if bm[h>>6]&(1<<(h&63)) != 0 {
					s.verify(text, p+2*k, h, fn)
				}
			}
		}
	}
	for ; p+4 <= n; p += 2 {
		h := gramHash(binary.LittleEndian.Uint32(text[p:]) | gramFold)
		if bm[h>>6]&(1<<(h&63)) != 0 {
			s.verify(text, p, h, fn)
		}
	}
}

// verify checks the literals anchored at hash h against text at p.
func (s *GramScanner) verify(text []byte, p int, h uint32, fn func(pos, tag int)) {
	for _, a := range s.anchors[s.start[h]:s.start[h+1]] {
		l := s.lits[a.lit]
		start := p - a.off
		if start >= 0 && start+len(l) <= len(text) && equalFoldASCII(text[start:start+len(l)], l) {
			fn(p, s.tags[a.lit])
		}
	}
}

// equalFoldASCII compares b with the lower-case literal l, folding ASCII
// letters only (the same folding the literals were built with).
func equalFoldASCII(b []byte, l string) bool {
	for i := 0; i < len(l); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != l[i] {
			return false
		}
	}
	return true
}

// Bitset helpers over []uint64: the tag sets Scan fills, which explain's
// scan tests and clears per line.

func SetHas(set []uint64, i int) bool { return set[i/64]&(1<<(uint(i)%64)) != 0 }

func SetAdd(set []uint64, i int) { set[i/64] |= 1 << (uint(i) % 64) }

func SetClear(set []uint64) {
	for i := range set {
		set[i] = 0
	}
}

// SetEach calls f for each member in increasing order.
func SetEach(set []uint64, f func(int)) {
	for w, v := range set {
		for v != 0 {
			b := bits.TrailingZeros64(v)
			f(w*64 + b)
			v &= v - 1
		}
	}
}
