package steps

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/shellquote"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
	"github.com/ncclwiz/ncclwiz/steps/fstab"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envCleanupDir); dir != "" {
		os.Exit(cleanupAndPrint(dir, os.Getenv(envCleanupAllUsers) != ""))
	}
	shmtest.Main()
	os.Exit(m.Run())
}

func localHost(dir string) *host.Host {
	return host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// realTree builds the tmpfs every cleanup test starts from.
type realTree struct {
	dir                         string
	orphans                     []string
	held, mapped, link, target  string
	other, hostile, hard, young string
	holders                     []*shmtest.Process
}

// newRealTree fills a fresh tmpfs. With extras it adds a hard-linked file
// and a name with control bytes: cleanup leaves both alone, but
// shm.segments counts them as orphans, so the verdict cannot pass then.
func newRealTree(t *testing.T, size string, extras bool) *realTree {
	dir := shmtest.MountTmpfs(t, size)
	r := &realTree{dir: dir}
	for _, n := range []string{"nccl-Orph01", "nccl-it's q", "nccl-$(touch PWNED)", "nccl-*", "torch_1234_5678"} {
		r.orphans = append(r.orphans, shmtest.MakeSegment(t, dir, n, 64<<10, time.Hour))
	}
	r.held = shmtest.MakeSegment(t, dir, "nccl-Held04", 64<<10, time.Hour)
	r.mapped = shmtest.MakeSegment(t, dir, "nccl-Mapd05", 64<<10, time.Hour)
	r.holders = append(r.holders, shmtest.Start(t, "open", r.held), shmtest.Start(t, "map", r.mapped))
	r.target = filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(r.target, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.link = filepath.Join(dir, "nccl-Link06")
	if err := os.Symlink(r.target, r.link); err != nil {
		t.Fatal(err)
	}
	r.other = shmtest.MakeSegment(t, dir, "nccl-Othr07", 64<<10, time.Hour)
	if err := os.Chown(r.other, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	if extras {
		r.hostile = shmtest.MakeSegment(t, dir, "nccl-esc\x1b[31m\nx", 64<<10, time.Hour)
		r.hard = shmtest.MakeSegment(t, dir, "nccl-Hard08", 64<<10, time.Hour)
		if err := os.Link(r.hard, filepath.Join(dir, "keep-hard")); err != nil {
			t.Fatal(err)
		}
	}
	r.young = shmtest.MakeSegment(t, dir, "nccl-Young9", 64<<10, 0)
	return r
}

// kept lists every file cleanup must leave alone.
func (r *realTree) kept() []string {
	out := []string{r.held, r.mapped, r.link, r.target, r.other, r.young}
	if r.hard != "" {
		out = append(out, r.hostile, r.hard)
	}
	return out
}

func wantCleanup() []checks.Finding {
	return []checks.Finding{{Check: "shm.segments", Severity: checks.Warn, Title: "orphans", Fixes: []string{"shm.cleanup"}}}
}

// A real tmpfs with orphans (hostile names included), a segment held open
// and one mapped by live processes, a symlink to a file outside, another
// user's orphan, a hard-linked file, a young file and a name with control
// bytes: shm.cleanup removes exactly the user's orphans, the symlink's
// target survives, and the re-check passes.
func TestCleanupOnRealTmpfs(t *testing.T) {
	for _, extras := range []bool{false, true} {
		t.Run(fmt.Sprintf("extras=%v", extras), func(t *testing.T) { testCleanupOnRealTmpfs(t, extras) })
	}
}

func testCleanupOnRealTmpfs(t *testing.T, extras bool) {
	r := newRealTree(t, "64M", extras)
	ctx := context.Background()
	h := localHost(r.dir)
	fx, ok := ByID(Plan(ctx, h, wantCleanup()), "shm.cleanup")
	if !ok {
		t.Fatal("shm.cleanup not planned")
	}
	preview := strings.Join(fx.Preview(), "\n")
	for _, p := range r.orphans {
		if !strings.Contains(preview, shellquote.Quote(p)) {
			t.Errorf("preview lacks %s:\n%s", shellquote.Quote(p), preview)
		}
	}
	for _, p := range r.kept() {
		if strings.Contains(preview, filepath.Base(p)) {
			t.Errorf("preview would touch %q:\n%s", p, preview)
		}
	}
	if fx.NeedsRoot {
		t.Error("own files only, yet it needs root")
	}
	warn := strings.Join(fx.Warnings, "\n")
	for _, w := range []string{"nccl-Link06: a symlink to " + r.target, "owned by uid 12345", `control bytes`, "hard links", "nccl-Young9"} {
		if !extras && (w == "control bytes" || w == "hard links") {
			continue
		}
		if !strings.Contains(warn, w) {
			t.Errorf("warnings lack %q:\n%s", w, warn)
		}
	}
	if strings.ContainsAny(warn, "\x1b\n") && strings.Contains(warn, "\x1b") {
		t.Error("a warning carries a raw escape byte")
	}

	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.orphans {
		if exists(p) {
			t.Errorf("orphan %q survived", p)
		}
	}
	for _, p := range r.kept() {
		if !exists(p) {
			t.Errorf("%q was removed", p)
		}
	}
	if b, _ := os.ReadFile(r.target); string(b) != "keep me" {
		t.Error("the symlink's target changed")
	}
	if exists("PWNED") || exists(filepath.Join(r.dir, "PWNED")) {
		t.Error("a file name was executed")
	}
	if len(out.Changed) != len(r.orphans) {
		t.Errorf("outcome %+v", out)
	}
	// shm.segments counts the hard-linked and control-byte files as
	// orphans that cleanup deliberately keeps, so only without them is the
	// re-check clean.
	if want := map[bool]string{false: VerdictPassed, true: VerdictFailed}[extras]; out.Verdict != want {
		t.Errorf("verdict %s, want %s: %+v", out.Verdict, want, out.Remaining)
	}
	if before, after := out.Before["used_bytes"].(uint64), out.After["used_bytes"].(uint64); after >= before {
		t.Errorf("used bytes %d -> %d", before, after)
	}
	for _, p := range r.holders {
		if p.Cmd.ProcessState != nil {
			t.Error("a holder died")
		}
	}
	// No quarantine file is left behind.
	noneMovedAside(t, r.dir)

	// As root, --all-users adds the other user's orphan, listed apart and
	// marked as needing root.
	fs, _ := PlanWith(ctx, h, wantCleanup(), PlanOptions{AllUsers: true})
	fx, ok = ByID(fs, "shm.cleanup")
	if !ok || !fx.NeedsRoot || !strings.Contains(strings.Join(fx.Preview(), "\n"), "nccl-Othr07") {
		t.Fatalf("all users: %+v", fx)
	}
	if _, err := fx.Apply(ctx, h, ApplyOptions{Yes: true}); err != nil || exists(r.other) {
		t.Errorf("other user's orphan: %v, exists %v", err, exists(r.other))
	}
}

// Processes keep creating, mapping and removing segments while cleanup is
// planned and applied again and again, beside segments held the ways
// /proc/PID/fd and maps alone miss (a thread after the leader exited, a
// thread's own file table, a bind mount, a descriptor in flight, one passed
// back and forth over a socket): no segment a process holds is ever
// removed (each child checks its own files and mappings, and every round
// checks the hidden ones), while the real orphans are.
func TestCleanupChurn(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "16M")
	ctx := context.Background()
	var procs []*shmtest.Process
	for i := 0; i < 3; i++ {
		procs = append(procs, shmtest.Start(t, "churn", dir))
	}
	held := holdHidden(t, dir, -1, true)
	h := localHost(dir)
	removed, rounds := 0, 0
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) || rounds < 20 {
		orphan := shmtest.MakeSegment(t, dir, fmt.Sprintf("nccl-orph-%d", rounds), 4096, time.Hour)
		fx, ok := ByID(Plan(ctx, h, wantCleanup()), "shm.cleanup")
		if !ok {
			t.Fatal("the new orphan was not planned")
		}
		out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
		if err != nil {
			t.Fatal(err)
		}
		removed += len(out.Changed)
		if exists(orphan) && !strings.Contains(strings.Join(out.Skipped, ""), filepath.Base(orphan)) {
			t.Errorf("orphan %s neither removed nor explained", orphan)
		}
		checkHeld(t, held)
		rounds++
	}
	for i, p := range procs {
		last, err := p.Result()
		if err != nil || !strings.HasPrefix(last, "ok ") {
			t.Errorf("churn process %d: %q %v", i, last, err)
		}
	}
	finishHolders(t, held)
	if removed < rounds/2 {
		t.Errorf("removed %d orphans in %d rounds", removed, rounds)
	}
	t.Logf("%d rounds, %d orphans removed, no held segment touched", rounds, removed)
}

// The last guard: a file opened between the proof and the unlink is put
// back under its name, and a planned file swapped for a symlink or another
// file is left alone.
func TestCleanupGuards(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "16M")
	ctx := context.Background()
	h := localHost(dir)

	held := shmtest.MakeSegment(t, dir, "nccl-late01", 4096, time.Hour)
	ino := inode(t, held)
	shmtest.Start(t, "map", held)
	inv, err := shm.Scan(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	var seg shm.Segment
	for _, s := range inv.Segments {
		if s.Name == "nccl-late01" {
			seg = s
		}
	}
	// As if the process had mapped it just after the plan: the batch scan
	// names it, and the kernel would refuse the lease anyway.
	out, err := applyCleanup(ctx, h, []shm.Segment{seg}, ApplyOptions{Yes: true})
	if err != nil || len(out.Changed) != 0 || !strings.Contains(strings.Join(out.Skipped, ""), "now in use by pid") {
		t.Errorf("cleanup of a mapped file: %+v %v", out, err)
	}
	if !exists(held) || inode(t, held) != ino {
		t.Error("the mapped file is not there under its name")
	}

	a := shmtest.MakeSegment(t, dir, "nccl-swap01", 4096, time.Hour)
	b := shmtest.MakeSegment(t, dir, "nccl-swap02", 4096, time.Hour)
	fx, ok := ByID(Plan(ctx, h, wantCleanup()), "shm.cleanup")
	if !ok {
		t.Fatal("not planned")
	}
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, a); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	shmtest.MakeSegment(t, dir, "nccl-swap02", 4096, time.Hour)
	out, err = fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Changed) != 0 || !exists(a) || !exists(b) || !exists(target) {
		t.Errorf("swapped files touched: %+v", out)
	}
	if fi, _ := os.Lstat(a); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced")
	}
}

// Remount of a real 1 MiB tmpfs through the fix; shm.mount sees the new
// size; a dry run before changes nothing; a second apply has nothing to do.
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
	if dry, err := fx.Apply(ctx, h, ApplyOptions{DryRun: true}); err != nil || dry.Verdict != VerdictDryRun {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if m, _ := shm.ReadMount(ctx, h); m.Total != before.Total {
		t.Fatal("the dry run remounted")
	}
	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := shm.ReadMount(ctx, h)
	want, _ := RecommendSize(h, before.Total)
	if after.Total != want || after.Total <= before.Total {
		t.Errorf("size %d -> %d, want %d", before.Total, after.Total, want)
	}
	var seen uint64
	for _, r := range out.Recheck {
		for _, f := range r.Findings {
			if v, ok := f.Evidence["size_bytes"].(uint64); ok && r.ID == "shm.mount" {
				seen = v
			}
		}
	}
	if seen != after.Total || out.Verdict != VerdictPassed {
		t.Errorf("re-check saw %d bytes, verdict %s: %+v", seen, out.Verdict, out.Remaining)
	}
	if after.ReadOnly || strings.Join(after.Options, ",") != strings.Join(before.Options, ",") || after.Mode != before.Mode {
		t.Errorf("other options changed: %v %v -> %v %v", before.Options, before.Mode, after.Options, after.Mode)
	}
	again, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil || len(again.Changed) != 0 || !strings.Contains(again.Summary, "already") {
		t.Errorf("second remount: %+v %v", again, err)
	}
}

// startStaleRank starts a process that looks like a rank whose launcher
// died: RANK and torchrun's TORCHELASTIC_RUN_ID in its environment,
// re-parented to PID 1 (the machine's init), idle. Tests judge it with the
// host's clock ten minutes ahead, so that it is old enough.
func startStaleRank(t *testing.T) int {
	t.Helper()
	// A real Python process (proc.stale wants positive evidence of a rank).
	return startOrphan(t, "TORCHELASTIC_RUN_ID=", "RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 TORCHELASTIC_RUN_ID=ncclwiz-test exec /usr/bin/python3 -c 'import time; time.sleep(600)'")
}

// startOrphan runs the shell command line in the background of a setsid
// bash that exits at once, so that the command is re-parented to PID 1,
// and returns its PID once it has exec'd with marker in its environment.
// Its whole process group (setsid made one) is killed when the test ends:
// a command that is a bash waiting for a child would leave the child
// behind as a "rank".
func startOrphan(t *testing.T, marker, command string) int {
	t.Helper()
	cmd := exec.Command("setsid", "bash", "-c", command+" </dev/null >/dev/null 2>&1 & echo $!")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("start orphan: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	waitLeftover(t, pid, marker)
	return pid
}

// waitLeftover waits until pid is re-parented to PID 1 and has exec'd the
// command whose environment carries marker: the background subshell is
// re-parented before its exec under load, and until then it is no rank.
func waitLeftover(t *testing.T, pid int, marker string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		st, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		env, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err1 == nil && err2 == nil && strings.Contains(string(st), "\nPPid:\t1\n") && strings.Contains(string(env), marker) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Skip("the test process could not be re-parented to PID 1 here")
}

// targetsOf returns proc.stale's targets that are pid: never any other
// process of the machine.
func targetsOf(ctx context.Context, t *testing.T, h *host.Host, pid int) []rank {
	t.Helper()
	targets, _, err := staleTargets(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	var mine []rank
	for _, tg := range targets {
		if tg.PID == pid {
			mine = append(mine, tg)
		}
	}
	return mine
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// The exported script, end to end on a real tmpfs: shellcheck-clean; a dry
// run changes nothing; --apply removes exactly the orphans (hostile names
// included, the glob-named one without globbing), grows the tmpfs, edits
// fstab with a backup, writes the drop-ins and restarts logind (a stub),
// ends the stale rank by PID; a second --apply changes nothing.
func TestExportedScriptOnRealTmpfs(t *testing.T) {
	r := newRealTree(t, "1M", true)
	ctx := context.Background()
	h := localHost(r.dir)
	h.Clock = func() time.Time { return time.Now().Add(10 * time.Minute) }
	rankPID := startStaleRank(t)
	etc := t.TempDir()
	const fstabBase = "# test fstab\nUUID=abcd / ext4 defaults 0 1\n"
	if err := os.WriteFile(filepath.Join(etc, "fstab"), []byte(fstabBase), 0o640); err != nil {
		t.Fatal(err)
	}

	var plan []Fix
	cl, ok := ByID(Plan(ctx, h, wantCleanup()), "shm.cleanup")
	if !ok {
		t.Fatal("cleanup not planned")
	}
	plan = append(plan, cl)
	mine := targetsOf(ctx, t, h, rankPID)
	if len(mine) != 1 {
		t.Fatalf("the stale rank %d was not found: %+v", rankPID, mine)
	}
	plan = append(plan, *staleFix(h, mine, nil))
	rm, ok := ByID(PlanFor(ctx, h, nil, []string{"shm.remount"}), "shm.remount")
	if !ok || rm.Impossible != "" {
		t.Skipf("remount not possible here: %+v", rm)
	}
	plan = append(plan, rm)
	m, _ := shm.ReadMount(ctx, h)
	size, why := RecommendSize(h, m.Total)
	_, ch, perr := fstab.SetOption([]byte(fstabBase), m.Path, "size", sizeOption(size), keptOptions(m))
	plan = append(plan, *persistFix(m, size, why, ch, perr))
	req := &request{findings: map[string][]checks.Finding{}, want: map[string]bool{}, notes: map[string]string{}}
	plan = append(plan, *planDropIn(&host.Host{Root: etc}, req, removeIPCDropIn, "removeipc", "s", "shm-removeipc", nil),
		*planDropIn(&host.Host{Root: etc}, req, memlockDropIn, "memlock", "s", "memlock", nil))

	var buf bytes.Buffer
	if err := ExportScriptWith(&buf, h, plan, wantCleanup(), ExportOptions{Version: "test", EtcDir: etc}); err != nil {
		t.Fatal(err)
	}
	script := buf.String()
	shellcheck(t, script)
	checkScriptSafety(t, script)
	for _, l := range strings.Split(script, "\n") {
		if strings.Contains(l, "esc") && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			t.Errorf("the control-byte name reached a command: %q", l)
		}
	}
	path := filepath.Join(t.TempDir(), "fix.sh")
	if err := os.WriteFile(path, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	sysLog := filepath.Join(t.TempDir(), "systemctl.log")
	stub := "#!/bin/sh\necho \"$*\" >> " + shellquote.Quote(sysLog) + "\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("bash", append([]string{path}, args...)...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash fix.sh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	snapshot := func() string {
		var b strings.Builder
		ents, _ := os.ReadDir(r.dir)
		for _, e := range ents {
			b.WriteString(e.Name() + "\n")
		}
		st, _ := h.Statfs(r.dir)
		fs, _ := os.ReadFile(filepath.Join(etc, "fstab"))
		etcEnts, _ := filepath.Glob(filepath.Join(etc, "*"))
		fmt.Fprintf(&b, "%d\n%s\n%v\n%v\n", st.Total(), fs, etcEnts, alive(rankPID))
		return b.String()
	}

	before := snapshot()
	out := run()
	if after := snapshot(); after != before {
		t.Errorf("the dry run changed something:\n%s\n---\n%s\n%s", before, after, out)
	}
	for _, want := range []string{"would run: rm -- '" + r.orphans[3] + "'", "would run: mount -o remount,size=", "would run: kill -TERM " + strconv.Itoa(rankPID),
		"would write " + etc + "/systemd/logind.conf.d/90-ncclwiz-removeipc.conf", "would change " + etc + "/fstab", "dry run: nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}

	out = run("--apply")
	for _, p := range r.orphans {
		if exists(p) {
			t.Errorf("orphan %q survived --apply:\n%s", p, out)
		}
	}
	for _, p := range r.kept() {
		if !exists(p) {
			t.Errorf("%q was removed:\n%s", p, out)
		}
	}
	if exists(filepath.Join(work, "PWNED")) {
		t.Error("a file name was executed")
	}
	if st, _ := h.Statfs(r.dir); st.Total() != size {
		t.Errorf("tmpfs is %d bytes, want %d:\n%s", st.Total(), size, out)
	}
	fsb, _ := os.ReadFile(filepath.Join(etc, "fstab"))
	if want := fmt.Sprintf("tmpfs %s tmpfs rw,nosuid,nodev,size=%s 0 0\n", r.dir, sizeOption(size)); !strings.HasPrefix(string(fsb), fstabBase) || !strings.HasSuffix(string(fsb), want) {
		t.Errorf("fstab:\n%s", fsb)
	}
	if fi, _ := os.Stat(filepath.Join(etc, "fstab")); fi.Mode().Perm() != 0o640 {
		t.Errorf("fstab mode %v", fi.Mode().Perm())
	}
	if baks, _ := filepath.Glob(filepath.Join(etc, "fstab.ncclwiz-*.bak")); len(baks) != 1 {
		t.Errorf("fstab backups: %v", baks)
	}
	for _, d := range []dropIn{removeIPCDropIn, memlockDropIn} {
		b, err := os.ReadFile(filepath.Join(etc, strings.TrimPrefix(d.path, "/etc")))
		if err != nil || string(b) != d.content {
			t.Errorf("%s: %q %v", d.path, b, err)
		}
	}
	if b, _ := os.ReadFile(sysLog); string(b) != "restart systemd-logind\n" {
		t.Errorf("systemctl calls: %q", b)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(rankPID) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(rankPID) {
		t.Errorf("stale rank %d still running:\n%s", rankPID, out)
	}
	if !strings.Contains(out, "done: ") || strings.Contains(out, "failed") {
		t.Errorf("apply output:\n%s", out)
	}

	// Again: nothing left to do.
	mid := snapshot()
	out = run("--apply")
	if snapshot() != mid || !strings.Contains(out, "done: 0 change(s), 0 failure(s)") || strings.Contains(out, "  + ") {
		t.Errorf("the second --apply changed something:\n%s", out)
	}
	if b, _ := os.ReadFile(sysLog); string(b) != "restart systemd-logind\n" {
		t.Errorf("logind restarted again: %q", b)
	}
}
