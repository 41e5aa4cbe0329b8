package steps

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

	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// The test binary, with these set, plans and applies shm.cleanup on a
// directory and prints the outcome as JSON: the cleanup run as another
// user, in another PID namespace or without CAP_LEASE.
const (
	envCleanupDir      = "NCCLWIZ_STEPS_CLEANUP_DIR"
	envCleanupAllUsers = "NCCLWIZ_STEPS_CLEANUP_ALL_USERS"
)

type cleanupRun struct {
	Planned  bool              `json:"planned"`
	Note     string            `json:"note"`
	Changed  []string          `json:"changed"`
	Skipped  []string          `json:"skipped"`
	Summary  string            `json:"summary"`
	States   map[string]string `json:"states"`
	Reasons  map[string]string `json:"reasons"`
	Private  bool              `json:"all_holders_visible"`
	PIDNS    string            `json:"pid_namespace"`
	ScanNote string            `json:"scan_note"`
}

func cleanupAndPrint(dir string, allUsers bool) int {
	ctx := context.Background()
	h := localHost(dir)
	var r cleanupRun
	inv, err := shm.Scan(ctx, h)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	r.States, r.Reasons = map[string]string{}, map[string]string{}
	for _, s := range inv.Segments {
		r.States[s.Name], r.Reasons[s.Name] = string(s.State), s.Reason
	}
	r.Private, r.PIDNS, r.ScanNote = inv.Private, inv.PIDNamespace, inv.Note
	fs, notes := PlanWith(ctx, h, wantCleanup(), PlanOptions{AllUsers: allUsers})
	r.Note = notes["shm.cleanup"]
	if fx, ok := ByID(fs, "shm.cleanup"); ok {
		r.Planned = true
		out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		r.Changed, r.Skipped, r.Summary = out.Changed, out.Skipped, out.Summary
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

// runCleanup runs the test binary's cleanup on dir through a wrapper
// command (unshare, setpriv …) and decodes what it did.
func runCleanup(t *testing.T, dir string, allUsers bool, wrapper ...string) cleanupRun {
	t.Helper()
	self := shmtest.CopyExecutable(t)
	argv := append(append([]string{}, wrapper...), self, "-test.run=^$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), envCleanupDir+"="+dir)
	if allUsers {
		cmd.Env = append(cmd.Env, envCleanupAllUsers+"=1")
	}
	cmd.Dir = "/"
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("%v: %v %s %s", argv, err, out, msg)
	}
	var r cleanupRun
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("cleanup said %q: %v", out, err)
	}
	return r
}

func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is needed", name)
	}
}

// heldSeg is a segment a live process holds, and how.
type heldSeg struct {
	path, how string
	ino       uint64
	proc      *shmtest.Process
}

// holdHidden makes one segment per way of holding it that /proc/PID/fd and
// maps alone miss (threads, leader exit, bind mount, in flight, ping-pong)
// plus a plain open and a plain mapping, owned by uid (-1: root).
func holdHidden(t *testing.T, dir string, uid int, inFlight bool) []heldSeg {
	t.Helper()
	holder := shmtest.BuildHolder(t)
	var out []heldSeg
	add := func(how string, start func(p string) *shmtest.Process) {
		p := shmtest.MakeSegment(t, dir, fmt.Sprintf("nccl-H%02d-%s", len(out), strings.ReplaceAll(how, " ", "_")), 4096, time.Hour)
		if uid >= 0 {
			if err := os.Chown(p, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, heldSeg{path: p, how: how, ino: inode(t, p), proc: start(p)})
	}
	c := func(mode string) func(p string) *shmtest.Process {
		return func(p string) *shmtest.Process { return shmtest.StartCmd(t, exec.Command(holder, mode, p)) }
	}
	add("open", func(p string) *shmtest.Process { return shmtest.Start(t, "open", p) })
	add("map", func(p string) *shmtest.Process { return shmtest.Start(t, "map", p) })
	add("leader-map", c("leader-map"))
	add("leader-fd", c("leader-fd"))
	add("thread-files", c("thread-files"))
	add("bind", func(p string) *shmtest.Process { return shmtest.StartThroughBind(t, "map", p) })
	if inFlight {
		add("scm-inflight", c("scm-inflight"))
		add("scm-pingpong", c("scm-pingpong"))
	}
	return out
}

// checkHeld fails the test for any held segment that was removed or
// replaced, and asks every holder whether its file survived.
func checkHeld(t *testing.T, held []heldSeg) {
	t.Helper()
	for _, hs := range held {
		if !exists(hs.path) || inode(t, hs.path) != hs.ino {
			t.Errorf("REMOVED WHILE HELD (%s): %s", hs.how, hs.path)
		}
	}
}

// wantInUse fails the test for any held segment that the cleanup run r
// (from where) did not judge in use.
func wantInUse(t *testing.T, r cleanupRun, held []heldSeg, where string) {
	t.Helper()
	for _, hs := range held {
		if st := r.States[filepath.Base(hs.path)]; st != string(shm.InUse) {
			t.Errorf("%s (%s) judged %s %s", filepath.Base(hs.path), hs.how, st, where)
		}
	}
}

// noneMovedAside fails the test for any file the cleanup moved aside to
// remove (nccl-ncclwiz-rm-*) and left in dir.
func noneMovedAside(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "nccl-ncclwiz-rm-") {
			t.Errorf("left moved aside: %s", e.Name())
		}
	}
}

func finishHolders(t *testing.T, held []heldSeg) {
	t.Helper()
	for _, hs := range held {
		if last, err := hs.proc.Result(); err != nil || last != "ok" {
			t.Errorf("holder (%s): %q %v", hs.how, last, err)
		}
	}
}

// TestCleanupKeepsHiddenHolders (issue 14 items 1, 4, 5): segments held by
// a thread after the leader's pthread_exit (mapped, and open), by a thread
// with its own file table, through a bind mount of the file, or only in a
// socket's queue survive the cleanup, which removes the orphans beside them.
func TestCleanupKeepsHiddenHolders(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "16M")
	held := holdHidden(t, dir, -1, true)
	orphan := shmtest.MakeSegment(t, dir, "nccl-Orph01", 4096, time.Hour)
	ctx := context.Background()
	h := localHost(dir)
	fx, ok := ByID(Plan(ctx, h, wantCleanup()), "shm.cleanup")
	if !ok {
		t.Fatal("the orphan was not planned")
	}
	preview := strings.Join(fx.Preview(), "\n")
	for _, hs := range held {
		if strings.Contains(preview, filepath.Base(hs.path)) {
			t.Errorf("the preview plans a held segment (%s): %s", hs.how, preview)
		}
	}
	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil {
		t.Fatal(err)
	}
	if exists(orphan) || len(out.Changed) != 1 {
		t.Errorf("the orphan: %+v", out)
	}
	checkHeld(t, held)
	finishHolders(t, held)
}

// TestCleanupInNestedPIDNamespace (item 2): `unshare -p -f -i --mount-proc
// ncclwiz fix` beside holders outside, on a tmpfs named "shm" like a
// container's own (which was taken as proof that nobody outside uses it).
// From inside, /proc shows none of the holders and the scan no longer
// claims to see every one; the kernel lease still keeps each held file and
// removes the orphan.
func TestCleanupInNestedPIDNamespace(t *testing.T) {
	needTool(t, "unshare")
	dir := shmtest.MountShm(t, "16M") // named like a container's own /dev/shm
	held := holdHidden(t, dir, -1, false)
	orphan := shmtest.MakeSegment(t, dir, "nccl-Orph01", 4096, time.Hour)
	r := runCleanup(t, dir, false, "unshare", "--pid", "--fork", "--ipc", "--mount-proc")
	if r.Private || r.PIDNS != "nested" {
		t.Errorf("from a nested PID namespace: all_holders_visible=%v pid_namespace=%s", r.Private, r.PIDNS)
	}
	wantInUse(t, r, held, "from inside")
	if exists(orphan) {
		t.Errorf("the orphan was not removed: %+v", r)
	}
	checkHeld(t, held)
	finishHolders(t, held)

	// Without the lease (CAP_LEASE dropped, other users' files) the scan
	// alone cannot prove anything from there: the cleanup refuses.
	needTool(t, "setpriv")
	theirs := shmtest.MakeSegment(t, dir, "nccl-Othr02", 4096, time.Hour)
	if err := os.Chown(theirs, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	r = runCleanup(t, dir, true, "unshare", "--pid", "--fork", "--mount-proc", "setpriv", "--bounding-set", "-lease", "--inh-caps", "-lease", "--")
	if !exists(theirs) || r.States["nccl-Othr02"] != string(shm.Unknown) {
		t.Errorf("without a lease, from a nested namespace: %+v", r)
	}
}

// TestCleanupAsNobody (item 3): as nobody, a 0600 nobody-owned segment
// that a root process has open is kept (the kernel refuses the lease; the
// unreadable root processes are no proof either way), and nobody's orphan
// is removed.
func TestCleanupAsNobody(t *testing.T) {
	needTool(t, "setpriv")
	dir := shmtest.MountTmpfs(t, "16M")
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil { // t.TempDir's parent is 0700
		t.Fatal(err)
	}
	const nobody = 65534
	held := holdHidden(t, dir, nobody, true) // root processes hold nobody's files
	orphan := shmtest.MakeSegment(t, dir, "nccl-Orph01", 4096, time.Hour)
	if err := os.Chown(orphan, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	r := runCleanup(t, dir, false, "setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", "--")
	wantInUse(t, r, held, "as nobody")
	if exists(orphan) {
		t.Errorf("nobody's orphan was not removed: %+v", r)
	}
	checkHeld(t, held)
	finishHolders(t, held)
}

// TestCleanupWithoutLease: as root with CAP_LEASE dropped, other users'
// files cannot be leased; the cleanup falls back to the /proc proof, which
// it may use only because it sees every process and thread (root, the
// initial PID namespace). Thread, leader-exit and bind-mount holders are
// found there and kept; the orphan is removed and no file is left moved
// aside. (A descriptor only in flight is invisible to any /proc scan: only
// the lease sees it, so this fallback cannot, and the test does not
// pretend it can.)
func TestCleanupWithoutLease(t *testing.T) {
	needTool(t, "setpriv")
	dir := shmtest.MountTmpfs(t, "16M")
	if l, err := os.Readlink("/proc/self/ns/pid"); err != nil || l != "pid:[4026531836]" {
		t.Skipf("not in the initial PID namespace (%s): the /proc proof cannot see every process here", l)
	}
	held := holdHidden(t, dir, 4242, false)
	orphan := shmtest.MakeSegment(t, dir, "nccl-Orph01", 4096, time.Hour)
	if err := os.Chown(orphan, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	r := runCleanup(t, dir, true, "setpriv", "--bounding-set", "-lease", "--inh-caps", "-lease", "--")
	if exists(orphan) || !strings.Contains(r.Reasons["nccl-Orph01"], "every process and thread inspected") {
		t.Errorf("the orphan was not removed by the /proc proof: %+v", r)
	}
	checkHeld(t, held)
	finishHolders(t, held)
	noneMovedAside(t, dir)
}

// makeEmptyOrphans creates n empty, hour-old segments quickly.
func makeEmptyOrphans(t testing.TB, dir, prefix string, n int) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("%s%06d", prefix, i))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCleanupInterrupted: a cancelled context (Ctrl-C in fix) stops the
// cleanup between files: the outcome says so, counts exactly what was
// removed, every other file is untouched, and nothing is left renamed.
func TestCleanupInterrupted(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "64M")
	const n = 2*proofBatch + 100
	makeEmptyOrphans(t, dir, "nccl-cut-", n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := localHost(dir)
	fx, ok := ByID(Plan(ctx, h, wantCleanup()), "shm.cleanup")
	if !ok {
		t.Fatal("not planned")
	}
	var progress []string
	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true, Progress: func(s string) {
		progress = append(progress, s)
		cancel() // Ctrl-C as the first batch is reported
	}})
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	left := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "nccl-ncclwiz-rm-") {
			t.Errorf("left renamed: %s", e.Name())
		}
		left++
	}
	removed := out.After["segments_removed"].(int)
	if removed != proofBatch || removed+left != n || out.After["interrupted"] != true {
		t.Errorf("removed %d, %d left of %d: %+v", removed, left, n, out.After)
	}
	want := "interrupted: removed " + units.Count(proofBatch, "segment")
	if !strings.HasPrefix(out.Summary, want) || !strings.Contains(out.Summary, "the other "+units.Digits(n-proofBatch)+" of "+units.Count(n, "file")+" were not touched") {
		t.Errorf("summary %q", out.Summary)
	}
	if len(progress) != 1 || !strings.HasPrefix(progress[0], "proved "+units.Digits(proofBatch)+" of "+units.Count(n, "file")) {
		t.Errorf("progress %q", progress)
	}
	if len(out.Changed) != changedListed+1 || !strings.Contains(out.Changed[changedListed], "more removed") {
		t.Errorf("changed lists %d lines", len(out.Changed))
	}
}

// exportCleanup plans shm.cleanup on dir now and writes it as a script
// that anyone may run.
func exportCleanup(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	h := localHost(dir)
	fx, ok := ByID(Plan(ctx, h, wantCleanup()), "shm.cleanup")
	if !ok {
		t.Fatal("shm.cleanup not planned")
	}
	var buf strings.Builder
	if err := ExportScriptWith(&buf, h, []Fix{fx}, wantCleanup(), ExportOptions{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	shellcheck(t, buf.String())
	p := filepath.Join(shmtest.PublicDir(t), "fix.sh")
	if err := os.WriteFile(p, []byte(buf.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExportedScriptHiddenHolders (items 1-5 for the exported script): the
// plan is made while nothing holds the files; then processes hold them the
// ways /proc/PID/fd and maps alone miss (a thread after the leader exited,
// a thread's own file table, a bind mount under another name, a descriptor
// only in flight). With perl the script proves each file with the kernel
// lease, held across the unlink: it keeps every held file and removes the
// orphan, even from a nested PID namespace. Without perl (a stub that
// fails) only its /proc proof is left: as root on the host it still finds
// the thread and bind-mount holders; from a nested PID namespace or as
// nobody it cannot see every process and refuses even the orphan.
func TestExportedScriptHiddenHolders(t *testing.T) {
	needTool(t, "bash")
	holder := shmtest.BuildHolder(t)
	noPerl := shmtest.PublicDir(t)
	if err := os.WriteFile(filepath.Join(noPerl, "perl"), []byte("#!/bin/sh\nexit 127\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	nested := []string{"unshare", "--pid", "--fork", "--mount-proc"}
	nobody := []string{"setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", "--"}
	for _, tc := range []struct {
		name     string
		wrapper  []string
		perl     bool
		inFlight bool   // only the lease sees it
		refuse   string // the orphan is kept, saying this
	}{
		{"root, perl", nil, true, true, ""},
		{"nested PID namespace, perl", nested, true, true, ""},
		{"root, no perl", nil, false, false, ""},
		{"nested PID namespace, no perl", nested, false, false, "not in the initial PID namespace"},
		{"nobody, no perl", nobody, false, false, "only root can inspect every process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.wrapper) > 0 {
				needTool(t, tc.wrapper[0])
			}
			if tc.perl {
				needTool(t, "perl")
			}
			dir := shmtest.MountTmpfs(t, "16M")
			if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
				t.Fatal(err)
			}
			ways := []string{"leader-map", "leader-fd", "thread-files", "bind", "open"}
			if tc.inFlight {
				ways = append(ways, "scm-inflight")
			}
			var paths []string
			for i, w := range ways {
				paths = append(paths, shmtest.MakeSegment(t, dir, fmt.Sprintf("nccl-S%02d-%s", i, w), 4096, time.Hour))
			}
			orphan := shmtest.MakeSegment(t, dir, "nccl-Orph01", 4096, time.Hour)
			script := exportCleanup(t, dir)
			var held []heldSeg
			for i, w := range ways {
				var p *shmtest.Process
				switch w {
				case "bind":
					p = shmtest.StartThroughBind(t, "map", paths[i])
				case "open":
					p = shmtest.Start(t, "open", paths[i])
				default:
					p = shmtest.StartCmd(t, exec.Command(holder, w, paths[i]))
				}
				held = append(held, heldSeg{path: paths[i], how: w, ino: inode(t, paths[i]), proc: p})
			}
			argv := append(append([]string{}, tc.wrapper...), "bash", script, "--apply")
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = "/"
			cmd.Env = os.Environ()
			if !tc.perl {
				cmd.Env = append(cmd.Env, "PATH="+noPerl+":"+os.Getenv("PATH"))
			}
			b, _ := cmd.CombinedOutput() // kept files are not failures
			out := string(b)
			switch {
			case tc.refuse != "":
				if !exists(orphan) || !strings.Contains(out, "kept "+orphan+": ") || !strings.Contains(out, tc.refuse) {
					t.Errorf("the script did not refuse the orphan:\n%s", out)
				}
			case exists(orphan):
				t.Errorf("the orphan survived:\n%s", out)
			}
			for _, hs := range held {
				if !strings.Contains(out, "kept "+hs.path+": ") {
					t.Errorf("%s (%s) not reported kept:\n%s", hs.path, hs.how, out)
				}
			}
			if tc.perl && !strings.Contains(out, "kernel lease") {
				t.Errorf("perl was there, yet no kernel lease:\n%s", out)
			}
			checkHeld(t, held)
			finishHolders(t, held)
			noneMovedAside(t, dir)
		})
	}
}

// TestCleanupPingPongForced (item 5): a descriptor passed back and forth
// over a UNIX socket is, most of the time, held by no process at all (only
// by a socket queue). Handed to the apply step directly, as if an earlier
// scan had called it orphaned, it is kept every time by the lease taken
// right before the unlink (before: removed in 2 of 200 cleanups).
func TestCleanupPingPongForced(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "8M")
	holder := shmtest.BuildHolder(t)
	p := shmtest.MakeSegment(t, dir, "nccl-Ping01", 4096, time.Hour)
	ino := inode(t, p)
	ctx := context.Background()
	h := localHost(dir)
	inv, err := shm.Scan(ctx, h)
	if err != nil || len(inv.Segments) != 1 || inv.Segments[0].State != shm.Orphaned {
		t.Fatalf("before the holder: %+v %v", inv, err)
	}
	seg := inv.Segments[0]
	pr := shmtest.StartCmd(t, exec.Command(holder, "scm-pingpong", p))
	kept := 0
	for range 200 {
		out, err := applyCleanup(ctx, h, []shm.Segment{seg}, ApplyOptions{Yes: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Changed) != 0 || !exists(p) || inode(t, p) != ino {
			t.Fatalf("REMOVED WHILE IN FLIGHT: %+v", out)
		}
		if strings.Contains(strings.Join(out.Skipped, ""), "exclusive lease") {
			kept++
		}
	}
	t.Logf("kept 200 of 200 times, %d of them by the lease alone (no process held it at that moment)", kept)
	if last, err := pr.Result(); err != nil || last != "ok" {
		t.Errorf("ping-pong: %q %v", last, err)
	}
}
