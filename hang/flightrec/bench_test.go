package flightrec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkParseAnalyze8x2000 reads and compares eight dumps of 2000
// entries each (the default ring size) — what `ncclwiz hang` does for a
// node of eight GPUs.
func BenchmarkParseAnalyze8x2000(b *testing.B) {
	py, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("python3 not installed")
	}
	dir := b.TempDir()
	script := `
import pickle, sys
for rank in range(8):
    entries = []
    for seq in range(1, 2001):
        entries.append({"record_id": seq, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": seq,
            "p2p_seq_id": 0, "op_id": seq, "profiling_name": "nccl:all_reduce", "time_created_ns": 1700000000000000000 + seq,
            "input_sizes": [[4096, 4096]], "input_dtypes": ["BFloat16"], "output_sizes": [[4096, 4096]], "output_dtypes": ["BFloat16"],
            "state": "completed", "time_discovered_started_ns": 1, "time_discovered_completed_ns": 2, "retired": True,
            "timeout_ms": 600000, "is_p2p": False,
            "frames": [{"name": "all_reduce", "filename": "train.py", "line": 42}]})
    d = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(8)))}},
         "pg_status": {"0": {"last_enqueued_collective": 2000, "last_started_collective": 2000, "last_completed_collective": 2000}},
         "entries": entries}
    open(sys.argv[1] + "/nccl_trace_rank_%d" % rank, "wb").write(pickle.dumps(d, protocol=2))
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	files := make([][]byte, 8)
	for i := range files {
		if files[i], err = os.ReadFile(filepath.Join(dir, "nccl_trace_rank_"+strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(files[0]) * 8))
	b.ResetTimer()
	for b.Loop() {
		var ds []*Dump
		for i, f := range files {
			d, err := Parse(f, i)
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, d)
		}
		if g := Analyze(ds); len(g) != 1 || len(g[0].Suspects) != 0 {
			b.Fatalf("%+v", g)
		}
	}
}
