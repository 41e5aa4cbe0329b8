package explain

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
)

func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("memory bounds are not measured under the race detector (its shadow memory, 10x slower)")
	}
}

// repeatReader yields n bytes of a repeating pattern without holding them.
type repeatReader struct {
	pat  []byte
	left int64
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.pat[r.off:])
		n += c
		r.off = (r.off + c) % len(r.pat)
	}
	r.left -= int64(n)
	return n, nil
}

// allocated runs f and returns the bytes it allocated: a bound on memory
// that does not depend on timing (the heap can never hold more).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// memBudget is what one Analyze may allocate, whatever the input size:
// the chunk buffers, the bufio buffers and the compiled state.
const memBudget = 48 << 20

func analyzeReader(t *testing.T, name string, r io.Reader) *Report {
	t.Helper()
	rep, err := Analyze(context.Background(), []Input{ReaderInput(name, r)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// A single line of 2 GiB (no newline) keeps its first MaxLineBytes; the
// rest streams through the read buffer and is never held.
func TestMemoryGiantLine(t *testing.T) {
	skipUnderRace(t)
	size := int64(2 << 30)
	if testing.Short() {
		size = 256 << 20
	}
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rep *Report
	got := allocated(func() {
		rep, err = e.Analyze(context.Background(), []Input{ReaderInput("giant.log",
			&repeatReader{pat: []byte("NCCL WARN x "), left: size})})
	})
	if err != nil {
		t.Fatal(err)
	}
	in := rep.Inputs[0]
	if in.Bytes != size || in.Lines != 1 || in.TruncatedLines != 1 {
		t.Errorf("read %d bytes, %d lines, %d truncated; want %d, 1, 1", in.Bytes, in.Lines, in.TruncatedLines, size)
	}
	if got > memBudget {
		t.Errorf("a %d-byte line allocated %d bytes (budget %d)", size, got, memBudget)
	}
}

// A gzip bomb (256 MiB of zeros, compressed about 1000:1) is judged binary after its
// first binaryCheckBytes and left unread: bounded memory and work.
func TestMemoryGzipBomb(t *testing.T) {
	skipUnderRace(t)
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	if _, err := io.Copy(zw, &repeatReader{pat: make([]byte, 4096), left: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	var rep *Report
	got := allocated(func() { rep = analyzeReader(t, "bomb.log.gz", bytes.NewReader(z.Bytes())) })
	in := rep.Inputs[0]
	if !in.Gzip || !in.Binary {
		t.Errorf("gzip %v binary %v, want both", in.Gzip, in.Binary)
	}
	if in.Bytes >= 256<<20 || in.Bytes < binaryCheckBytes {
		t.Errorf("read %d of 256 MiB; want to stop soon after %d", in.Bytes, binaryCheckBytes)
	}
	if !strings.Contains(strings.Join(rep.Warnings, "\n"), "the rest was not read") {
		t.Errorf("no warning that the rest was not read: %q", rep.Warnings)
	}
	if got > memBudget {
		t.Errorf("the bomb allocated %d bytes (budget %d)", got, memBudget)
	}
}

// A text log is read to its end whatever its size, in bounded memory:
// allocation does not grow with the input (a 4x bigger log allocates
// less than twice as much).
func TestMemoryDoesNotGrowWithInput(t *testing.T) {
	skipUnderRace(t)
	line := []byte("[rank3]:gpu-node-01:52303:53121 [3] NCCL INFO Channel 07/0 : 3[3] -> 4[4] via P2P/CUMEM/read\n")
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(size int64) uint64 {
		return allocated(func() {
			rep, err := e.Analyze(context.Background(), []Input{ReaderInput("big.log", &repeatReader{pat: line, left: size})})
			if err != nil || rep.Inputs[0].Bytes != size {
				t.Fatalf("err=%v", err)
			}
		})
	}
	small, big := run(32<<20), run(128<<20)
	if big > 2*small || big > memBudget {
		t.Errorf("32 MiB allocated %d bytes, 128 MiB %d: memory grows with the input", small, big)
	}
}
