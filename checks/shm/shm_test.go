package shm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

const mountinfoHost = "25 22 0:23 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=33554432k,inode64\n"
const mountinfoDocker = "620 612 0:56 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k,inode64\n"

func titles(fs []checks.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s: %s\n", f.Severity, f.Title)
	}
	return b.String()
}

func has(fs []checks.Finding, sev checks.Severity, sub string) bool {
	for _, f := range fs {
		if f.Severity == sev && strings.Contains(f.Title, sub) {
			return true
		}
	}
	return false
}

func TestParseMountinfo(t *testing.T) {
	in := "36 35 98:0 /mnt1 /mnt\\040with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n" +
		"25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684092k\n" +
		"30 25 0:27 / /dev/shm ro,relatime - tmpfs shm ro,size=65536k\n" +
		"garbage line\n"
	es := parseMountinfo([]byte(in))
	if len(es) != 3 {
		t.Fatalf("got %d entries", len(es))
	}
	if es[0].mountPoint != "/mnt with space" || es[0].fsType != "ext3" || es[0].source != "/dev/root" {
		t.Errorf("entry 0 = %+v", es[0])
	}
	h := ft.Tree(t, map[string]any{"/proc/self/mountinfo": in, "/dev/shm": nil},
		host.FixtureSpec{Statfs: map[string]host.StatFS{"/dev/shm": ft.StatfsTmpfs(64<<20, 0)}})
	m, err := ReadMount(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	// Stacked mounts: the last one is what processes see.
	if m.Source != "shm" || m.SizeOption != "65536k" || !m.ReadOnly {
		t.Errorf("stacked mount not resolved to the top one: %+v", m)
	}
}

func TestMountFindings(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]any
		stat     host.StatFS
		wantSev  checks.Severity
		want     string
		problems int
	}{
		{"healthy", map[string]any{"/proc/self/mountinfo": mountinfoHost, "/dev/shm": nil}, ft.StatfsTmpfs(32<<30, 1<<30), checks.OK, "/dev/shm is tmpfs, 32 GiB, 3% used", 0},
		{"docker 64 MiB", map[string]any{"/proc/self/mountinfo": mountinfoDocker, "/dev/shm": nil}, ft.StatfsTmpfs(64<<20, 0), checks.Warn, "64 MiB, the Docker and Kubernetes default", 1},
		{"full", map[string]any{"/proc/self/mountinfo": mountinfoDocker, "/dev/shm": nil}, ft.StatfsTmpfs(64<<20, 60<<20), checks.Error, "is full: 4 MiB free", 2},
		{"missing", map[string]any{"/proc/self/mountinfo": mountinfoHost}, host.StatFS{}, checks.Error, "/dev/shm does not exist", 1},
		{"not tmpfs", map[string]any{"/proc/self/mountinfo": "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", "/dev/shm": nil},
			host.StatFS{Type: 0xEF53, Bsize: 4096, Blocks: 1 << 24, Bfree: 1 << 23, Bavail: 1 << 23}, checks.Warn, "is ext4, not tmpfs", 1},
		{"read-only", map[string]any{"/proc/self/mountinfo": "25 22 0:23 / /dev/shm ro,relatime - tmpfs tmpfs ro,size=8g\n", "/dev/shm": nil},
			ft.StatfsTmpfs(8<<30, 0), checks.Error, "mounted read-only", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ft.Tree(t, tt.files, host.FixtureSpec{Statfs: map[string]host.StatFS{"/dev/shm": tt.stat}})
			fs, err := runMount(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			if !has(fs, tt.wantSev, tt.want) {
				t.Errorf("want %s %q in\n%s", tt.wantSev, tt.want, titles(fs))
			}
			if e, w := checks.Problems(fs); e+w != tt.problems {
				t.Errorf("%d problems, want %d:\n%s", e+w, tt.problems, titles(fs))
			}
		})
	}
}

// fixtureHost builds a host whose /dev/shm holds the named segments (each
// a small real file) and whose /proc holds the given processes.
type proc struct {
	pid  int
	uid  int
	fds  map[string]string // fd number → link target
	maps []string          // /dev/shm names mapped (written with their real inode)
}

func fixtureHost(t testing.TB, segs []string, procs []proc, extra map[string]any) *host.Host {
	t.Helper()
	files := map[string]any{"/proc/self/mountinfo": mountinfoHost, "/proc/self/status": "NSpid:\t42\n", "/dev/shm": nil}
	for k, v := range extra {
		files[k] = v
	}
	for _, s := range segs {
		files["/dev/shm/"+s] = strings.Repeat("x", 100)
	}
	for _, p := range procs {
		dir := fmt.Sprintf("/proc/%d", p.pid)
		files[dir+"/comm"] = "python\n"
		files[dir+"/status"] = fmt.Sprintf("Name:\tpython\nUid:\t%d\t%d\t%d\t%d\n", p.uid, p.uid, p.uid, p.uid)
		files[dir+"/maps"] = "00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/python3\n"
		files[dir+"/fd"] = nil
		for fd, target := range p.fds {
			files[dir+"/fd/"+fd] = ft.Symlink(target)
		}
	}
	h := ft.Tree(t, files, host.FixtureSpec{UID: 1000, Statfs: map[string]host.StatFS{"/dev/shm": ft.StatfsTmpfs(128<<20, 64<<20)}})
	old := time.Now().Add(-time.Hour)
	for _, s := range segs {
		_ = os.Chtimes(filepath.Join(h.Root, "dev/shm", s), old, old)
	}
	// maps lines need the real inode of the fixture file.
	for _, p := range procs {
		var b strings.Builder
		b.WriteString("00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/python3\n")
		for _, name := range p.maps {
			fi, err := os.Stat(filepath.Join(h.Root, "dev/shm", name))
			if err != nil {
				t.Fatal(err)
			}
			ino := fi.Sys().(*syscall.Stat_t).Ino
			fmt.Fprintf(&b, "7f3a2c000000-7f3a2c001000 rw-s 00000000 00:23 %d /dev/shm/%s\n", ino, name)
		}
		if err := os.WriteFile(filepath.Join(h.Root, fmt.Sprintf("proc/%d/maps", p.pid)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.EUID = ownerOf(t, filepath.Join(h.Root, "dev/shm"))
	return h
}

func ownerOf(t testing.TB, p string) int {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

func states(inv *Inventory) map[string]State {
	out := map[string]State{}
	for _, s := range inv.Segments {
		out[s.Name] = s.State
	}
	return out
}

func TestScanProvesHolders(t *testing.T) {
	h := fixtureHost(t,
		[]string{"nccl-Held01", "nccl-Mapd02", "nccl-Orph03", "nccl-shm-recv-250a7cc850ba9298-0-1-3", "sem.mp-abc", "torch_1234_567", "unrelated.txt"},
		[]proc{
			{pid: 100, uid: 1000, fds: map[string]string{"3": "/dev/shm/nccl-Held01", "4": "/dev/null"}},
			{pid: 200, uid: 1000, maps: []string{"nccl-Mapd02"}},
			{pid: 300, uid: 1000, fds: map[string]string{"5": "/dev/shm/nccl-Orph03 (deleted)"}}, // an older file of the same name
		}, nil)
	inv, err := Scan(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	got := states(inv)
	want := map[string]State{
		"nccl-Held01": InUse, "nccl-Mapd02": InUse, "nccl-Orph03": Orphaned,
		"nccl-shm-recv-250a7cc850ba9298-0-1-3": Orphaned, "sem.mp-abc": Orphaned, "torch_1234_567": Orphaned,
	}
	if len(got) != len(want) {
		t.Errorf("scanned %v, want %v (unrelated files must be ignored)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	for _, s := range inv.Segments {
		if s.Name == "nccl-Mapd02" && (len(s.Holders) != 1 || s.Holders[0].PID != 200 || s.Holders[0].Via != "map") {
			t.Errorf("mapped holder = %+v", s.Holders)
		}
		if s.Name == "nccl-shm-recv-250a7cc850ba9298-0-1-3" && s.Kind != "nccl-legacy" {
			t.Errorf("legacy kind = %s", s.Kind)
		}
	}
	if inv.ScannedPIDs != 3 {
		t.Errorf("scanned %d pids", inv.ScannedPIDs)
	}
}

func TestSegmentsFindings(t *testing.T) {
	t.Run("orphans", func(t *testing.T) {
		h := fixtureHost(t, []string{"nccl-a1", "nccl-b2", "nccl-c3"}, nil, nil)
		fs, err := runSegments(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		if !has(fs, checks.Warn, "3 orphaned NCCL segment(s)") || fs[0].Fixes[0] != "shm.cleanup" || fs[0].Guide != "shm-stale-segments" {
			t.Errorf("got\n%s", titles(fs))
		}
		if fs[0].Evidence["orphaned"] != 3 {
			t.Errorf("evidence %v", fs[0].Evidence)
		}
	})
	t.Run("symlink outside is flagged, never followed", func(t *testing.T) {
		outside := filepath.Join(t.TempDir(), "precious")
		if err := os.WriteFile(outside, []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
		h := fixtureHost(t, []string{"nccl-real"}, nil, map[string]any{"/dev/shm/nccl-evil": ft.Symlink(outside)})
		inv, _ := Scan(context.Background(), h)
		for _, s := range inv.Segments {
			if s.Name == "nccl-evil" && (!s.Symlink || s.State == Orphaned || s.LinkTarget != outside) {
				t.Errorf("symlink segment = %+v", s)
			}
		}
		fs, _ := runSegments(context.Background(), h)
		if !has(fs, checks.Info, "Symlink in /dev/shm: nccl-evil -> "+outside) {
			t.Errorf("got\n%s", titles(fs))
		}
	})
	t.Run("live holder", func(t *testing.T) {
		h := fixtureHost(t, []string{"nccl-live"}, []proc{{pid: 9, uid: 1000, fds: map[string]string{"7": "/dev/shm/nccl-live"}}}, nil)
		fs, _ := runSegments(context.Background(), h)
		if !has(fs, checks.Info, "1 segment(s) in use by 1 running process(es)") {
			t.Errorf("got\n%s", titles(fs))
		}
		if e, w := checks.Problems(fs); e+w != 0 {
			t.Errorf("in-use segment reported as a problem:\n%s", titles(fs))
		}
	})
	t.Run("non-printable name shown escaped", func(t *testing.T) {
		h := fixtureHost(t, []string{"nccl-\x1b[2J"}, nil, nil)
		fs, _ := runSegments(context.Background(), h)
		if !has(fs, checks.Info, `nccl-\x1b[2J`) {
			t.Errorf("got\n%s", titles(fs))
		}
		for _, f := range fs {
			if strings.Contains(f.Title, "\x1b") {
				t.Errorf("raw escape in title %q", f.Title)
			}
		}
	})
	t.Run("container with shared tmpfs", func(t *testing.T) {
		h := fixtureHost(t, []string{"nccl-x"}, nil, map[string]any{
			"/proc/self/status":    "NSpid:\t42\t7\n",
			"/proc/self/mountinfo": "99 90 0:44 / /dev/shm rw - tmpfs tmpfs rw,size=1g\n",
		})
		inv, _ := Scan(context.Background(), h)
		if inv.Segments[0].State != Unknown || inv.Private {
			t.Errorf("segment in a possibly shared tmpfs judged %s", inv.Segments[0].State)
		}
	})
	t.Run("young", func(t *testing.T) {
		h := fixtureHost(t, []string{"nccl-new"}, nil, nil)
		now := time.Now()
		_ = os.Chtimes(filepath.Join(h.Root, "dev/shm/nccl-new"), now, now)
		inv, _ := Scan(context.Background(), h)
		if inv.Segments[0].State != Young {
			t.Errorf("fresh segment judged %s", inv.Segments[0].State)
		}
	})
}

func TestProveOrphanedRefusesSwaps(t *testing.T) {
	h := fixtureHost(t, []string{"nccl-gone", "nccl-swap"}, nil, nil)
	inv, _ := Scan(context.Background(), h)
	var swap Segment
	for _, s := range inv.Segments {
		if s.Name == "nccl-swap" {
			swap = s
		}
	}
	ok, _, err := ProveOrphaned(context.Background(), h, swap)
	if !ok || err != nil {
		t.Fatalf("orphan not proven: %v", err)
	}
	// Replace the file by a symlink with the same name: proof must fail.
	p := filepath.Join(h.Root, "dev/shm/nccl-swap")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", p); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := ProveOrphaned(context.Background(), h, swap); ok || err == nil {
		t.Errorf("swapped-in symlink proven orphaned")
	}
}

func TestHuman(t *testing.T) {
	for in, want := range map[uint64]string{0: "0 B", 9637892: "9.2 MiB", 64 << 20: "64 MiB", 3 << 40: "3 TiB"} {
		if got := Human(in); got != want {
			t.Errorf("Human(%d) = %s, want %s", in, got, want)
		}
	}
}
