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

// BenchmarkCleanupApply: one op removes 100 orphans, proven by one /proc
// scan for the batch and a kernel lease per file.
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

// BenchmarkCleanup100k: plan and apply shm.cleanup on 100,000 orphans (the
// issue's scale: 130 files/s before, two /proc scans per file). Reports
// files/s for the plan (scan + a lease probe per file) and the apply.
func BenchmarkCleanup100k(b *testing.B) {
	const n = 100_000
	dir := shmtest.MountTmpfs(b, "256M")
	h := localHost(dir)
	ctx := context.Background()
	var planT, applyT time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		makeEmptyOrphans(b, dir, fmt.Sprintf("nccl-k%d-", i), n)
		b.StartTimer()
		t0 := time.Now()
		fx, ok := ByID(Plan(ctx, h, wantCleanup()), "shm.cleanup")
		if !ok {
			b.Fatal("not planned")
		}
		t1 := time.Now()
		out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
		if err != nil || out.After["segments_removed"] != n {
			b.Fatalf("%v %v", err, out.After)
		}
		planT += t1.Sub(t0)
		applyT += time.Since(t1) // includes the re-check scan
	}
	b.ReportMetric(float64(n*b.N)/planT.Seconds(), "planned-files/s")
	b.ReportMetric(float64(n*b.N)/applyT.Seconds(), "removed-files/s")
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
