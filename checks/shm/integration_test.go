package shm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
)

// TestMain lets the test binary act as a helper process that holds a
// segment open or mapped, the way a live NCCL rank does.
func TestMain(m *testing.M) {
	if mode := os.Getenv("NCCLWIZ_SHM_HELPER"); mode != "" {
		os.Exit(helper(mode, os.Getenv("NCCLWIZ_SHM_FILE")))
	}
	os.Exit(m.Run())
}

func helper(mode, path string) int {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if mode == "map" {
		mem, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		mem[0] = 'm'
		f.Close() // only the mapping remains, as with NCCL 2.12-2.15 attachers
		defer syscall.Munmap(mem)
	} else {
		defer f.Close()
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // block until the test closes stdin
	return 0
}

// RequireRoot skips a test that needs root, saying why.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs (CI runs as root)")
	}
}

// mountTmpfs mounts a real tmpfs of the given size and unmounts it at the end.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=1777", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// startHolder runs a helper process holding path (mode "open" or "map").
func startHolder(t *testing.T, mode, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NCCLWIZ_SHM_HELPER="+mode, "NCCLWIZ_SHM_FILE="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("helper %s %s: %q %v", mode, path, line, err)
	}
	return cmd
}

func makeSegment(t *testing.T, dir, name string, size int64, age time.Duration) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Fatalf("fallocate %s: %v", name, err)
	}
	f.Close()
	old := time.Now().Add(-age)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRealTmpfsHoldersAndFull(t *testing.T) {
	requireRoot(t)
	dir := mountTmpfs(t, "1M")
	held := makeSegment(t, dir, "nccl-Held01", 64<<10, time.Hour)
	mapped := makeSegment(t, dir, "nccl-Mapd02", 64<<10, time.Hour)
	for _, n := range []string{"nccl-Orph03", "nccl-Orph04", "nccl-Orph05"} {
		makeSegment(t, dir, n, 64<<10, time.Hour)
	}
	startHolder(t, "open", held)
	startHolder(t, "map", mapped)

	h := host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
	inv, err := Scan(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	got := states(inv)
	want := map[string]State{"nccl-Held01": InUse, "nccl-Mapd02": InUse, "nccl-Orph03": Orphaned, "nccl-Orph04": Orphaned, "nccl-Orph05": Orphaned}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	for _, s := range inv.Segments {
		if s.Name == "nccl-Mapd02" && (len(s.Holders) == 0 || s.Holders[0].Via != "map") {
			t.Errorf("mapped segment holders = %+v (want via map)", s.Holders)
		}
		if s.Name == "nccl-Held01" && (len(s.Holders) == 0 || s.Holders[0].Via != "fd") {
			t.Errorf("open segment holders = %+v (want via fd)", s.Holders)
		}
	}
	for _, s := range inv.Segments {
		if s.State == Orphaned {
			ok, hs, err := ProveOrphaned(context.Background(), h, s)
			if !ok || err != nil {
				t.Errorf("ProveOrphaned(%s) = %v %v %v", s.Name, ok, hs, err)
			}
		}
		if s.State == InUse {
			if ok, _, _ := ProveOrphaned(context.Background(), h, s); ok {
				t.Errorf("in-use %s proven orphaned", s.Name)
			}
		}
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
	fs, err := runMount(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if !has(fs, checks.Error, "is full") {
		t.Errorf("full tmpfs not reported:\n%s", titles(fs))
	}
	if fs[0].Evidence["size_option"] != "1M" && fs[0].Evidence["size_option"] != "1024k" {
		t.Errorf("size option = %v", fs[0].Evidence["size_option"])
	}
}
