package shm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

// benchHost builds a fixture with nProcs processes (each with 16 fds and a
// 300-line maps file, like a Python training rank) and nSegs segments, a
// tenth of them held.
func benchHost(b *testing.B, nProcs, nSegs int) *host.Host {
	b.Helper()
	root := b.TempDir()
	mk := func(p string, data string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	inos := make([]uint64, nSegs)
	for i := 0; i < nSegs; i++ {
		p := fmt.Sprintf("dev/shm/nccl-%06d", i)
		mk(p, "x")
		full := filepath.Join(root, p)
		_ = os.Chtimes(full, old, old)
		fi, _ := os.Stat(full)
		inos[i] = fi.Sys().(*syscall.Stat_t).Ino
	}
	mk("proc/self/mountinfo", mountinfoHost)
	mk("proc/self/status", "NSpid:\t42\n")
	var maps strings.Builder
	for l := 0; l < 300; l++ {
		fmt.Fprintf(&maps, "7f%010x-7f%010x r-xp 00000000 08:02 %d /usr/lib/python3.11/lib-dynload/mod%d.so\n", l*4096, l*4096+4096, 100000+l, l)
	}
	for p := 1; p <= nProcs; p++ {
		dir := fmt.Sprintf("proc/%d", p)
		mk(dir+"/status", "Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n")
		m := maps.String()
		if p%10 == 0 {
			seg := (p / 10) % nSegs
			m += fmt.Sprintf("7f3a2c000000-7f3a2c001000 rw-s 00000000 00:23 %d /dev/shm/nccl-%06d\n", inos[seg], seg)
		}
		mk(dir+"/maps", m)
		for fd := 0; fd < 16; fd++ {
			target := "/dev/null"
			if fd == 5 && p%20 == 0 {
				target = fmt.Sprintf("/dev/shm/nccl-%06d", (p/20)%nSegs)
			}
			full := filepath.Join(root, dir, "fd", fmt.Sprint(fd))
			_ = os.MkdirAll(filepath.Dir(full), 0o755)
			if err := os.Symlink(target, full); err != nil {
				b.Fatal(err)
			}
		}
	}
	h, err := host.FromSpec(root, host.FixtureSpec{UID: os.Geteuid(),
		Statfs: map[string]host.StatFS{"/dev/shm": {Type: host.TmpfsMagic, Bsize: 4096, Blocks: 1 << 22, Bfree: 1 << 21, Bavail: 1 << 21, Files: 1 << 20, Ffree: 1 << 19}}})
	if err != nil {
		b.Fatal(err)
	}
	h.EUID = os.Geteuid()
	return h
}

// BenchmarkShmChecks measures the whole shm check run (shm.mount and
// shm.segments) on ~1,000 processes and ~500 segments (README states the
// figure).
func BenchmarkShmChecks(b *testing.B) {
	h := benchHost(b, 1000, 500)
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range Checks() {
			fs, err := c.Run(context.Background(), h)
			if err != nil || len(fs) == 0 {
				b.Fatal(c.ID, err)
			}
		}
	}
}

// BenchmarkScanRealProc scans this machine's real /proc for 500 segments in
// a real tmpfs (root only): the device+inode path the fixture cannot take.
func BenchmarkScanRealProc(b *testing.B) {
	dir := shmtest.MountTmpfs(b, "64M")
	for i := 0; i < 500; i++ {
		shmtest.MakeSegment(b, dir, fmt.Sprintf("nccl-%06d", i), 4096, time.Hour)
	}
	h := host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
	b.ReportAllocs()
	for b.Loop() {
		inv, err := Scan(context.Background(), h)
		if err != nil || len(inv.Segments) != 500 {
			b.Fatal(err)
		}
	}
}

// BenchmarkHolderIdentity reads the name and uids of every process of the
// real /proc, as the scan does for each holder and each process it cannot
// inspect (all other users' processes, without root).
func BenchmarkHolderIdentity(b *testing.B) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	ents, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	b.ReportMetric(float64(len(pids)), "pids")
	for b.Loop() {
		for _, pid := range pids {
			_, _ = procIdentity(h, pid)
		}
	}
}
