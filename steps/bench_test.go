package steps

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

func makeOrphans(b *testing.B, dir string, n int, round int) {
	b.Helper()
	for i := 0; i < n; i++ {
		shmtest.MakeSegment(b, dir, fmt.Sprintf("nccl-b%d-%03d", round, i), 4096, time.Hour)
	}
}

// BenchmarkCleanupApply: one op removes 100 orphans, each re-proven twice
// against every process of the machine (before and after moving it aside).
func BenchmarkCleanupApply(b *testing.B) {
	dir := shmtest.MountTmpfs(b, "64M")
	h := localHost(dir)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		makeOrphans(b, dir, 100, i)
		inv, err := shm.Scan(ctx, h)
		if err != nil {
			b.Fatal(err)
		}
		cands, _ := cleanupCandidates(inv, h, false)
		b.StartTimer()
		out, err := applyCleanup(ctx, h, cands, ApplyOptions{Yes: true})
		if err != nil || len(out.Changed) != 100 {
			b.Fatalf("%v %d", err, len(out.Changed))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*100), "µs/segment")
}

// BenchmarkPlanCleanup: scanning and planning 100 orphans.
func BenchmarkPlanCleanup(b *testing.B) {
	dir := shmtest.MountTmpfs(b, "64M")
	makeOrphans(b, dir, 100, 0)
	h := localHost(dir)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := ByID(Plan(ctx, h, wantCleanup()), "shm.cleanup"); !ok {
			b.Fatal("not planned")
		}
	}
}

// BenchmarkScriptDryRun: the exported script proving 20 orphans unused in
// bash (stat, find over /proc/*/fd, grep over /proc/*/maps per file).
func BenchmarkScriptDryRun(b *testing.B) {
	dir := shmtest.MountTmpfs(b, "64M")
	makeOrphans(b, dir, 20, 0)
	h := localHost(dir)
	ctx := context.Background()
	var buf bytes.Buffer
	if err := ExportScriptWith(&buf, h, Plan(ctx, h, wantCleanup()), nil, ExportOptions{}); err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(b.TempDir(), "fix.sh")
	if err := os.WriteFile(p, buf.Bytes(), 0o755); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out, err := exec.Command("bash", p).CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N*20), "ms/segment")
}

func BenchmarkExportScript(b *testing.B) {
	h := fixtureHost(b)
	plan := PlanFor(context.Background(), h, nil, IDs())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var buf bytes.Buffer
		if err := ExportScriptWith(&buf, h, plan, nil, ExportOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
