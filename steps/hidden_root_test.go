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
	// envExportDir: print the shm.cleanup script for the directory (as
	// whoever runs the test binary).
	envExportDir = "NCCLWIZ_STEPS_EXPORT_DIR"
)

func exportAndPrint(dir string) int {
	ctx := context.Background()
	h := localHost(dir)
	fx, ok := ByID(Plan(ctx, h, wantCleanup()), "shm.cleanup")
	if !ok {
		fmt.Fprintln(os.Stderr, "shm.cleanup not planned")
		return 1
	}
	if err := ExportScriptWith(os.Stdout, h, []Fix{fx}, wantCleanup(), ExportOptions{Version: "test"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// exportCleanupAs plans and exports shm.cleanup as the user the wrapper
// (setpriv …) makes, and returns the script's path.
func exportCleanupAs(t *testing.T, dir string, wrapper ...string) string {
	t.Helper()
	self := shmtest.CopyExecutable(t)
	argv := append(append([]string{}, wrapper...), self, "-test.run=^$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), envExportDir+"="+dir)
	cmd.Dir = "/"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("export as %v: %v", wrapper, err)
	}
	p := filepath.Join(shmtest.PublicDir(t), "fix.sh")
	if err := os.WriteFile(p, out, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

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

// holderLayouts are the ways a live process can hold a segment: the plain
// ones, those /proc/PID/fd and maps alone miss (threads, leader exit, bind
// mount) and those no /proc file shows at all (a descriptor in flight, one
// passed back and forth, an io_uring registered file, a loop device's
// backing file). The kernel lease sees every one of them. An O_PATH
// descriptor (which can neither read nor map the file) is not among them:
// the lease does not see it, only a /proc scan that can inspect its
// process does (TestCleanupKeepsVisibleOPathHolder).
var holderLayouts = []string{"open", "map", "leader-map", "leader-fd", "thread-files", "bind-open", "bind-map",
	"scm-inflight", "scm-pingpong", "uring", "loop"}

// holdAll makes one segment per layout (all of holderLayouts when none is
// named), owned by uid (-1: root), held by a live root process. A layout
// this machine cannot make (no io_uring, no loop devices) is left out and
// logged.
func holdAll(t *testing.T, dir string, uid int, layouts ...string) []heldSeg {
	t.Helper()
	if len(layouts) == 0 {
		layouts = holderLayouts
	}
	holder := shmtest.BuildHolder(t)
	var out []heldSeg
	for _, how := range layouts {
		p := shmtest.MakeSegment(t, dir, fmt.Sprintf("nccl-H%02d-%s", len(out), how), 4096, time.Hour)
		if uid >= 0 {
			if err := os.Chown(p, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		var proc *shmtest.Process
		switch how {
		case "open", "map":
			proc = shmtest.Start(t, how, p)
		case "bind-open", "bind-map":
			proc = shmtest.StartThroughBind(t, strings.TrimPrefix(how, "bind-"), p)
		case "loop":
			proc = shmtest.StartLoop(t, p)
		default:
			proc = shmtest.TryStartCmd(t, exec.Command(holder, how, p))
		}
		if proc == nil {
			t.Logf("layout %s cannot be made here; left out", how)
			_ = os.Remove(p)
			continue
		}
		out = append(out, heldSeg{path: p, how: how, ino: inode(t, p), proc: proc})
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

// noneMovedAside fails the test for any file or private directory the
// cleanup moved aside to remove (nccl-ncclwiz-rm-*) and left in dir.
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
// that anyone may run (with --all-users: other users' files too).
func exportCleanup(t *testing.T, dir string, allUsers ...bool) string {
	t.Helper()
	ctx := context.Background()
	h := localHost(dir)
	plan, _ := PlanWith(ctx, h, wantCleanup(), PlanOptions{AllUsers: len(allUsers) > 0 && allUsers[0]})
	fx, ok := ByID(plan, "shm.cleanup")
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
