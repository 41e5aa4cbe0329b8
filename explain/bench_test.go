package explain

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/ncclwiz/ncclwiz/explain/internal/loggen"
)

// benchLogs caches generated logs by options: generating 128 MB takes
// longer than analysing it.
var (
	benchMu   sync.Mutex
	benchLogs = map[loggen.Options][]byte{}
)

func benchLog(b *testing.B, o loggen.Options) []byte {
	benchMu.Lock()
	defer benchMu.Unlock()
	if d, ok := benchLogs[o]; ok {
		return d
	}
	var buf bytes.Buffer
	buf.Grow(int(o.Size) + 64<<10)
	if _, err := loggen.Generate(&buf, o); err != nil {
		b.Fatal(err)
	}
	benchLogs[o] = buf.Bytes()
	return buf.Bytes()
}

func memInput(name string, data []byte) Input {
	return Input{Name: name, Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}
}

func benchAnalyze(b *testing.B, inputs []Input, size int64) {
	e, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := e.Analyze(context.Background(), inputs)
		if err != nil || len(r.Diagnoses) == 0 {
			b.Fatalf("err=%v diagnoses=%d", err, len(r.Diagnoses))
		}
	}
}

// BenchmarkAnalyzeINFOLog is the simple generated 8-rank log (32 MiB).
func BenchmarkAnalyzeINFOLog(b *testing.B) {
	data := benchLog(b, loggen.Options{Size: 32 << 20, Seed: 1})
	benchAnalyze(b, []Input{memInput("bench.log", data)}, int64(len(data)))
}

// BenchmarkAnalyzeRealistic128MB is the measurement: a 128 MB log
// of the 2-node 16-rank job (loggen's realistic mode), as
// scripts/bench-explain-vs-rg.sh gives it to ncclwiz and ripgrep.
func BenchmarkAnalyzeRealistic128MB(b *testing.B) {
	data := benchLog(b, loggen.Options{Size: 128e6, Seed: 1, Realistic: true})
	benchAnalyze(b, []Input{memInput("job.log", data)}, int64(len(data)))
}

// BenchmarkAnalyzeRankFiles is 8 rank files of 16 MB each, analysed
// together (in parallel on all cores).
func BenchmarkAnalyzeRankFiles(b *testing.B) {
	var inputs []Input
	var total int64
	for r := 0; r < 8; r++ {
		data := benchLog(b, loggen.Options{Size: 16e6, Seed: uint64(r + 1), Realistic: true})
		inputs = append(inputs, memInput(fmt.Sprintf("rank%d.log", r), data))
		total += int64(len(data))
	}
	benchAnalyze(b, inputs, total)
}

// BenchmarkAnalyzeInitHeavy128MB is a 128 MB log of communicator set-up
// under NCCL_DEBUG_SUBSYS=ALL (loggen's init-heavy mode): ENV, bootstrap,
// NET/IB, topology, graph, ring/tree and connection lines.
func BenchmarkAnalyzeInitHeavy128MB(b *testing.B) {
	data := benchLog(b, loggen.Options{Size: 128e6, Seed: 1, InitHeavy: true})
	benchAnalyze(b, []Input{memInput("init.log", data)}, int64(len(data)))
}

// BenchmarkAnalyzeDigestLines is the worst case of the INFO digest: only
// the init-heavy log's lines the digest parses (ENV, Bootstrap, NET/IB,
// GPU Direct RDMA, Using network, comm and Init START/COMPLETE lines),
// repeated to 32 MB, then its ending (scripts/bench-explain-vs-rg.sh
// -digest makes the same log for the binary).
func BenchmarkAnalyzeDigestLines(b *testing.B) {
	src := benchLog(b, loggen.Options{Size: 16e6, Seed: 1, InitHeavy: true})
	data := digestOnly(src, 32<<20)
	benchAnalyze(b, []Input{memInput("digest.log", data)}, int64(len(data)))
}

// digestOnly keeps the lines of src the INFO digest parses, repeated to
// about size bytes, and appends src's last 200 bytes (the failure).
func digestOnly(src []byte, size int) []byte {
	keys := [][]byte{[]byte("set by environment"), []byte("Bootstrap"), []byte("Init START"), []byte("Init COMPLETE"),
		[]byte(" nRanks "), []byte("GPU Direct"), []byte("Using network"), []byte("nvls channels"), []byte("NCCL version"),
		[]byte("cudaDriver"), []byte("NET/IB : Using")}
	var kept []byte
	for _, l := range bytes.SplitAfter(src, []byte("\n")) {
		for _, k := range keys {
			if bytes.Contains(l, k) {
				kept = append(kept, l...)
				break
			}
		}
	}
	out := make([]byte, 0, size+len(kept))
	for len(kept) > 0 && len(out) < size {
		out = append(out, kept...)
	}
	tail := src[max(len(src)-200, 0):]
	if i := bytes.IndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:]
	}
	return append(out, tail...)
}
