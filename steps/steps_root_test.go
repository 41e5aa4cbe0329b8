package steps

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

func TestMain(m *testing.M) {
	shmtest.Main()
	os.Exit(m.Run())
}

func localHost(dir string) *host.Host {
	return host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
}

func want(id string) []checks.Finding {
	return []checks.Finding{{Check: "shm.segments", Severity: checks.Warn, Title: "t", Fixes: []string{id}}}
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// A real tmpfs with orphans, a segment held open and one mapped by live
// processes, a symlink to a file outside, and another user's orphan:
// shm.cleanup removes exactly the user's orphans.
func TestCleanupOnRealTmpfs(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "256M")
	ctx := context.Background()
	var orphans []string
	for _, n := range []string{"nccl-Orph01", "nccl-Orph02", "nccl-Orph03"} {
		orphans = append(orphans, shmtest.MakeSegment(t, dir, n, 128<<10, time.Hour))
	}
	held := shmtest.MakeSegment(t, dir, "nccl-Held04", 128<<10, time.Hour)
	mapped := shmtest.MakeSegment(t, dir, "nccl-Mapd05", 128<<10, time.Hour)
	shmtest.Start(t, "open", held)
	shmtest.Start(t, "map", mapped)
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(outside, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "nccl-Link06")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	other := shmtest.MakeSegment(t, dir, "nccl-Othr07", 128<<10, time.Hour)
	if err := os.Chown(other, 12345, 12345); err != nil {
		t.Fatal(err)
	}

	h := localHost(dir)
	fx, ok := ByID(Plan(ctx, h, want("shm.cleanup")), "shm.cleanup")
	if !ok {
		t.Fatal("shm.cleanup not planned")
	}
	preview := strings.Join(fx.Preview(), "\n")
	for _, p := range orphans {
		if !strings.Contains(preview, p) {
			t.Errorf("preview lacks %s:\n%s", p, preview)
		}
	}
	for _, p := range []string{held, mapped, link, other} {
		if strings.Contains(preview, p) {
			t.Errorf("preview would touch %s:\n%s", p, preview)
		}
	}
	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range orphans {
		if exists(p) {
			t.Errorf("orphan %s survived", p)
		}
	}
	for _, p := range []string{held, mapped, link, other, outside} {
		if !exists(p) {
			t.Errorf("%s was removed", p)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep me" {
		t.Error("symlink target changed")
	}
	if len(out.Changed) != 3 || !out.Passed() {
		t.Errorf("outcome %+v (recheck passed: %v)", out, out.Passed())
	}
	if before, after := out.Before["used_bytes"].(uint64), out.After["used_bytes"].(uint64); after >= before {
		t.Errorf("used bytes %d -> %d", before, after)
	}
}

// Processes keep creating, holding and mapping segments while cleanup runs
// again and again; no held segment may ever be removed (the holders check).
func TestCleanupChurn(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "16M")
	ctx := context.Background()
	var procs []*shmtest.Process
	for i := 0; i < 3; i++ {
		procs = append(procs, shmtest.Start(t, "churn", dir))
	}
	h := localHost(dir)
	removed := 0
	deadline := time.Now().Add(2500 * time.Millisecond)
	var mu sync.Mutex
	for time.Now().Before(deadline) {
		// Real orphans keep appearing too, so cleanup has work to do.
		shmtest.MakeSegment(t, dir, "nccl-orph-"+time.Now().Format("150405.000000000"), 4096, time.Hour)
		out, err := applyCleanup(ctx, h, ApplyOptions{Yes: true})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		removed += len(out.Changed)
		mu.Unlock()
	}
	for i, p := range procs {
		last, err := p.Result()
		if err != nil || !strings.HasPrefix(last, "ok ") {
			t.Errorf("churn process %d: %q %v", i, last, err)
		}
	}
	if removed == 0 {
		t.Error("cleanup never removed the real orphans")
	}
}

func TestRemountRealTmpfs(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "1M")
	ctx := context.Background()
	h := localHost(dir)
	before, _ := shm.ReadMount(ctx, h)
	fx, ok := ByID(PlanFor(ctx, h, nil, []string{"shm.remount"}), "shm.remount")
	if !ok {
		t.Fatal("shm.remount not planned")
	}
	if fx.Impossible != "" {
		t.Skipf("remount not possible here: %s", fx.Impossible)
	}
	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := shm.ReadMount(ctx, h)
	if after.Total <= before.Total || after.Total < 1<<30 {
		t.Errorf("size %d -> %d", before.Total, after.Total)
	}
	found := false
	for _, r := range out.Recheck {
		if r.ID == "shm.mount" && !r.Worst().IsProblem() {
			found = true
		}
	}
	if !found {
		t.Errorf("shm.mount re-check did not pass: %+v", out.Recheck)
	}
	// The per-mount flags stayed (mode 1777 dir, rw).
	if after.ReadOnly {
		t.Error("remount made it read-only")
	}
	// Applying again changes nothing.
	again, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil || len(again.Changed) != 0 {
		t.Errorf("second remount: %+v %v", again, err)
	}
}

func shellcheck(t *testing.T, script string) {
	t.Helper()
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Log("shellcheck not installed; CI installs it")
		return
	}
	cmd := exec.Command(sc, "-s", "bash", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// The exported script is shellcheck-clean, changes nothing in dry run,
// removes the orphans (and nothing else) with --apply, and changes nothing
// the second time.
func TestExportedScriptOnRealTmpfs(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "4M")
	ctx := context.Background()
	o1 := shmtest.MakeSegment(t, dir, "nccl-aaaaaa", 64<<10, time.Hour)
	o2 := shmtest.MakeSegment(t, dir, "nccl-it's q", 64<<10, time.Hour)
	held := shmtest.MakeSegment(t, dir, "nccl-held01", 64<<10, time.Hour)
	shmtest.Start(t, "map", held)
	h := localHost(dir)
	fs := Plan(ctx, h, want("shm.cleanup"))
	var buf bytes.Buffer
	if err := ExportScript(ctx, &buf, h, fs, want("shm.cleanup"), "test"); err != nil {
		t.Fatal(err)
	}
	script := buf.String()
	shellcheck(t, script)
	for _, line := range strings.Split(script, "\n") {
		if strings.Contains(line, "pkill") || strings.Contains(line, "killall") {
			t.Errorf("script ends processes by name: %s", line)
		}
		if strings.Contains(line, "rm ") && (strings.Contains(line, "*") || strings.Contains(line, "-r")) {
			t.Errorf("script removes with a glob or recursively: %s", line)
		}
	}
	path := filepath.Join(t.TempDir(), "fix.sh")
	if err := os.WriteFile(path, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		out, err := exec.Command("bash", append([]string{path}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("bash %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run()
	if !exists(o1) || !exists(o2) || !strings.Contains(out, "would run: rm -- "+o1) || !strings.Contains(out, "dry run: nothing changed") {
		t.Errorf("dry run:\n%s", out)
	}
	out = run("--apply")
	if exists(o1) || exists(o2) || !exists(held) {
		t.Errorf("apply: o1 %v o2 %v held %v\n%s", exists(o1), exists(o2), exists(held), out)
	}
	out2 := run("--apply")
	if strings.Contains(out2, "+ rm") || !exists(held) {
		t.Errorf("second apply changed something:\n%s", out2)
	}
}

func TestExportedScriptIsShellcheckClean(t *testing.T) {
	// Every fix kind, on a fixture host, so this runs without root too.
	h := fixtureHostWithEverything(t)
	ctx := context.Background()
	fs := PlanFor(ctx, h, nil, IDs())
	var buf bytes.Buffer
	if err := ExportScript(ctx, &buf, h, fs, nil, "test"); err != nil {
		t.Fatal(err)
	}
	shellcheck(t, buf.String())
	if _, err := exec.LookPath("bash"); err == nil {
		if out, err := exec.Command("bash", "-n", "-c", buf.String()).CombinedOutput(); err != nil {
			t.Errorf("bash -n: %v %s", err, out)
		}
	}
}
