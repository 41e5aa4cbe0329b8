// Package shmtest provides real-machine helpers for tests that need a tmpfs
// and live processes holding shared-memory segments: the test binary
// re-executes itself as a holder, the way a running NCCL rank holds one.
package shmtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/grouptest"
)

const (
	envMode = "NCCLWIZ_SHMTEST_MODE"
	envFile = "NCCLWIZ_SHMTEST_FILE"
)

// Main must be called first in TestMain: in a helper process it does the
// helper's work and exits.
func Main() {
	mode := os.Getenv(envMode)
	if mode == "" {
		return
	}
	os.Exit(helper(mode, os.Getenv(envFile)))
}

func helper(mode, path string) int {
	switch mode {
	case "open", "map":
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		var st syscall.Stat_t
		_ = syscall.Fstat(int(f.Fd()), &st)
		if mode == "map" {
			mem, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
			if err != nil {
				fmt.Println("error", err)
				return 1
			}
			// Read, not written: a write would update the file's mtime and
			// make it "young", which keeps it from cleanup for the wrong reason.
			if mem[0] == 0xff {
				fmt.Println("first byte", mem[0])
			}
			f.Close() // only the mapping remains, as for NCCL 2.12-2.15 attachers
			defer syscall.Munmap(mem)
		} else {
			defer f.Close()
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		// Still the same file under its name? (Through a bind mount the
		// name pins the inode, so the test checks the shm name itself.)
		var cur syscall.Stat_t
		if err := syscall.Stat(path, &cur); err != nil || cur.Ino != st.Ino || cur.Dev != st.Dev {
			fmt.Println("violation", path)
			return 1
		}
		fmt.Println("ok")
		return 0
	case "churn":
		return churn(path)
	}
	fmt.Println("error unknown mode", mode)
	return 1
}

// churn keeps creating segments that look old (so only their holders keep
// them from being "orphaned"), holds each open then mapped for a while, and
// checks the file is never removed under it. It prints "violation" on the
// first file that disappears while held, else "ok N".
func churn(dir string) int {
	deadline := time.Now().Add(3 * time.Second)
	n := 0
	fmt.Println("ready")
	for time.Now().Before(deadline) {
		p := filepath.Join(dir, fmt.Sprintf("nccl-ch%d-%d", os.Getpid(), n))
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		if err := f.Truncate(4096); err != nil {
			fmt.Println("error", err)
			return 1
		}
		old := time.Now().Add(-time.Hour)
		_ = os.Chtimes(p, old, old)
		mem, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		var st syscall.Stat_t
		_ = syscall.Fstat(int(f.Fd()), &st)
		if n%2 == 0 {
			f.Close() // half of them are held by the mapping alone
		}
		for i := 0; i < 20; i++ {
			var cur syscall.Stat_t
			if err := syscall.Stat(p, &cur); err != nil || cur.Ino != st.Ino {
				fmt.Println("violation", p)
				return 1
			}
			mem[i] = byte(i)
			time.Sleep(2 * time.Millisecond)
		}
		_ = syscall.Munmap(mem)
		if n%2 != 0 {
			f.Close()
		}
		_ = os.Remove(p)
		n++
	}
	fmt.Println("ok", n)
	return 0
}

// RequireRoot skips tests that need root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs (CI runs as root)")
	}
}

// MountTmpfs mounts a real tmpfs and unmounts it when the test ends.
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	return mountTmpfs(t, size, "tmpfs")
}

// MountShm mounts a tmpfs named "shm", as Docker, Podman and containerd
// name a container's /dev/shm.
func MountShm(t testing.TB, size string) string {
	t.Helper()
	return mountTmpfs(t, size, "shm")
}

func mountTmpfs(t testing.TB, size, source string) string {
	t.Helper()
	RequireRoot(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=1777", source, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// MakeSegment creates an allocated file of size bytes, last modified age ago.
func MakeSegment(t testing.TB, dir, name string, size int64, age time.Duration) string {
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

// Process is a running helper.
type Process struct {
	Cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// Start runs the test binary as a helper in mode ("open", "map", "churn")
// on path and waits until it is ready.
func Start(t testing.TB, mode, path string) *Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envMode+"="+mode, envFile+"="+path)
	return StartCmd(t, cmd)
}

// StartCmd starts cmd as a holder: it prints "ready" on stdout once it
// holds its file, and finishes when its stdin is closed. The process (and
// its process group) is killed when the test ends.
func StartCmd(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the group is killed (cleanups run last-in first-out).
	t.Cleanup(func() { stdin.Close() })
	return &Process{Cmd: cmd, stdin: stdin, out: grouptest.StartReady(t, cmd)}
}

// TryStartCmd is StartCmd for a layout this machine may not allow (an
// io_uring refused by seccomp): it returns nil, and the group is killed,
// when the first line is not "ready".
func TryStartCmd(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close() })
	line, out := grouptest.Start(t, cmd)
	if line != "ready" {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return nil
	}
	return &Process{Cmd: cmd, stdin: stdin, out: out}
}

// StartLoop attaches path to a loop device (losetup, root): the kernel's
// loop driver holds the file open, no process does. The "holder" is a
// shell that detaches it when its stdin closes and prints "ok" if path is
// still the same file. It returns nil where no loop device can be made.
func StartLoop(t testing.TB, path string) *Process {
	t.Helper()
	if _, err := exec.LookPath("losetup"); err != nil {
		return nil
	}
	t.Cleanup(func() {
		// Whatever happened to the shell, no loop device stays attached.
		out, _ := exec.Command("losetup", "-j", path, "-n", "-O", "NAME").Output()
		for _, dev := range strings.Fields(string(out)) {
			_ = exec.Command("losetup", "-d", dev).Run()
		}
	})
	cmd := exec.Command("sh", "-c", `ino=$(stat -c %i "$1")
dev=$(losetup -f --show "$1" 2>/dev/null) || { echo "error losetup"; exit 1; }
echo ready
cat >/dev/null
losetup -d "$dev"
if [ "$(stat -c %i "$1" 2>/dev/null)" = "$ino" ]; then echo ok; else echo "violation $1"; fi`, "sh", path)
	return TryStartCmd(t, cmd)
}

// StartThroughBind runs a helper in mode ("open", "map") in a private
// mount namespace where path is bind-mounted onto a file with an unrelated
// name elsewhere, holding it only through that name.
func StartThroughBind(t testing.TB, mode, path string) *Process {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare(1) from util-linux is needed")
	}
	other := filepath.Join(t.TempDir(), "weights.bin")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
		`mount --bind "$1" "$2" && exec "$3" -test.run='^$'`, "sh", path, other, self)
	cmd.Env = append(os.Environ(), envMode+"="+mode, envFile+"="+other)
	return StartCmd(t, cmd)
}

// BuildHolder compiles testdata/holder.c (threads, leader exit, SCM_RIGHTS
// holders that Go cannot arrange) with gcc into a directory anyone may
// read, and returns the binary's path. It skips the test without gcc.
func BuildHolder(t testing.TB) string {
	t.Helper()
	return buildHolder(t)
}

// BuildHolderStatic is BuildHolder linked statically, for a container
// image that holds nothing else.
func BuildHolderStatic(t testing.TB) string {
	t.Helper()
	return buildHolder(t, "-static")
}

func buildHolder(t testing.TB, flags ...string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is needed to build the C holder (testdata/holder.c)")
	}
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "testdata", "holder.c")
	bin := filepath.Join(PublicDir(t), "holder")
	args := append([]string{"-O2", "-Wall", "-pthread", "-o", bin, src}, flags...)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		if len(flags) > 0 {
			t.Skipf("gcc %v cannot build here: %v\n%s", flags, err, out)
		}
		t.Fatalf("gcc %s: %v\n%s", src, err, out)
	}
	return bin
}

// PublicDir is a temporary directory that other users (nobody) may enter,
// for binaries they run; removed when the test ends.
func PublicDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ncclwiz-shmtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// CopyExecutable copies the running test binary into a PublicDir so that
// another user can run it, and returns its path.
func CopyExecutable(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(PublicDir(t), filepath.Base(self))
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Result waits for the helper to finish and returns its last line.
func (p *Process) Result() (string, error) {
	p.stdin.Close()
	rest, _ := io.ReadAll(p.out)
	err := p.Cmd.Wait()
	lines := strings.Split(strings.TrimSpace(string(rest)), "\n")
	return lines[len(lines)-1], err
}
