package shm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

// envScanDir makes the test binary scan that directory, print the states as
// JSON and exit: the scanner run inside another PID namespace.
const envScanDir = "NCCLWIZ_SHMTEST_SCAN_DIR"

// TestMain lets the test binary act as a holder process (shmtest.Start) or
// as a scanner in another namespace.
func TestMain(m *testing.M) {
	if dir := os.Getenv(envScanDir); dir != "" {
		os.Exit(scanAndPrint(dir))
	}
	shmtest.Main()
	os.Exit(m.Run())
}

func scanAndPrint(dir string) int {
	inv, err := Scan(context.Background(), host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true}))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	out := map[string]any{"states": states(inv), "pid_namespace": inv.PIDNamespace, "private": inv.Private, "note": inv.Note}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 1
	}
	return 0
}

// TestRealTmpfsHoldersAndFull runs the checks against a real 1 MiB tmpfs
// and real processes: one holds a segment open, one only maps it (fd
// closed, as NCCL 2.12-2.15 attachers do), one holds a deleted file of the
// same name as a current one, and one holds a segment through a bind mount
// of the directory (a path the check has never heard of).
func TestRealTmpfsHoldersAndFull(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "1M")
	const seg = 64 << 10
	held := shmtest.MakeSegment(t, dir, "nccl-Held01", seg, time.Hour)
	mapped := shmtest.MakeSegment(t, dir, "nccl-Mapd02", seg, time.Hour)
	for _, n := range []string{"nccl-Orph03", "nccl-Orph04", "nccl-Orph05"} {
		shmtest.MakeSegment(t, dir, n, seg, time.Hour)
	}
	shmtest.Start(t, "open", held)
	shmtest.Start(t, "map", mapped)

	// A job held nccl-Reus06, which was then removed and re-created: the
	// holder's fd now reads "…/nccl-Reus06 (deleted)" and must not make
	// the new file look in use.
	reused := shmtest.MakeSegment(t, dir, "nccl-Reus06", 4096, time.Hour)
	shmtest.Start(t, "open", reused)
	if err := os.Remove(reused); err != nil {
		t.Fatal(err)
	}
	shmtest.MakeSegment(t, dir, "nccl-Reus06", 4096, time.Hour)

	// A holder that opened the file through a bind mount elsewhere.
	bind := t.TempDir()
	if out, err := exec.Command("mount", "--bind", dir, bind).CombinedOutput(); err != nil {
		t.Fatalf("bind mount: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", bind).Run() })
	shmtest.MakeSegment(t, dir, "nccl-Bind07", 4096, time.Hour)
	shmtest.Start(t, "map", filepath.Join(bind, "nccl-Bind07"))
	shmtest.MakeSegment(t, dir, "nccl-Bind10", 4096, time.Hour)
	shmtest.Start(t, "open", filepath.Join(bind, "nccl-Bind10"))

	// A symlink to a file outside, and another user's orphan.
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(outside, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "nccl-Link08")); err != nil {
		t.Fatal(err)
	}
	theirs := shmtest.MakeSegment(t, dir, "nccl-Othr09", 4096, time.Hour)
	if err := os.Lchown(theirs, 4242, 4242); err != nil {
		t.Fatal(err)
	}

	h := host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
	inv, err := Scan(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]State{
		"nccl-Held01": InUse, "nccl-Mapd02": InUse, "nccl-Bind07": InUse, "nccl-Bind10": InUse,
		"nccl-Orph03": Orphaned, "nccl-Orph04": Orphaned, "nccl-Orph05": Orphaned, "nccl-Reus06": Orphaned, "nccl-Othr09": Orphaned,
		"nccl-Link08": Unknown,
	}
	got := states(inv)
	if len(got) != len(want) {
		t.Errorf("scanned %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s (%s), want %s", k, got[k], segment(t, inv, k).Reason, v)
		}
	}
	via := map[string]string{"nccl-Held01": "fd", "nccl-Mapd02": "map", "nccl-Bind07": "map", "nccl-Bind10": "fd"}
	for name, v := range via {
		s := segment(t, inv, name)
		if len(s.Holders) != 1 || s.Holders[0].Via != v || s.Holders[0].PID <= 1 {
			t.Errorf("%s holders = %+v (want one, via %s)", name, s.Holders, v)
		}
	}
	if s := segment(t, inv, "nccl-Othr09"); !s.OtherUser || s.UID != 4242 {
		t.Errorf("other user's file = %+v", s)
	}
	if s := segment(t, inv, "nccl-Link08"); !s.Symlink || s.LinkTarget != outside {
		t.Errorf("symlink = %+v", s)
	}
	if len(inv.UnreadablePIDs) != 0 {
		t.Errorf("root could not read pids %v", inv.UnreadablePIDs)
	}

	// The check's verdict and evidence.
	fs, err := runSegments(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if !has(fs, checks.Warn, "4 orphaned NCCL segments hold 196 KiB in "+dir+" (left by a crashed job)") ||
		!has(fs, checks.Info, "4 segments in use by 4 running processes") ||
		!has(fs, checks.Info, "Symlink in "+dir+": nccl-Link08 -> "+outside) ||
		!has(fs, checks.Info, "1 orphaned segment of other users holds 4 KiB") {
		t.Errorf("findings:\n%s", titles(fs))
	}
	ev := fs[0].Evidence
	if ev["in_use"] != 4 || ev["orphaned"] != 5 || ev["unknown"] != 1 || ev["reclaimable_own_bytes"] != int64(3*seg+4096) {
		t.Errorf("evidence counts: %v", ev)
	}

	// Right before a removal: one scan for the batch names the holders.
	p, err := ProveBatch(context.Background(), h, inv.Segments)
	if err != nil || p.Blind != "" {
		t.Fatalf("ProveBatch: %v (blind: %q)", err, p.Blind)
	}
	for i, s := range inv.Segments {
		if s.Symlink {
			continue // never judged by holders; cleanup never plans it
		}
		lease := LeaseResult{}
		if s.State == Orphaned {
			lease.Verdict = LeaseFree
		}
		if st, why := p.Judge(i, s, lease, time.Now()); st != s.State {
			t.Errorf("%s: batch proof says %s (%s), the scan %s", s.Name, st, why, s.State)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep me" {
		t.Error("the symlink's target was touched")
	}

	// Before it fills up: the size is known, and the free space is what
	// the segments leave (1 MiB is "full" for NCCL from the start).
	fs, err = runMount(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	ev = fs[0].Evidence
	if ev["size_option"] != "1024k" || ev["size_bytes"] != uint64(1<<20) || ev["fstype"] != "tmpfs" || ev["free_bytes"].(uint64) == 0 {
		t.Errorf("mount evidence %v", ev)
	}
	if has(fs, checks.Error, "is full: 0 B free") {
		t.Errorf("empty space reported as 0 B:\n%s", titles(fs))
	}

	// Fill the tmpfs: shm.mount must call it full.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break // ENOSPC
		}
	}
	f.Close()
	fs, err = runMount(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	full := find(fs, checks.Error, "is full: 0 B free")
	if full == nil || !strings.Contains(strings.Join(full.Fixes, ","), "shm.cleanup") {
		t.Errorf("full tmpfs not reported:\n%s", titles(fs))
	}
	if !has(fs, checks.Error, dir+" is only 1 MiB") {
		t.Errorf("1 MiB tmpfs not called too small:\n%s", titles(fs))
	}
}

// TestRealReadOnlyTmpfs remounts the tmpfs read-only: shm.mount must say so.
func TestRealReadOnlyTmpfs(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "64M")
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only here: %v %s", err, out)
	}
	h := host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
	fs, err := runMount(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if !has(fs, checks.Error, dir+" is mounted read-only") || !has(fs, checks.Warn, dir+" is 64 MiB, the Docker and Kubernetes default") {
		t.Errorf("findings:\n%s", titles(fs))
	}
}

// TestRealNestedPIDNamespace scans from inside a new PID namespace (as in a
// container) a tmpfs that a process outside it holds: that holder is
// invisible, so nothing may be called orphaned there, while the same scan
// from the host proves the holder and the orphan.
func TestRealNestedPIDNamespace(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare(1) from util-linux is needed")
	}
	dir := shmtest.MountTmpfs(t, "8M")
	held := shmtest.MakeSegment(t, dir, "nccl-Out01", 4096, time.Hour)
	shmtest.MakeSegment(t, dir, "nccl-Orph02", 4096, time.Hour)
	shmtest.Start(t, "open", held)

	type result struct {
		States       map[string]State `json:"states"`
		PIDNamespace string           `json:"pid_namespace"`
		Private      bool             `json:"private"`
		Note         string           `json:"note"`
	}
	run := func(t *testing.T, argv ...string) result {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), envScanDir+"="+dir)
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("cannot run %v here: %v %s", argv, err, out)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("scanner said %q: %v", out, err)
		}
		return r
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	onHost := run(t, self, "-test.run=^$")
	if onHost.States["nccl-Out01"] != InUse || onHost.States["nccl-Orph02"] != Orphaned {
		t.Fatalf("from the host: %+v", onHost)
	}
	inside := run(t, "unshare", "--pid", "--fork", "--mount-proc", self, "-test.run=^$")
	if inside.PIDNamespace != "nested" || inside.Private {
		t.Errorf("inside a new PID namespace: %+v", inside)
	}
	// The holder outside is invisible in /proc from inside, but the kernel
	// refuses a lease on its file, and grants one on the orphan.
	if inside.States["nccl-Out01"] != InUse || inside.States["nccl-Orph02"] != Orphaned {
		t.Errorf("inside: %+v", inside.States)
	}
	if !strings.Contains(inside.Note, "PID namespace") {
		t.Errorf("note %q", inside.Note)
	}
}

// TestRealRelativeShmPath: --shm-path given relative to the working
// directory still finds its mount and its holders.
func TestRealRelativeShmPath(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "8M")
	held := shmtest.MakeSegment(t, dir, "nccl-Rel01", 4096, time.Hour)
	shmtest.MakeSegment(t, dir, "nccl-Rel02", 4096, time.Hour)
	shmtest.Start(t, "open", held)
	t.Chdir(filepath.Dir(dir))
	h := host.Local(host.LocalOptions{ShmDir: filepath.Base(dir), NoNVML: true})
	m, err := ReadMount(context.Background(), h)
	if err != nil || m.MountPoint != dir || m.SizeOption != "8192k" {
		t.Errorf("mount = %+v, %v", m, err)
	}
	inv := scan(t, h)
	if got := states(inv); got["nccl-Rel01"] != InUse || got["nccl-Rel02"] != Orphaned || inv.Dir != dir {
		t.Errorf("dir %s, states %v", inv.Dir, got)
	}
}

// TestRealUnlimitedTmpfs: size=0 means no limit (statfs reports 0 blocks),
// which is neither full nor small.
func TestRealUnlimitedTmpfs(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "0")
	h := host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
	fs, err := runMount(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if !has(fs, checks.OK, dir+" is tmpfs with no size limit") {
		t.Errorf("findings:\n%s", titles(fs))
	}
	if e, w := checks.Problems(fs); e+w != 0 {
		t.Errorf("an unlimited tmpfs reported as a problem:\n%s", titles(fs))
	}
}
