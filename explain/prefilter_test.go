package explain

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// Every text a pattern matches contains one of its literals. Random texts
// are built around real matches of each pattern.
func TestRequiredLiteralsSound(t *testing.T) {
	e := testExplainer(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range e.sigs {
		if s.Re == nil {
			continue // a catalogue cause: the catalogue finds its lines
		}
		lits, ok := linetext.RequiredLiterals(s.Re.String())
		if !ok {
			continue
		}
		for _, sample := range sampleLines(t, s.ID) {
			for i := 0; i < 20; i++ {
				text := mutateCase(rng, sample)
				if s.Re.MatchString(text) && !containsAnyFold(text, lits) {
					t.Errorf("%s matches %q but no literal of %q is in it", s.ID, text, lits)
				}
			}
		}
	}
}

func containsAnyFold(text string, lits []string) bool {
	lt := strings.ToLower(text)
	for _, l := range lits {
		if strings.Contains(lt, l) {
			return true
		}
	}
	return false
}

// mutateCase flips the case of random ASCII letters.
func mutateCase(rng *rand.Rand, s string) string {
	b := []byte(s)
	for i, c := range b {
		if rng.IntN(4) == 0 {
			switch {
			case c >= 'a' && c <= 'z':
				b[i] = c - 32
			case c >= 'A' && c <= 'Z':
				b[i] = c + 32
			}
		}
	}
	return string(b)
}

// With the real library, the prefilter plus regexps find exactly what
// running every regexp on every line finds.
func TestPrefilterAgreesWithBruteForce(t *testing.T) {
	e := testExplainer(t)
	for _, s := range e.sigs {
		if s.Re == nil {
			continue // a catalogue cause: the catalogue finds its lines
		}
		for _, line := range append(sampleLines(t, s.ID), negativeLines(t, s.ID)...) {
			checkPrefilter(t, e, line)
		}
	}
	for _, b := range benign {
		checkPrefilter(t, e, b.Sample)
	}
}

func checkPrefilter(t *testing.T, e *Explainer, line string) {
	t.Helper()
	got, want := prefilterMatches(e, []byte(line)), bruteMatches(e, []byte(line))
	if !slices.Equal(got, want) {
		t.Errorf("line %q: prefilter found %v, brute force %v", line, got, want)
	}
}

func prefilterMatches(e *Explainer, line []byte) []string {
	set := make([]uint64, e.words)
	e.ac.Scan(line, set)
	var out []string
	for _, s := range e.sigs {
		if s.Re == nil {
			continue // a catalogue cause: the catalogue finds its lines
		}
		if s == e.transportSig {
			if _, ok := parseChannel(line); ok {
				out = append(out, s.ID)
			}
			continue
		}
		if (linetext.SetHas(set, s.tag) || slices.Contains(e.always, s)) && s.Re.Match(line) {
			out = append(out, s.ID)
		}
	}
	return out
}

func bruteMatches(e *Explainer, line []byte) []string {
	var out []string
	for _, s := range e.sigs {
		if s.Re == nil {
			continue // a catalogue cause: the catalogue finds its lines
		}
		if s.Re.Match(line) {
			out = append(out, s.ID)
		}
	}
	return out
}

// The real library never needs a signature to run on every line.
func TestNoAlwaysRunSignatures(t *testing.T) {
	e := testExplainer(t)
	for _, s := range e.always {
		t.Errorf("signature %s has no literal of 4+ bytes every match contains; it would run on every line: %s", s.ID, s.Re)
	}
}

var reTransport = regexp.MustCompile(`(?:Channel|Ring) (\d+)(?:/(\d+))? : (\d+)\[([0-9a-fA-F]+)\] -> (\d+)\[([0-9a-fA-F]+)\] (?:\[(send|receive)\] )?via ([^\r\n]+?)\s*$`)

// parseChannel accepts exactly the lines the reference transport regexp
// accepts and reads the same ranks.
func TestParseChannelAgreesWithRegexp(t *testing.T) {
	lines := []string{
		"user:16905:16951 [6] NCCL INFO Channel 00/0 : 6[6] -> 5[5] via P2P/IPC/read",
		"ubuntu:39964:40049 [5] NCCL INFO Channel 20 : 5[5] -> 4[4] via SHM/direct/direct",
		"g148:14937:69361 [0] NCCL INFO Channel 01/1 : 0[0] -> 8[0] [send] via NET/IB/9/GDRDMA/Shared",
		"[0] node0:13571:13571 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
		"NCCL INFO Ring 00 : 0[21000] -> 1[41000] via direct shared memory",
		"Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM   ",
		"Channel 00/0 : 0[0] -> 1[1] via ",
		"Channel 00/0 : 0[0] -> 1[1] via  ",
		"Channel 00/0 : 0[0] -> 1[1] via x\r",
		"Channel 00/0 : 0[0] -> 1[1] via x\ry",
		"Channel 00/ : 0[0] -> 1[1] via x",
		"Channel x Channel 01/0 : 2[2] -> 3[3] via P2P/IPC",
		"Ring 1 : 0[0] -> 1[g] via x",
		"Channel 00/0 : 0[0] -> 1[1] [send]via x",
		"Channel 00/0 : 0[0] -> 1[1] [recv] via x",
		"Channel 00/0 : 0[0] ->  1[1] via x",
		"Channel 00/0 : 0[] -> 1[1] via x",
	}
	for _, l := range lines {
		checkChannel(t, l)
	}
}

func checkChannel(t *testing.T, l string) {
	t.Helper()
	cl, ok := parseChannel([]byte(l))
	m := reTransport.FindStringSubmatch(l)
	if ok != (m != nil) {
		t.Fatalf("%q: parseChannel ok=%v, regexp match=%v", l, ok, m != nil)
	}
	if ok && (itoa(cl.From) != strings.TrimLeft(m[3], "0")+zeroIf(m[3]) || itoa(cl.To) != strings.TrimLeft(m[5], "0")+zeroIf(m[5])) {
		t.Fatalf("%q: parsed %d->%d, regexp %s->%s", l, cl.From, cl.To, m[3], m[5])
	}
}

func zeroIf(s string) string {
	if strings.TrimLeft(s, "0") == "" {
		return "0"
	}
	return ""
}

func TestTransportClass(t *testing.T) {
	tests := map[string]string{
		"P2P/IPC/read": "P2P/IPC", "P2P/CUMEM": "P2P/CUMEM", "P2P/direct pointer": "P2P/direct",
		"SHM/direct/direct": "SHM", "direct shared memory": "SHM", "NET/IB/0/GDRDMA": "NET/IB",
		"NET/Socket/0": "NET/Socket", "NET/AWS Libfabric/0": "NET", "COLLNET/SHARP/0": "COLLNET", "???": "other",
	}
	for in, want := range tests {
		if got := TransportClass(in); got != want {
			t.Errorf("TransportClass(%q) = %q, want %q", in, got, want)
		}
	}
}
