package explain

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// referenceLines is what a LineReader must return: the input split at
// '\n', each line cut at max bytes (on a rune boundary) or, when not cut,
// without a trailing '\r'.
func referenceLines(in []byte, max int) (lines []string, trunc []bool) {
	if len(in) == 0 {
		return nil, nil
	}
	parts := bytes.Split(in, []byte{'\n'})
	if in[len(in)-1] == '\n' {
		parts = parts[:len(parts)-1]
	}
	for _, p := range parts {
		l, t := capLine(p, max)
		lines = append(lines, string(l))
		trunc = append(trunc, t)
	}
	return lines, trunc
}

func FuzzLineReader(f *testing.F) {
	for _, s := range []string{"", "a", "a\n", "a\r\nb\r\n", "\n\n", "x\ry\n", "héllo wörld\n", "\x00\xff\xfe\n", "0123456789abcdefghij\nshort\n"} {
		f.Add([]byte(s), uint8(4), uint8(8), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, maxB, extra uint8, oneByte bool) {
		max := 1 + int(maxB)%64
		size := max + 16 + int(extra) // bufio's minimum is 16, and size > max
		var r io.Reader = bytes.NewReader(in)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		lr := &LineReader{c: newChunkReaderSize(r, max, size)}
		var lines []string
		var trunc []bool
		for lr.Next() {
			lines = append(lines, string(lr.Bytes()))
			trunc = append(trunc, lr.Truncated())
			if len(lr.Bytes()) > max {
				t.Fatalf("line of %d bytes exceeds max %d", len(lr.Bytes()), max)
			}
		}
		if lr.Err() != nil {
			t.Fatal(lr.Err())
		}
		want, wantTrunc := referenceLines(in, max)
		if !slices.Equal(lines, want) || !slices.Equal(trunc, wantTrunc) {
			t.Fatalf("max=%d size=%d\n got %q %v\nwant %q %v", max, size, lines, trunc, want, wantTrunc)
		}
		if st := lr.Stats(); st.Bytes != int64(len(in)) || st.Lines != int64(len(want)) {
			t.Fatalf("stats %+v for %d bytes, %d lines", st, len(in), len(want))
		}
	})
}

// FuzzMatcher checks, for arbitrary text, that the prefilter never loses a
// signature match, that the hand-written transport parser agrees with the
// reference regexp, and that a whole analysis neither panics nor grows
// without bound.
func FuzzMatcher(f *testing.F) {
	e := testExplainer(f)
	for _, s := range e.sigs {
		if s.Re == nil {
			continue // a catalogue cause: the catalogue finds its lines
		}
		for _, l := range sampleLines(f, s.ID) {
			f.Add([]byte(l))
		}
	}
	for _, b := range benign {
		f.Add([]byte(b.Sample))
	}
	f.Add([]byte("[rank1]: Last error:\n[rank1]: Error while attaching to shared memory segment /dev/shm/nccl- (size 0)\n"))
	f.Add([]byte("\x1b[31mNCCL WARN\x1b[0m Call to ibv_reg_mr failed\r\n"))
	f.Add([]byte("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\r"))
	// Causes outside NCCL (causes.go).
	f.Add([]byte("[rank1]:   File \"/w/d.py\", line 5, in f\n[rank1]: KeyError: 'x'\nsrun: error: n1: task 1: Out Of Memory\n"))
	f.Add([]byte("x.cu:93: k: block: [0,0,0], thread: [1,0,0] Assertion `a < b` failed.\nERROR 07-08 11:03:52 w.py:1] RuntimeError: DataLoader worker (pid 1) is killed by signal: Bus error.\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, line := range bytes.Split(in, []byte{'\n'}) {
			if len(line) > 4096 {
				continue
			}
			if got, want := prefilterMatches(e, line), bruteMatches(e, line); !slices.Equal(got, want) {
				t.Fatalf("%q: prefilter %v, brute force %v", line, got, want)
			}
			cl, ok := parseChannel(line)
			m := reTransport.FindSubmatch(line)
			if ok != (m != nil) || ok && (cl.From != linetext.Atoi(m[3]) || cl.To != linetext.Atoi(m[5])) {
				t.Fatalf("%q: parseChannel %v %+v, regexp %q", line, ok, cl, m)
			}
		}
		r, err := e.Analyze(context.Background(), []Input{ReaderInput("fuzz.log", bytes.NewReader(in))})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range r.Diagnoses {
			if len(d.Evidence) > 2*e.opts.MaxEvidence || len(d.Ranks) > maxRanksTracked {
				t.Fatalf("%s keeps %d evidence lines, %d ranks", d.ID, len(d.Evidence), len(d.Ranks))
			}
			for _, ev := range d.Evidence {
				if len(ev.Text) > 8*maxEvidenceText {
					t.Fatalf("evidence of %d bytes", len(ev.Text))
				}
			}
		}
		if r.Summary == "" || r.Schema != SchemaVersion {
			t.Fatalf("report %+v", r)
		}
	})
}
