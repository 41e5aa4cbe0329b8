package explain

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
	"github.com/ncclwiz/ncclwiz/explain/internal/loggen"
)

// The hand parsers of digest.go must accept exactly what their regexps
// accept, with the same submatches: checked on every line of the corpus,
// on an init-heavy generated log, on edge cases and on random splices of
// the formats' fragments.
func TestDigestParsersAgreeWithRegexps(t *testing.T) {
	lines := [][]byte{
		[]byte("h:1:2 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0"),
		[]byte("h:1:2 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22."),
		[]byte("h:1:2 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22. \t "),
		[]byte("h:1:2 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to 22.."),
		[]byte("h:1:2 [0] NCCL INFO NCCL_X set by environment to "),
		[]byte("h:1:2 [0] NCCL INFO NCCL_X set by environment to ."),
		[]byte("h:1:2 [0] NCCL INFO NCCL_ set by environment to 1"),
		[]byte("h:1:2 [0] NCCL INFO NCCL_A-B set by environment to 1"),
		[]byte("NCCL INFO NCCL_A set by environment to x\ry NCCL INFO NCCL_B set by environment to z"),
		[]byte("NCCL INFO NCCL_A set by environment to x\r"),
		[]byte("NCCL INFO NCCL_A set by environment to x\nNCCL INFO NCCL_B set by environment to y."),
		[]byte("NCCL INFO NCCL_A set by environment to \xff\xfe ."),
		[]byte("NCCL INFO cudaDriverVersion 12040"),
		[]byte("NCCL INFO cudaDriverVersion x NCCL INFO cudaDriverVersion 7"),
		[]byte("NCCL INFO cudaDriverVersion "),
		[]byte("NCCL INFO Using network IB"),
		[]byte("NCCL INFO Using network  IB NCCL INFO Using network Socket"),
		[]byte("NCCL INFO Using network \xe2\x80\x9cIB\xe2 x"),
		[]byte("NCCL INFO Using network \x00\tx"),
		[]byte("h:1:2 [0] NCCL INFO transport/shm.cc:169 -> 2"),
		[]byte("cn-d004 [stderr] h:1:2 [0] NCCL WARN x"),
		[]byte("cn-d004.x_y [stdout] "),
		[]byte("_cn [stdout] x"),
		[]byte("cn:1 [stdout] x"),
		[]byte("h:1:2 [0] NCCL INFO Ring 00 : 15 -> 0 -> 1 init.cc:12 -> 3"),
		[]byte("comm 0x55d0 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 1 MNNVL 0"),
		[]byte("comm 0x55D0 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 1"),
		[]byte("comm 0xg comm 0xab rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 12345678901234567890"),
		[]byte("comm 0x1 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank "),
		[]byte("comm 0x1 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 3comm 0x2 rank 2 nRanks 1 nNodes 1 localRanks 1 localRank 0"),
	}
	err := filepath.WalkDir("testdata/corpus", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		lines = append(lines, bytes.Split(data, []byte("\n"))...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var gen bytes.Buffer
	if _, err := loggen.Generate(&gen, loggen.Options{Size: 2e6, Seed: 3, InitHeavy: true}); err != nil {
		t.Fatal(err)
	}
	lines = append(lines, bytes.Split(gen.Bytes(), []byte("\n"))...)
	frags := []string{"NCCL INFO ", "NCCL_", "IB_HCA", " set by environment to ", "cudaDriverVersion ", "Using network ",
		"cn-d004", " [stderr] ", " [stdout]", "a.b-c_d", "comm 0x", "5a", "transport/shm.cc:", " -> ", ":", "G", " rank ", " nRanks ", " nNodes ", " localRanks ", " localRank ", "12", ".", " ", "\t", "\r", "\n", "x", "_", "\xff"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		var b []byte
		for n := r.IntN(12); n >= 0; n-- {
			b = append(b, frags[r.IntN(len(frags))]...)
		}
		lines = append(lines, b)
	}
	same := func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
	matched := map[string]int{}
	for _, l := range lines {
		name, val, ok := parseEnvSet(l)
		sm := reEnvSet.Regexp.FindSubmatch(l)
		if ok != (sm != nil) || ok && (!bytes.Equal(name, sm[1]) || !bytes.Equal(val, sm[2])) {
			t.Errorf("parseEnvSet(%q) = %q %q %v; regexp %q", l, name, val, ok, sm)
		} else if ok {
			matched["env"]++
		}
		var want []byte
		if sm := reDriver.Regexp.FindSubmatch(l); sm != nil {
			want = sm[1]
			matched["driver"]++
		}
		if got := parseDriver(l); !same(got, want) {
			t.Errorf("parseDriver(%q) = %q; regexp %q", l, got, want)
		}
		want = nil
		if sm := reUsingNet.Regexp.FindSubmatch(l); sm != nil {
			want = sm[1]
			matched["network"]++
		}
		if got := parseUsingNet(l); !same(got, want) {
			t.Errorf("parseUsingNet(%q) = %q; regexp %q", l, got, want)
		}
		if reBacktrace.Regexp.Match(l) {
			matched["backtrace"]++
			if !mayBeBacktrace(l) {
				t.Errorf("mayBeBacktrace(%q) = false; reBacktrace matches", l)
			}
		}
		// The FastRe guards of the digest's patterns are exact.
		for _, re := range []*linetext.FastRe{reVersionLine, reCommSummary, reBootstrap, reEnvSet} {
			if got, want := re.FindSubmatchIndex(l), re.Regexp.FindSubmatchIndex(l); !slices.Equal(got, want) {
				t.Errorf("%s on %q: FastRe %v, regexp %v", re, l, got, want)
			}
		}
		cs, ok := parseCommSummary(l)
		sm = reCommSummary.Regexp.FindSubmatch(l)
		if ok != (sm != nil) || ok && (cs != commSummary{rank: linetext.Atoi(sm[1]), nranks: linetext.Atoi(sm[2]), nnodes: linetext.Atoi(sm[3]), localRanks: linetext.Atoi(sm[4])}) {
			t.Errorf("parseCommSummary(%q) = %+v %v; regexp %q", l, cs, ok, sm)
		} else if ok {
			matched["summary"]++
		}
	}
	// The comparison means something only if each parser matched often.
	for _, k := range []string{"env", "driver", "network", "summary", "backtrace"} {
		if matched[k] < 20 {
			t.Errorf("%s: only %d matching lines", k, matched[k])
		}
	}
}

// Each digest line kind's prefilter literals must be required by its
// parser: a literal the parser does not need would make the prefilter skip
// a line the parser accepts.
func TestInfoLiteralsRequired(t *testing.T) {
	for k, re := range map[int]*linetext.FastRe{infoVersion: reVersionLine, infoBootstrap: reBootstrap, infoSocket: reSockIfs,
		infoIB: reIBUsing, infoUsingNet: reUsingNet, infoEnv: reEnvSet, infoDriver: reDriver, infoLocalRanks: reCommSummary} {
		req, ok := linetext.RequiredLiterals(re.String())
		if !ok {
			t.Fatalf("%s: no required literal", re)
		}
		for _, l := range req {
			found := false
			for _, lit := range infoLiterals[k] {
				if bytes.Contains(bytes.ToLower([]byte(l)), []byte(lit)) {
					found = true
				}
			}
			if !found {
				t.Errorf("kind %d: %s can match %q, which holds none of %q", k, re, l, infoLiterals[k])
			}
		}
	}
}
