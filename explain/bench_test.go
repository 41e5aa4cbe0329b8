package explain

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"

	"github.com/ncclwiz/ncclwiz/explain/internal/loggen"
)

var (
	benchOnce sync.Once
	benchLog  []byte
)

// benchData is a 32 MiB generated NCCL_DEBUG=INFO log (the script runs the
// same generator at 256 MiB against grep).
func benchData(b *testing.B) []byte {
	benchOnce.Do(func() {
		var buf bytes.Buffer
		if _, err := loggen.Generate(&buf, loggen.Options{Size: 32 << 20, Seed: 1}); err != nil {
			b.Fatal(err)
		}
		benchLog = buf.Bytes()
	})
	return benchLog
}

func BenchmarkAnalyzeINFOLog(b *testing.B) {
	data := benchData(b)
	e, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := e.Analyze(context.Background(), []Input{{Name: "bench.log", Open: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}}})
		if err != nil || len(r.Diagnoses) == 0 {
			b.Fatalf("err=%v diagnoses=%d", err, len(r.Diagnoses))
		}
	}
}
