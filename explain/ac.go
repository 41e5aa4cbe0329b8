package explain

import "math/bits"

// acScanner finds which of many literals occur in a line, in one pass over
// the bytes: an Aho–Corasick automaton compiled to a dense DFA. Matching is
// ASCII-case-insensitive (literals are lower case; input bytes are folded by
// the byte-class table). Bytes that occur in no literal share one class, so
// the table stays small enough for the CPU cache.
//
// Each literal carries a tag; scan reports the set of tags found as a
// bitset. The prefilter may report a tag whose regexp then does not match;
// it never misses one (tests and fuzzing check this).
type acScanner struct {
	class  [256]uint8
	ncls   int
	delta  []uint32 // [state*ncls + class] = nextState*ncls<<1 | hasOutput
	out    [][]uint64
	words  int
	ntags  int
	nstate int
}

// newACScanner builds the automaton. lits[i] is reported as tags[i].
func newACScanner(lits []string, tags []int, ntags int) *acScanner {
	a := &acScanner{ntags: ntags, words: (ntags + 63) / 64}
	// Byte classes: one per distinct (lower-cased) byte used by a literal;
	// class 0 is "any other byte".
	var used [256]bool
	for _, l := range lits {
		for i := 0; i < len(l); i++ {
			used[l[i]] = true
		}
	}
	a.ncls = 1
	var clsOf [256]uint8
	for b := 0; b < 256; b++ {
		if used[b] {
			clsOf[b] = uint8(a.ncls)
			a.ncls++
		}
	}
	for b := 0; b < 256; b++ {
		lb := b
		if b >= 'A' && b <= 'Z' {
			lb = b + 'a' - 'A'
		}
		a.class[b] = clsOf[lb]
	}

	// Trie.
	type node struct {
		next map[uint8]int
		fail int
		out  []uint64
	}
	nodes := []node{{next: map[uint8]int{}}}
	for i, l := range lits {
		s := 0
		for j := 0; j < len(l); j++ {
			c := a.class[l[j]]
			n, ok := nodes[s].next[c]
			if !ok {
				nodes = append(nodes, node{next: map[uint8]int{}})
				n = len(nodes) - 1
				nodes[s].next[c] = n
			}
			s = n
		}
		if nodes[s].out == nil {
			nodes[s].out = make([]uint64, a.words)
		}
		nodes[s].out[tags[i]/64] |= 1 << (uint(tags[i]) % 64)
	}
	// Breadth-first failure links; outputs are merged along them so a
	// state reports every literal ending at it.
	a.nstate = len(nodes)
	a.delta = make([]uint32, a.nstate*a.ncls)
	queue := []int{}
	for c := 0; c < a.ncls; c++ {
		if n, ok := nodes[0].next[uint8(c)]; ok {
			nodes[n].fail = 0
			queue = append(queue, n)
		}
	}
	order := []int{0}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		order = append(order, s)
		for c, n := range nodes[s].next {
			f := nodes[s].fail
			for {
				if m, ok := nodes[f].next[c]; ok && m != n {
					nodes[n].fail = m
					break
				}
				if f == 0 {
					nodes[n].fail = 0
					break
				}
				f = nodes[f].fail
			}
			queue = append(queue, n)
		}
	}
	a.out = make([][]uint64, a.nstate)
	for _, s := range order {
		if f := nodes[s].fail; s != 0 && nodes[f].out != nil {
			if nodes[s].out == nil {
				nodes[s].out = make([]uint64, a.words)
			}
			for w := range nodes[s].out {
				nodes[s].out[w] |= nodes[f].out[w]
			}
		}
		a.out[s] = nodes[s].out
	}
	// Dense transitions in BFS order, so failure targets are filled first.
	for _, s := range order {
		for c := 0; c < a.ncls; c++ {
			var t int
			if n, ok := nodes[s].next[uint8(c)]; ok {
				t = n
			} else if s == 0 {
				t = 0
			} else {
				t = int(a.delta[nodes[s].fail*a.ncls+c] >> 1 / uint32(a.ncls))
			}
			e := uint32(t*a.ncls) << 1
			if nodes[t].out != nil {
				e |= 1
			}
			a.delta[s*a.ncls+c] = e
		}
	}
	return a
}

// scan ORs the tags of every literal found in text into set (len = words)
// and reports whether any was found.
func (a *acScanner) scan(text []byte, set []uint64) bool {
	delta, class := a.delta, &a.class
	row := uint32(0)
	hit := false
	for _, c := range text {
		e := delta[row+uint32(class[c])]
		row = e >> 1
		if e&1 != 0 {
			hit = true
			for w, v := range a.out[row/uint32(a.ncls)] {
				set[w] |= v
			}
		}
	}
	return hit
}

// bitset helpers over []uint64.

func setHas(set []uint64, i int) bool { return set[i/64]&(1<<(uint(i)%64)) != 0 }

func setAdd(set []uint64, i int) { set[i/64] |= 1 << (uint(i) % 64) }

func setClear(set []uint64) {
	for i := range set {
		set[i] = 0
	}
}

// setEach calls f for each member in increasing order.
func setEach(set []uint64, f func(int)) {
	for w, v := range set {
		for v != 0 {
			b := bits.TrailingZeros64(v)
			f(w*64 + b)
			v &= v - 1
		}
	}
}
