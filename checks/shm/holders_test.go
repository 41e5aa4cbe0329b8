package shm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

// hiddenHolder is one way of holding a segment that /proc/PID/fd and
// /proc/PID/maps alone do not show (issue 14, items 1, 4 and 5).
type hiddenHolder struct {
	name string
	// start makes a process hold path.
	start func(t *testing.T, holder, path string) *shmtest.Process
	// seen: the /proc scan names the holder (else only the lease sees it).
	seen bool
	via  string
}

func hiddenHolders() []hiddenHolder {
	c := func(mode string) func(t *testing.T, holder, path string) *shmtest.Process {
		return func(t *testing.T, holder, path string) *shmtest.Process {
			return shmtest.StartCmd(t, exec.Command(holder, mode, path))
		}
	}
	bind := func(mode string) func(t *testing.T, _, path string) *shmtest.Process {
		return func(t *testing.T, _, path string) *shmtest.Process {
			return shmtest.StartThroughBind(t, mode, path)
		}
	}
	return []hiddenHolder{
		{"leader exit, mapped", c("leader-map"), true, "map"},
		{"leader exit, open", c("leader-fd"), true, "fd"},
		{"thread with its own file table", c("thread-files"), true, "fd"},
		{"bind mount of the file, open", bind("open"), true, "fd"},
		{"bind mount of the file, mapped", bind("map"), true, "map"},
		{"in flight in a socket queue", c("scm-inflight"), false, ""},
	}
}

// TestRealHiddenHolders: a segment held by a thread after the leader
// exited, by a thread with its own file table, through a bind mount of the
// file under another name, or only as a descriptor in flight in a UNIX
// socket's queue is never orphaned. The /proc scan names the holder where
// it can (task directories, device and inode); the kernel lease catches
// what no /proc file shows.
func TestRealHiddenHolders(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "8M") // skips without root
	holder := shmtest.BuildHolder(t)
	h := host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
	shmtest.MakeSegment(t, dir, "nccl-Orph00", 4096, time.Hour)
	var procs []*shmtest.Process
	want := map[string]hiddenHolder{}
	for i, hh := range hiddenHolders() {
		name := "nccl-Hid" + string(rune('a'+i))
		p := shmtest.MakeSegment(t, dir, name, 4096, time.Hour)
		procs = append(procs, hh.start(t, holder, p))
		want[name] = hh
	}
	inv := scan(t, h)
	for _, s := range inv.Segments {
		if s.Name == "nccl-Orph00" {
			if s.State != Orphaned || s.Lease != LeaseFree {
				t.Errorf("the orphan: %s %s (%s)", s.State, s.Lease, s.Reason)
			}
			continue
		}
		hh := want[s.Name]
		if s.State != InUse {
			t.Errorf("%s (%s): %s (%s)", s.Name, hh.name, s.State, s.Reason)
			continue
		}
		switch {
		case hh.seen && (len(s.Holders) != 1 || s.Holders[0].Via != hh.via):
			t.Errorf("%s (%s): holders %+v, want one via %s", s.Name, hh.name, s.Holders, hh.via)
		case !hh.seen && (len(s.Holders) != 0 || s.Lease != LeaseHeld || !strings.Contains(s.Reason, "in flight")):
			t.Errorf("%s (%s): holders %+v, lease %s, reason %q", s.Name, hh.name, s.Holders, s.Lease, s.Reason)
		}
	}
	// The batch proof's /proc part alone names the same holders.
	p, err := ProveBatch(context.Background(), h, inv.Segments)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range inv.Segments {
		if hh, ok := want[s.Name]; ok && hh.seen && len(p.Holders[i]) == 0 {
			t.Errorf("%s (%s): the batch scan missed the holder", s.Name, hh.name)
		}
	}
	for i, pr := range procs {
		if last, err := pr.Result(); err != nil || last != "ok" {
			t.Errorf("holder %d: %q %v", i, last, err)
		}
	}
}

// TestRealPingPongNeverOrphaned: a descriptor passed back and forth over a
// UNIX socket, each side closing its copy once sent, is at times held by
// no process at all, only by a socket queue. Scanned again and again, the
// segment is never orphaned (it was in 8 of 40 scans before the lease).
func TestRealPingPongNeverOrphaned(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "8M") // skips without root
	holder := shmtest.BuildHolder(t)
	h := host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
	p := shmtest.MakeSegment(t, dir, "nccl-Ping01", 4096, time.Hour)
	pr := shmtest.StartCmd(t, exec.Command(holder, "scm-pingpong", p))
	inFlight := 0
	for range 40 {
		inv := scan(t, h)
		s := segment(t, inv, "nccl-Ping01")
		if s.State != InUse {
			t.Errorf("scan: %s (%s)", s.State, s.Reason)
		}
		if len(s.Holders) == 0 {
			inFlight++
		}
	}
	t.Logf("in flight only (no process held it) in %d of 40 scans", inFlight)
	if last, err := pr.Result(); err != nil || last != "ok" {
		t.Errorf("ping-pong: %q %v", last, err)
	}
}

// TestLeaseCoversEveryHolder verifies on this kernel what the cleanup
// relies on: the kernel refuses a write lease while anything holds the file
// — an fd, a mapping whose fd was closed, a thread after the leader
// exited, a thread's own file table, a bind mount, a descriptor in flight —
// grants it once nothing does, and shows a broken lease when someone opens
// the file while ncclwiz holds it.
func TestLeaseCoversEveryHolder(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "8M") // skips without root
	holder := shmtest.BuildHolder(t)
	dirfd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	type layout struct {
		name  string
		start func(t *testing.T, path string) *shmtest.Process
	}
	layouts := []layout{
		{"open fd", func(t *testing.T, p string) *shmtest.Process { return shmtest.Start(t, "open", p) }},
		{"mapping only", func(t *testing.T, p string) *shmtest.Process { return shmtest.Start(t, "map", p) }},
	}
	for _, hh := range hiddenHolders() {
		layouts = append(layouts, layout{hh.name, func(t *testing.T, p string) *shmtest.Process { return hh.start(t, holder, p) }})
	}
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			name := "nccl-Lease" + string(rune('a'+i))
			p := shmtest.MakeSegment(t, dir, name, 4096, time.Hour)
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			pr := l.start(t, p)
			if lk, r := TakeLease(dirfd, name, uint64(st.Dev), st.Ino); r.Verdict != LeaseHeld {
				if lk != nil {
					lk.Release()
				}
				t.Errorf("held (%s): lease %s (%s)", l.name, r.Verdict, r.Why)
			}
			if last, err := pr.Result(); err != nil || (last != "ok" && last != "") {
				t.Errorf("holder: %q %v", last, err)
			}
			lk, r := TakeLease(dirfd, name, uint64(st.Dev), st.Ino)
			if r.Verdict != LeaseFree {
				t.Fatalf("after the holder ended: lease %s (%s)", r.Verdict, r.Why)
			}
			defer lk.Release()
			if lk.Broken() {
				t.Error("a fresh lease reads as broken")
			}
			// Someone opens it while ncclwiz holds the lease.
			fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
			if err == nil {
				unix.Close(fd)
			}
			if !lk.Broken() {
				t.Error("an open during the lease did not break it")
			}
		})
	}
	// A symlink, a replaced file and a missing name are never leased.
	p := shmtest.MakeSegment(t, dir, "nccl-Swap", 4096, time.Hour)
	var st unix.Stat_t
	_ = unix.Stat(p, &st)
	if _, r := TakeLease(dirfd, "nccl-Swap", uint64(st.Dev), st.Ino+1); r.Verdict != LeaseChanged {
		t.Errorf("another inode: %s", r.Verdict)
	}
	if err := os.Symlink(p, filepath.Join(dir, "nccl-Link")); err != nil {
		t.Fatal(err)
	}
	if _, r := TakeLease(dirfd, "nccl-Link", uint64(st.Dev), st.Ino); r.Verdict != LeaseChanged {
		t.Errorf("symlink: %s (%s)", r.Verdict, r.Why)
	}
	if _, r := TakeLease(dirfd, "nccl-None", uint64(st.Dev), st.Ino); r.Verdict != LeaseGone {
		t.Errorf("missing: %s", r.Verdict)
	}
}
