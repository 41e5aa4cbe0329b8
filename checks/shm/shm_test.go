package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

const (
	mountinfoHost   = "25 22 0:23 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=33554432k,inode64\n"
	mountinfoDocker = "612 540 0:52 / / rw,relatime master:302 - overlay overlay rw,lowerdir=/l\n" +
		"620 612 0:56 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k,inode64\n"
	hostPIDNS = "pid:[4026531836]"
)

func titles(fs []checks.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s: %s\n", f.Severity, f.Title)
	}
	return b.String()
}

func find(fs []checks.Finding, sev checks.Severity, sub string) *checks.Finding {
	for i, f := range fs {
		if f.Severity == sev && strings.Contains(f.Title, sub) {
			return &fs[i]
		}
	}
	return nil
}

func has(fs []checks.Finding, sev checks.Severity, sub string) bool { return find(fs, sev, sub) != nil }

func TestParseMountinfo(t *testing.T) {
	in := "36 35 98:0 /mnt1 /mnt\\040with\\040space rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue\n" +
		"25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684092k\n" +
		"30 25 0:27 / /dev/shm ro,relatime - tmpfs shm ro,size=65536k\n" +
		"garbage line\n" +
		"1 2 3 4 5 6 7 8 9 10\n" + // no separator
		"40 1 0:5 / /dev rw - devtmpfs\n" + // no source
		"41 1 0:6 / /no\\134super rw - tmpfs tmpfs\n" // no superblock options, escaped backslash
	es := parseMountinfo([]byte(in))
	if len(es) != 4 {
		t.Fatalf("got %d entries: %+v", len(es), es)
	}
	if es[0].mountPoint != "/mnt with space" || es[0].root != "/mnt1" || es[0].fsType != "ext3" || es[0].source != "/dev/root" {
		t.Errorf("entry 0 = %+v", es[0])
	}
	if es[3].mountPoint != `/no\super` || es[3].superOpts != nil {
		t.Errorf("entry 3 = %+v", es[3])
	}
}

func TestFindMountLongestPrefix(t *testing.T) {
	es := parseMountinfo([]byte(
		"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n" +
			"2 1 0:5 / /dev rw - devtmpfs udev rw\n" +
			"3 2 0:23 / /dev/shm rw - tmpfs tmpfs rw,size=1g\n" +
			"4 1 0:30 / /dev/shmx rw - tmpfs other rw\n" +
			"5 1 0:31 / /scratch/my\\040shm rw - tmpfs tmpfs rw,size=2g\n"))
	for dir, want := range map[string]string{
		"/dev/shm": "/dev/shm", "/dev/shm/sub": "/dev/shm", "/dev/shmy": "/dev", "/scratch/my shm": "/scratch/my shm", "/home/x": "/",
	} {
		e, ok := findMount(es, dir)
		if !ok || e.mountPoint != want {
			t.Errorf("findMount(%s) = %q, want %q", dir, e.mountPoint, want)
		}
	}
}

// mountHost builds a fixture with the given mountinfo and a /dev/shm dir
// of the given mode (0 = no directory).
func mountHost(t *testing.T, mountinfo string, mode os.FileMode, st host.StatFS, spec host.FixtureSpec) *host.Host {
	t.Helper()
	files := map[string]any{"/proc/self/mountinfo": mountinfo}
	if mode != 0 {
		files["/dev/shm"] = nil
	}
	spec.Statfs = map[string]host.StatFS{"/dev/shm": st}
	h := ft.Tree(t, files, spec)
	if mode != 0 {
		if err := os.Chmod(filepath.Join(h.Root, "dev/shm"), mode); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func TestMountFindings(t *testing.T) {
	const sticky = os.ModeDir | os.ModeSticky | 0o777
	owner := os.Geteuid()
	stranger := owner + 4242
	big := ft.StatfsTmpfs(32<<30, 1<<30)
	tests := []struct {
		name      string
		mountinfo string
		mode      os.FileMode
		stat      host.StatFS
		euid      int
		want      checks.Severity
		title     string
		guide     string
		problems  int
	}{
		{"healthy", mountinfoHost, sticky, big, owner, checks.OK, "/dev/shm is tmpfs, 32 GiB, 3% used (31 GiB free)", "", 0},
		{"docker 64 MiB", mountinfoDocker, sticky, ft.StatfsTmpfs(64<<20, 0), stranger, checks.Warn, "64 MiB, the Docker and Kubernetes default", "container-shm", 1},
		{"16 MiB is an error", mountinfoDocker, sticky, ft.StatfsTmpfs(16<<20, 0), stranger, checks.Error, "/dev/shm is only 16 MiB", "container-shm", 1},
		{"full", mountinfoDocker, sticky, ft.StatfsTmpfs(64<<20, 60<<20), stranger, checks.Error, "is full: 4 MiB free, less than one NCCL segment (9.2 MiB)", "shm-no-space", 2},
		{"90% of a big one is a warning", mountinfoHost, sticky, ft.StatfsTmpfs(32<<30, 29<<30), owner, checks.Warn, "is 91% full (3 GiB free)", "shm-no-space", 1},
		{"90% with little room is an error", mountinfoHost, sticky, ft.StatfsTmpfs(1<<30, 970<<20), owner, checks.Error, "is 95% full: 54 MiB free, room for 5 NCCL segments", "shm-no-space", 1},
		{"little room left", mountinfoHost, sticky, ft.StatfsTmpfs(256<<20, 230<<20), owner, checks.Warn, "has only 26 MiB free, room for 2 NCCL segments", "shm-no-space", 1},
		{"missing", mountinfoHost, 0, host.StatFS{}, owner, checks.Error, "/dev/shm does not exist", "shm-no-space", 1},
		{"not tmpfs", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", sticky,
			host.StatFS{Type: 0xEF53, Bsize: 4096, Blocks: 1 << 24, Bfree: 1 << 23, Bavail: 1 << 23, Files: 100, Ffree: 50}, owner, checks.Warn, "is ext4, not tmpfs", "shm-no-space", 1},
		{"read-only per mount", "25 22 0:23 / /dev/shm ro,relatime - tmpfs tmpfs rw,size=8g\n", sticky, ft.StatfsTmpfs(8<<30, 0), owner, checks.Error, "mounted read-only", "shm-no-space", 1},
		{"read-only per statfs", mountinfoHost, sticky, func() host.StatFS { s := ft.StatfsTmpfs(8<<30, 0); s.Flags = 1; return s }(), owner, checks.Error, "mounted read-only", "shm-no-space", 1},
		{"inodes exhausted", mountinfoHost, sticky, func() host.StatFS { s := ft.StatfsTmpfs(8<<30, 0); s.Ffree = 0; return s }(), owner, checks.Error, "has no free inodes", "shm-no-space", 1},
		{"unlimited tmpfs", "25 22 0:23 / /dev/shm rw - tmpfs tmpfs rw,size=0\n", sticky, host.StatFS{Type: host.TmpfsMagic, Bsize: 4096}, owner, checks.OK, "tmpfs with no size limit", "", 0},
		{"not writable for the user", mountinfoHost, os.ModeDir | 0o755, big, stranger, checks.Error, fmt.Sprintf("not writable for uid %d (mode 0755)", stranger), "shm-no-space", 1},
		{"no sticky bit", mountinfoHost, os.ModeDir | 0o777, big, owner, checks.Info, "world-writable without the sticky bit (mode 0777)", "shm-stale-segments", 0},
		{"writable for its owner only", mountinfoHost, os.ModeDir | 0o755, big, owner, checks.Warn, "not writable for other users (mode 0755)", "shm-no-space", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mountHost(t, tt.mountinfo, tt.mode, tt.stat, host.FixtureSpec{UID: tt.euid})
			fs, err := runMount(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			f := find(fs, tt.want, tt.title)
			if f == nil {
				t.Fatalf("want %s %q in\n%s", tt.want, tt.title, titles(fs))
			}
			if f.Guide != tt.guide {
				t.Errorf("guide %q, want %q", f.Guide, tt.guide)
			}
			if e, w := checks.Problems(fs); e+w != tt.problems {
				t.Errorf("%d problems, want %d:\n%s", e+w, tt.problems, titles(fs))
			}
			for _, f := range fs {
				if strings.Contains(f.Title, "Docker") && !strings.Contains(f.Detail, "--shm-size") {
					t.Errorf("64 MiB finding without the container remedy: %s", f.Detail)
				}
				if f.Severity.IsProblem() && f.Guide == "" {
					t.Errorf("problem without a guide: %s", f.Title)
				}
			}
		})
	}
}

func TestMountEvidence(t *testing.T) {
	h := mountHost(t, mountinfoDocker, os.ModeDir|os.ModeSticky|0o777, ft.StatfsTmpfs(64<<20, 16<<20), host.FixtureSpec{})
	fs, err := runMount(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	ev := fs[0].Evidence
	want := map[string]any{"size_option": "65536k", "mount_source": "shm", "fstype": "tmpfs", "noexec": true, "read_only": false,
		"size_bytes": uint64(64 << 20), "used_bytes": uint64(16 << 20), "free_bytes": uint64(48 << 20), "used_percent": 25.0,
		"mode": "1777", "segments_fit_total": uint64(6)}
	for k, v := range want {
		if fmt.Sprint(ev[k]) != fmt.Sprint(v) {
			t.Errorf("evidence %s = %v, want %v", k, ev[k], v)
		}
	}
	for _, k := range []string{"inodes_total", "inodes_free", "options", "super_options", "mount_point"} {
		if _, ok := ev[k]; !ok {
			t.Errorf("evidence lacks %s", k)
		}
	}
}

func TestReadMountShapes(t *testing.T) {
	t.Run("symlinked /dev/shm is followed for the mount", func(t *testing.T) {
		h := ft.Tree(t, map[string]any{"/run/shm": nil, "/dev/shm": ft.Symlink("/run/shm"),
			"/proc/self/mountinfo": "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n9 1 0:40 / /run/shm rw - tmpfs tmpfs rw,size=2g\n"},
			host.FixtureSpec{Statfs: map[string]host.StatFS{"/dev/shm": ft.StatfsTmpfs(2<<30, 0)}})
		m, err := ReadMount(context.Background(), h)
		if err != nil || !m.Found || m.LinkTarget != "/run/shm" || m.SizeOption != "2g" || m.MountPoint != "/run/shm" {
			t.Errorf("mount = %+v, %v", m, err)
		}
	})
	t.Run("a file is not a directory", func(t *testing.T) {
		h := ft.Tree(t, map[string]any{"/dev/shm": "oops"}, host.FixtureSpec{})
		fs, _ := runMount(context.Background(), h)
		if !has(fs, checks.Error, "/dev/shm is not a directory") {
			t.Errorf("got\n%s", titles(fs))
		}
	})
	t.Run("--shm-path below another mount", func(t *testing.T) {
		h := ft.Tree(t, map[string]any{"/scratch/job 1/shm": nil,
			"/proc/self/mountinfo": "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n7 1 0:41 / /scratch/job\\0401 rw - tmpfs tmpfs rw,size=512m\n"},
			host.FixtureSpec{ShmDir: "/scratch/job 1/shm", Statfs: map[string]host.StatFS{"/scratch/job 1/shm": ft.StatfsTmpfs(512<<20, 0)}})
		m, _ := ReadMount(context.Background(), h)
		if m.MountPoint != "/scratch/job 1" || m.SizeOption != "512m" || m.Path != "/scratch/job 1/shm" {
			t.Errorf("mount = %+v", m)
		}
	})
	t.Run("no mountinfo, no statfs", func(t *testing.T) {
		h := ft.Tree(t, map[string]any{"/dev/shm": nil}, host.FixtureSpec{})
		fs, err := runMount(context.Background(), h)
		if err != nil || len(fs) != 1 || fs[0].Severity != checks.Skipped || fs[0].Evidence["mountinfo_error"] == nil {
			t.Errorf("got %v\n%s", err, titles(fs))
		}
	})
}

// world describes a generated fixture machine for the segment tests.
type world struct {
	segs      map[string]int64 // name → bytes (regular files, an hour old)
	modes     map[string]os.FileMode
	procs     []proc
	files     map[string]any // extra files (mountinfo, ns links, symlinks …)
	statTotal uint64
	euid      *int // nil: the owner of the files (this test's user)
	owner     *int // chown the segments (needs root unless it is this user)
	env       map[string]string
}

type proc struct {
	pid        int
	uid        int
	comm       string
	fds        map[string]string // fd number → link target
	maps       []string          // segment names mapped, written with their real inode
	mapsExtra  string            // extra maps lines, verbatim
	unreadable bool              // fd and maps replaced by files: reading them fails like EACCES
}

func (w world) build(t testing.TB) *host.Host {
	t.Helper()
	files := map[string]any{"/proc/self/mountinfo": mountinfoHost, "/proc/self/status": "Name:\tncclwiz\nNSpid:\t42\n", "/dev/shm": nil}
	for k, v := range w.files {
		files[k] = v
	}
	for name := range w.segs {
		files["/dev/shm/"+name] = ""
	}
	for _, p := range w.procs {
		dir := fmt.Sprintf("/proc/%d", p.pid)
		comm := p.comm
		if comm == "" {
			comm = "python"
		}
		files[dir+"/status"] = fmt.Sprintf("Name:\t%s\nUid:\t%d\t%d\t%d\t%d\n", comm, p.uid, p.uid, p.uid, p.uid)
		if p.unreadable {
			// Root reads everything, so EACCES cannot be made in a fixture;
			// a file where the fd directory belongs and a directory where
			// maps belongs fail the same way (an error that is not ENOENT).
			files[dir+"/fd"] = "not a directory"
			files[dir+"/maps"] = nil
			continue
		}
		files[dir+"/fd"] = nil
		for fd, target := range p.fds {
			files[dir+"/fd/"+fd] = ft.Symlink(target)
		}
	}
	spec := host.FixtureSpec{Statfs: map[string]host.StatFS{"/dev/shm": ft.StatfsTmpfs(max(w.statTotal, 128<<20), 64<<20)}, Env: w.env}
	h := ft.Tree(t, files, spec)
	old := time.Now().Add(-time.Hour)
	for name, size := range w.segs {
		p := filepath.Join(h.Root, "dev/shm", name)
		mode, ok := w.modes[name]
		if !ok {
			mode = 0o600 // as NCCL's mkstemp makes them
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if w.owner != nil {
			if err := os.Lchown(p, *w.owner, *w.owner); err != nil {
				t.Skipf("chown needs root: %v", err)
			}
		}
		if size > 0 {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
				// Not every filesystem under TMPDIR can fallocate: write it.
				_, _ = f.Write(make([]byte, size))
			}
			f.Close()
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range w.procs {
		var b strings.Builder
		b.WriteString("00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/python3\n")
		b.WriteString("7f0000000000-7f0000001000 rw-s 00000000 00:01 4242 /SYSV00000000 (deleted)\n")
		for _, name := range p.maps {
			fmt.Fprintf(&b, "7f3a2c000000-7f3a2c001000 rw-s 00000000 00:23 %d /dev/shm/%s\n", inode(t, filepath.Join(h.Root, "dev/shm", name)), name)
		}
		b.WriteString(p.mapsExtra)
		content := b.String()
		if p.unreadable {
			continue // no maps file at all would mean "exited"; the fd file already fails
		}
		if err := os.WriteFile(filepath.Join(h.Root, fmt.Sprintf("proc/%d/maps", p.pid)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.EUID = fileOwner(t, filepath.Join(h.Root, "dev/shm"))
	if w.owner != nil {
		h.EUID = *w.owner
	}
	if w.euid != nil {
		h.EUID = *w.euid
	}
	return h
}

func inode(t testing.TB, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func fileOwner(t testing.TB, p string) int {
	t.Helper()
	fi, err := os.Lstat(p)
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

func segment(t testing.TB, inv *Inventory, name string) Segment {
	t.Helper()
	for _, s := range inv.Segments {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("segment %q not scanned", name)
	return Segment{}
}

func scan(t testing.TB, h *host.Host) *Inventory {
	t.Helper()
	inv, err := Scan(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func TestScanStates(t *testing.T) {
	me := os.Geteuid()
	stranger := me + 4242
	zero := 0
	user := me // a non-root owner for the hidepid case
	if me == 0 {
		user = 1000
	}
	const hidepid = "30 1 0:22 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw,hidepid=invisible\n"
	nested := map[string]any{"/proc/self/ns/pid": ft.Symlink("pid:[4026532301]"), "/proc/1/ns/pid": ft.Symlink("pid:[4026532301]")}
	withFiles := func(base map[string]any, more map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name string
		w    world
		want map[string]State
	}{
		{"fd, map, deleted fd and legacy names", world{
			segs: map[string]int64{"nccl-Held01": 0, "nccl-Mapd02": 0, "nccl-Orph03": 0, "nccl-shm-recv-250a7cc850ba9298-0-1-3": 0,
				"sem.mp-abc": 0, "torch_1234_567": 0, "unrelated.txt": 0, "psm2_shm.abc": 0},
			procs: []proc{
				{pid: 100, uid: me, fds: map[string]string{"3": "/dev/shm/nccl-Held01", "4": "/dev/null", "5": "socket:[1234]"}},
				{pid: 200, uid: me, maps: []string{"nccl-Mapd02"}},
				// An older, deleted file of the same name is not this one.
				{pid: 300, uid: me, fds: map[string]string{"5": "/dev/shm/nccl-Orph03 (deleted)"},
					mapsExtra: "7f3a2c000000-7f3a2c001000 rw-s 00000000 00:23 99999999 /dev/shm/nccl-Orph03 (deleted)\n"},
			}}, map[string]State{"nccl-Held01": InUse, "nccl-Mapd02": InUse, "nccl-Orph03": Orphaned,
			"nccl-shm-recv-250a7cc850ba9298-0-1-3": Orphaned, "sem.mp-abc": Orphaned, "torch_1234_567": Orphaned}},
		{"mapping found by inode although deleted", world{
			segs:  map[string]int64{"nccl-Gone01": 0},
			procs: []proc{{pid: 10, uid: me}}, // maps line added below with " (deleted)"
		}, nil},
		{"unreadable process of the owner makes it unknown", world{
			segs:  map[string]int64{"nccl-Mine01": 0},
			procs: []proc{{pid: 50, uid: me, unreadable: true}},
		}, map[string]State{"nccl-Mine01": Unknown}},
		// Root opens anything and descriptors travel over sockets: an
		// uninspected process of any uid could hold even a 0600 file.
		{"unreadable process of another uid blocks even a 0600 file", world{
			segs:  map[string]int64{"nccl-Mine01": 0},
			procs: []proc{{pid: 50, uid: me + 1, unreadable: true}},
		}, map[string]State{"nccl-Mine01": Unknown}},
		{"unreadable process of another uid blocks a world-readable file", world{
			segs:  map[string]int64{"sem.mp-open": 0},
			modes: map[string]os.FileMode{"sem.mp-open": 0o666},
			procs: []proc{{pid: 50, uid: me + 1, unreadable: true}},
		}, map[string]State{"sem.mp-open": Unknown}},
		{"hidepid=2 hides other users' holders", world{
			segs:  map[string]int64{"nccl-Theirs1": 0},
			euid:  &stranger,
			files: map[string]any{"/proc/self/mountinfo": mountinfoHost + hidepid},
		}, map[string]State{"nccl-Theirs1": Unknown}},
		{"hidepid=2 hides holders of the user's own files too", world{
			segs:  map[string]int64{"nccl-Mine01": 0},
			owner: &user,
			files: map[string]any{"/proc/self/mountinfo": mountinfoHost + hidepid},
		}, map[string]State{"nccl-Mine01": Unknown}},
		{"hidepid=2 hides processes from uid 0 of a user namespace too", world{
			segs: map[string]int64{"nccl-Mine01": 0},
			euid: &zero,
			files: map[string]any{"/proc/self/mountinfo": mountinfoHost + hidepid,
				"/proc/self/ns/user": ft.Symlink("user:[4026532555]")},
		}, map[string]State{"nccl-Mine01": Unknown}},
		{"hidepid=2 does not hide processes from root", world{
			segs:  map[string]int64{"nccl-Mine01": 0},
			euid:  &zero,
			files: map[string]any{"/proc/self/mountinfo": mountinfoHost + hidepid, "/proc/self/ns/user": ft.Symlink(initUserNamespace)},
		}, map[string]State{"nccl-Mine01": Orphaned}},
		{"hidepid=1 is seen as unreadable processes, not hidden", world{
			segs:  map[string]int64{"nccl-Theirs1": 0},
			euid:  &stranger,
			files: map[string]any{"/proc/self/mountinfo": mountinfoHost + "30 1 0:22 / /proc rw - proc proc rw,hidepid=1\n"},
		}, map[string]State{"nccl-Theirs1": Orphaned}},
		{"init of the host PID namespace is ignored when hidden", world{
			segs:  map[string]int64{"nccl-Mine01": 0},
			procs: []proc{{pid: 1, uid: me, unreadable: true}},
			files: map[string]any{"/proc/self/ns/pid": ft.Symlink(hostPIDNS)},
		}, map[string]State{"nccl-Mine01": Orphaned}},
		{"hidden PID 1 of a nested namespace is not ignored", world{
			segs:  map[string]int64{"nccl-Mine01": 0},
			procs: []proc{{pid: 1, uid: me, unreadable: true}},
			files: withFiles(nested, map[string]any{"/proc/self/mountinfo": mountinfoDocker, "/.dockerenv": ""}),
		}, map[string]State{"nccl-Mine01": Unknown}},
		// A container's own "shm" tmpfs may be shared with another
		// container (--ipc=container:ID): /proc alone proves nothing there.
		{"docker's shm: the scan alone cannot prove orphans", world{
			segs:  map[string]int64{"nccl-Xq3F9a": 0},
			files: withFiles(nested, map[string]any{"/proc/self/mountinfo": mountinfoDocker, "/.dockerenv": ""}),
		}, map[string]State{"nccl-Xq3F9a": Unknown}},
		{"container with --ipc=host: unknown", world{
			segs: map[string]int64{"nccl-Xq3F9a": 0},
			files: withFiles(nested, map[string]any{"/.dockerenv": "", "/proc/self/ns/ipc": ft.Symlink("ipc:[4026531839]"),
				"/proc/self/mountinfo": "99 90 0:23 / /dev/shm rw - tmpfs tmpfs rw,size=32g\n"}),
		}, map[string]State{"nccl-Xq3F9a": Unknown}},
		{"kubernetes pod: unknown", world{
			segs:  map[string]int64{"nccl-Xq3F9a": 0},
			files: withFiles(nested, map[string]any{"/proc/self/mountinfo": mountinfoDocker}),
			env:   map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"},
		}, map[string]State{"nccl-Xq3F9a": Unknown}},
		{"nested namespace, host tmpfs bind-mounted: unknown", world{
			segs:  map[string]int64{"nccl-Xq3F9a": 0},
			files: withFiles(nested, map[string]any{"/proc/self/mountinfo": "99 90 0:23 / /dev/shm rw - tmpfs tmpfs rw,size=32g\n"}),
		}, map[string]State{"nccl-Xq3F9a": Unknown}},
		{"NSpid with two levels and a container: unknown", world{
			segs: map[string]int64{"nccl-Xq3F9a": 0},
			files: map[string]any{"/proc/self/status": "NSpid:\t4242\t7\n", "/.dockerenv": "",
				"/proc/self/mountinfo": "99 90 0:23 / /dev/shm rw - tmpfs tmpfs rw,size=32g\n"},
		}, map[string]State{"nccl-Xq3F9a": Unknown}},
		{"symlink, hardlink, directory", world{
			segs: map[string]int64{"nccl-Real01": 0},
			files: map[string]any{"/dev/shm/nccl-Link02": ft.Symlink("/etc/shadow"), "/dev/shm/nccl-Dir03": nil,
				"/dev/shm/nccl-Dir03/x": ""},
		}, map[string]State{"nccl-Real01": Orphaned, "nccl-Link02": Unknown, "nccl-Dir03": Unknown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.w.build(t)
			if tt.name == "mapping found by inode although deleted" {
				ino := inode(t, filepath.Join(h.Root, "dev/shm/nccl-Gone01"))
				line := fmt.Sprintf("7f3a2c000000-7f3a2c001000 rw-s 00000000 00:23 %d /dev/shm/nccl-Gone01 (deleted)\n", ino)
				if err := os.WriteFile(filepath.Join(h.Root, "proc/10/maps"), []byte(line), 0o644); err != nil {
					t.Fatal(err)
				}
				tt.want = map[string]State{"nccl-Gone01": InUse}
			}
			inv := scan(t, h)
			got := states(inv)
			if len(got) != len(tt.want) {
				t.Errorf("scanned %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s: %s (%s), want %s", k, got[k], segment(t, inv, k).Reason, v)
				}
			}
		})
	}
}

func TestScanDetails(t *testing.T) {
	me := os.Geteuid()
	h := world{
		segs: map[string]int64{"nccl-Held01": 8192, "nccl-Mapd02": 0, "nccl-shm-send-1-0-0-1": 0},
		procs: []proc{
			{pid: 100, uid: me, comm: "pt_main_thread", fds: map[string]string{"3": "/dev/shm/nccl-Held01"}, maps: []string{"nccl-Held01"}},
			{pid: 200, uid: me, maps: []string{"nccl-Mapd02"}},
		},
	}.build(t)
	inv := scan(t, h)
	held := segment(t, inv, "nccl-Held01")
	if len(held.Holders) != 1 || held.Holders[0] != (Holder{PID: 100, Comm: "pt_main_thread", UID: me, Via: "fd"}) {
		t.Errorf("holders of an open and mapped file = %+v (want one, via fd)", held.Holders)
	}
	if held.Allocated < 8192 || held.Size != 8192 || held.Ino == 0 || held.Dev == 0 || held.Nlink != 1 || held.UID != me {
		t.Errorf("stat data = %+v", held)
	}
	if m := segment(t, inv, "nccl-Mapd02"); len(m.Holders) != 1 || m.Holders[0].Via != "map" || m.Holders[0].PID != 200 {
		t.Errorf("mapped holder = %+v", m.Holders)
	}
	if k := segment(t, inv, "nccl-shm-send-1-0-0-1").Kind; k != "nccl-legacy" {
		t.Errorf("legacy kind = %s", k)
	}
	if inv.ScannedPIDs != 2 || len(inv.UnreadablePIDs) != 0 {
		t.Errorf("scanned %d pids, unreadable %v", inv.ScannedPIDs, inv.UnreadablePIDs)
	}
}

func TestScanCancelledIsAnError(t *testing.T) {
	h := world{segs: map[string]int64{"nccl-a1": 0}, procs: []proc{{pid: 5, uid: 0}}}.build(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if inv, err := Scan(ctx, h); err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled scan returned %v, %v: it must never claim segments are orphaned", inv, err)
	}
}

func TestSegmentsFindings(t *testing.T) {
	me := os.Geteuid()
	other := me + 1000
	tests := []struct {
		name     string
		w        world
		sev      checks.Severity
		title    string
		problems int
		check    func(t *testing.T, fs []checks.Finding)
	}{
		{name: "healthy: nothing there", w: world{segs: map[string]int64{"unrelated": 0}}, sev: checks.OK, title: "No NCCL or PyTorch segments in /dev/shm"},
		{name: "orphans", w: world{segs: map[string]int64{"nccl-a1": 0, "nccl-b2": 0, "nccl-c3": 0}},
			sev: checks.Warn, title: "3 orphaned NCCL segments hold 0 B in /dev/shm (left by a crashed job)", problems: 1,
			check: func(t *testing.T, fs []checks.Finding) {
				f := fs[0]
				if f.Fixes[0] != "shm.cleanup" || f.Guide != "shm-stale-segments" {
					t.Errorf("fix/guide = %v %s", f.Fixes, f.Guide)
				}
				if f.Evidence["orphaned"] != 3 || f.Evidence["in_use"] != 0 || f.Evidence["total"] != 3 {
					t.Errorf("evidence %v", f.Evidence)
				}
				list := f.Evidence["segments"].([]map[string]any)
				if len(list) != 3 || list[0]["name"] != "nccl-a1" || list[0]["state"] != "orphaned" || list[0]["age_seconds"].(int64) < 3500 {
					t.Errorf("segment list %v", list)
				}
			}},
		{name: "one orphan, singular", w: world{segs: map[string]int64{"nccl-a1": 64 << 10}},
			sev: checks.Warn, title: "1 orphaned NCCL segment holds 64 KiB in /dev/shm", problems: 1},
		{name: "shm full of orphans is an error", w: world{segs: map[string]int64{"nccl-a1": 40 << 20, "nccl-b2": 40 << 20}, statTotal: 128 << 20},
			sev: checks.Error, title: "2 orphaned NCCL segments hold 80 MiB", problems: 1,
			check: func(t *testing.T, fs []checks.Finding) {
				if !strings.Contains(fs[0].Detail, "fill 62% of /dev/shm") {
					t.Errorf("detail %q", fs[0].Detail)
				}
				if fs[0].Evidence["reclaimable_bytes"].(int64) < 80<<20 {
					t.Errorf("reclaimable %v", fs[0].Evidence["reclaimable_bytes"])
				}
			}},
		{name: "NCCL and PyTorch orphans together", w: world{segs: map[string]int64{"nccl-a1": 0, "torch_77_1": 0, "sem.mp-x": 0}},
			sev: checks.Warn, title: "1 orphaned NCCL segment and 2 others hold", problems: 1},
		{name: "only PyTorch leftovers are info", w: world{segs: map[string]int64{"torch_77_1": 0, "sem.mp-x": 0}},
			sev: checks.Info, title: "2 orphaned PyTorch/semaphore files hold"},
		{name: "live holders are not problems", w: world{segs: map[string]int64{"nccl-live": 0, "nccl-mapd": 0},
			procs: []proc{{pid: 9, uid: me, fds: map[string]string{"7": "/dev/shm/nccl-live"}}, {pid: 10, uid: me, maps: []string{"nccl-mapd"}}}},
			sev: checks.Info, title: "2 segments in use by 2 running processes; they will not be touched",
			check: func(t *testing.T, fs []checks.Finding) {
				list := fs[0].Evidence["segments"].([]map[string]any)
				if h := list[0]["holders"].([]string); h[0] != "9/python via fd" {
					t.Errorf("holders %v", h)
				}
				if h := list[1]["holders"].([]string); h[0] != "10/python via map" {
					t.Errorf("holders %v", h)
				}
			}},
		{name: "symlink to a file outside is flagged, never followed",
			w:   world{files: map[string]any{"/dev/shm/nccl-evil": ft.Symlink("/etc/passwd")}},
			sev: checks.Info, title: "Symlink in /dev/shm: nccl-evil -> /etc/passwd",
			check: func(t *testing.T, fs []checks.Finding) {
				for _, f := range fs {
					if len(f.Fixes) > 0 {
						t.Errorf("a symlink must not be offered for cleanup: %s", f.Title)
					}
				}
			}},
		{name: "another user's orphans", w: world{segs: map[string]int64{"nccl-theirs": 0}, euid: &other},
			sev: checks.Info, title: fmt.Sprintf("1 orphaned segment of other users holds 0 B in /dev/shm (uid %d)", me)},
		{name: "hard link", w: world{segs: map[string]int64{"nccl-hl": 0}, files: map[string]any{"/dev/shm/nccl-hl2": ""}},
			sev: checks.Info, title: "2 segments have other hard links: nccl-hl, nccl-hl2", problems: 1},
		{name: "non-printable name shown escaped", w: world{segs: map[string]int64{"nccl-\x1b[2J\x07": 0}},
			sev: checks.Info, title: `1 name contains control or invalid bytes (shown escaped): nccl-\x1b[2J\x07`, problems: 1},
		{name: "not a regular file", w: world{files: map[string]any{"/dev/shm/nccl-dir": nil}},
			sev: checks.Info, title: "1 entry with a segment name is not a regular file: nccl-dir"},
		{name: "unknown in a shared container tmpfs", w: world{segs: map[string]int64{"nccl-x": 0}, files: map[string]any{
			"/proc/self/ns/pid": ft.Symlink("pid:[4026532301]"), "/.dockerenv": "", "/proc/self/ns/ipc": ft.Symlink("ipc:[4026531839]"),
			"/proc/self/mountinfo": "99 90 0:23 / /dev/shm rw - tmpfs tmpfs rw,size=32g\n"}},
			sev: checks.Info, title: "1 segment (0 B) could not be proven unused",
			check: func(t *testing.T, fs []checks.Finding) {
				if !strings.Contains(fs[0].Detail, "--ipc=host") || fs[0].Evidence["all_holders_visible"] != false {
					t.Errorf("detail %q evidence %v", fs[0].Detail, fs[0].Evidence)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.w.build(t)
			if tt.name == "hard link" {
				if err := os.Remove(filepath.Join(h.Root, "dev/shm/nccl-hl2")); err != nil {
					t.Fatal(err)
				}
				if err := os.Link(filepath.Join(h.Root, "dev/shm/nccl-hl"), filepath.Join(h.Root, "dev/shm/nccl-hl2")); err != nil {
					t.Fatal(err)
				}
			}
			fs, err := runSegments(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			if !has(fs, tt.sev, tt.title) {
				t.Fatalf("want %s %q in\n%s", tt.sev, tt.title, titles(fs))
			}
			if e, w := checks.Problems(fs); e+w != tt.problems {
				t.Errorf("%d problems, want %d:\n%s", e+w, tt.problems, titles(fs))
			}
			for _, f := range fs {
				if strings.ContainsAny(f.Title, "\x1b\x07") {
					t.Errorf("raw control byte in title %q", f.Title)
				}
			}
			if fs[0].Evidence == nil {
				t.Error("first finding carries no evidence")
			}
			if tt.check != nil {
				tt.check(t, fs)
			}
		})
	}
}

func TestYoungSegments(t *testing.T) {
	h := world{segs: map[string]int64{"nccl-new": 0}}.build(t)
	now := time.Now()
	_ = os.Chtimes(filepath.Join(h.Root, "dev/shm/nccl-new"), now, now)
	inv := scan(t, h)
	if inv.Segments[0].State != Young {
		t.Errorf("fresh segment judged %s", inv.Segments[0].State)
	}
	fs, _ := runSegments(context.Background(), h)
	if !has(fs, checks.Info, "1 segment modified in the last 2 minutes") {
		t.Errorf("got\n%s", titles(fs))
	}
}

func TestMissingShmDir(t *testing.T) {
	h := ft.Tree(t, map[string]any{"/proc/self/mountinfo": mountinfoHost}, host.FixtureSpec{})
	fs, err := runSegments(context.Background(), h)
	if err != nil || len(fs) != 1 || fs[0].Severity != checks.Skipped {
		t.Errorf("got %v\n%s", err, titles(fs))
	}
}

// TestProveBatch: one scan for a batch finds a holder that appeared after
// the inventory, and a file written to since is young again.
func TestProveBatch(t *testing.T) {
	me := os.Geteuid()
	h := world{segs: map[string]int64{"nccl-late": 0, "nccl-ok": 0, "nccl-touch": 0},
		procs: []proc{{pid: 70, uid: me}}}.build(t)
	inv := scan(t, h)
	for _, s := range inv.Segments {
		if s.State != Orphaned {
			t.Fatalf("%s: %s", s.Name, s.State)
		}
	}
	if err := os.Symlink("/dev/shm/nccl-late", filepath.Join(h.Root, "proc/70/fd/9")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := ProveBatch(ctx, h, inv.Segments)
	if err != nil || p.Blind != "" {
		t.Fatalf("ProveBatch: %v, blind %q", err, p.Blind)
	}
	now := time.Now()
	for i, s := range inv.Segments {
		if s.Name == "nccl-touch" {
			s.ModTime = now // as a fresh stat would see it after a write
		}
		st, why := p.Judge(i, s, LeaseResult{}, now)
		want := map[string]State{"nccl-late": InUse, "nccl-ok": Orphaned, "nccl-touch": Young}[s.Name]
		if st != want {
			t.Errorf("%s: %s (%s), want %s", s.Name, st, why, want)
		}
	}
	if hs := p.Holders[0]; len(hs) != 1 || hs[0].PID != 70 {
		t.Errorf("late holder: %+v", hs)
	}
	// A refused lease is a holder even when /proc shows none; a granted
	// one proves even a scan that could not see everything.
	if st, _ := p.Judge(1, inv.Segments[1], LeaseResult{Verdict: LeaseHeld, Why: heldWhy}, now); st != InUse {
		t.Errorf("refused lease judged %s", st)
	}
	blind := &Proof{Holders: p.Holders, Blind: "processes in other PID namespaces may hold it"}
	if st, _ := blind.Judge(1, inv.Segments[1], LeaseResult{Verdict: LeaseFree}, now); st != Orphaned {
		t.Errorf("granted lease judged %s", st)
	}
	if st, _ := blind.Judge(1, inv.Segments[1], LeaseResult{Verdict: LeaseUnavailable, Why: "no"}, now); st != Unknown {
		t.Errorf("no lease, blind scan judged %s", st)
	}
}

func TestMapsFields(t *testing.T) {
	tests := []struct{ line, dev, ino, path string }{
		{"7f3a2c000000-7f3a2c001000 rw-s 00000000 00:23 173521 /dev/shm/nccl-abc\n", "00:23", "173521", "/dev/shm/nccl-abc"},
		{"7f3a2c000000-7f3a2c001000 rw-s 00000000 00:1a3 5 /dev/shm/nccl-a (deleted)", "00:1a3", "5", "/dev/shm/nccl-a (deleted)"},
		{"7ffd1000-7ffd2000 rw-p 00000000 00:00 0 ", "00:00", "0", ""},
		{"00400000-00452000 r-xp 00000000 08:02 173521       /usr/bin/with  two spaces", "08:02", "173521", "/usr/bin/with  two spaces"},
	}
	for _, tt := range tests {
		dev, ino, p, ok := mapsFields([]byte(tt.line))
		if !ok || string(dev) != tt.dev || string(ino) != tt.ino || string(p) != tt.path {
			t.Errorf("mapsFields(%q) = %q %q %q %v", tt.line, dev, ino, p, ok)
		}
	}
	for _, bad := range []string{"", "short line", "a b c d"} {
		if _, _, _, ok := mapsFields([]byte(bad)); ok {
			t.Errorf("mapsFields(%q) accepted", bad)
		}
	}
	for in, want := range map[string]uint64{"0": 0, "18446744073709551615": 1<<64 - 1} {
		if n, ok := parseUint([]byte(in)); !ok || n != want {
			t.Errorf("parseUint(%s) = %d %v", in, n, ok)
		}
	}
	for _, bad := range []string{"", "18446744073709551616", "12a", "-1"} {
		if _, ok := parseUint([]byte(bad)); ok {
			t.Errorf("parseUint(%q) accepted", bad)
		}
	}
	if got := mapsDev(unix.Mkdev(0, 0x1a3)); got != "00:1a3" {
		t.Errorf("mapsDev = %s", got)
	}
}

func TestHuman(t *testing.T) {
	for in, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 9637892: "9.2 MiB", 64 << 20: "64 MiB", 3 << 40: "3 TiB", 1<<20 - 1: "1024 KiB"} {
		if got := Human(in); got != want {
			t.Errorf("Human(%d) = %s, want %s", in, got, want)
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add([]byte(mountinfoDocker))
	f.Add([]byte("36 35 98:0 /mnt1 /mnt\\040x rw,noatime master:1 - ext3 /dev/root rw\n1 2 - - - - -\n"))
	f.Add([]byte("7f3a2c000000-7f3a2c001000 rw-s 00000000 00:23 173521 /dev/shm/nccl-abc (deleted)\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, e := range parseMountinfo(b) {
			if e.mountPoint == "" && e.fsType == "" && e.source == "" {
				continue
			}
		}
		_, _ = findMount(parseMountinfo(b), "/dev/shm")
		for _, line := range strings.Split(string(b), "\n") {
			dev, ino, p, ok := mapsFields([]byte(line))
			if ok && (len(dev) == 0 || len(ino) == 0 || len(dev)+len(ino)+len(p) > len(line)) {
				t.Fatalf("mapsFields(%q) = %q %q %q", line, dev, ino, p)
			}
			_, _ = parseUint(ino)
		}
		_ = host.UnescapeMount(string(b))
	})
}

// TestFixtureTree runs both checks on a checked-in fixture tree through
// host.LoadFixture (statfs from host.yaml): a Docker container with the
// default 64 MiB /dev/shm, two orphans and two segments in use.
func TestFixtureTree(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/docker-64m")); err != nil {
		t.Fatal(err)
	}
	// A checkout cannot carry /dev/shm's 1777; a 0755 one is a finding of its own.
	if err := os.Chmod(filepath.Join(root, "dev/shm"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // a checkout makes every file new
	for _, n := range []string{"nccl-Orph01", "nccl-Orph02", "nccl-Held01", "nccl-Mapd02"} {
		if err := os.Chtimes(filepath.Join(root, "dev/shm", n), old, old); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.LoadFixture(root)
	if err != nil {
		t.Fatal(err)
	}
	h.EUID = fileOwner(t, filepath.Join(root, "dev/shm/nccl-Orph01"))
	mount, err := runMount(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := runSegments(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		fs    []checks.Finding
		sev   checks.Severity
		title string
	}{
		{mount, checks.OK, "/dev/shm is tmpfs, 64 MiB, 75% used (16 MiB free)"},
		{mount, checks.Warn, "/dev/shm is 64 MiB, the Docker and Kubernetes default"},
		// Another container may share this "shm" tmpfs (--ipc=container:ID)
		// and a fixture tree has no kernel to lease from: unprovable.
		{segs, checks.Info, "2 segments (0 B) could not be proven unused"},
		{segs, checks.Info, "2 segments in use by 2 running processes"},
	} {
		if !has(want.fs, want.sev, want.title) {
			t.Errorf("want %s %q in\n%s%s", want.sev, want.title, titles(mount), titles(segs))
		}
	}
	if e, w := checks.Problems(append(mount, segs...)); e != 0 || w != 1 {
		t.Errorf("%d errors, %d warnings:\n%s%s", e, w, titles(mount), titles(segs))
	}
	ev := segs[0].Evidence
	if ev["pid_namespace"] != "unknown" || ev["all_holders_visible"] != false {
		t.Errorf("a container's shm may be shared with other containers, yet all holders are called visible: %v", ev["visibility"])
	}
}
