package steps

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

// docker runs the docker CLI and returns its trimmed output.
func docker(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// buildTestImage imports a directory holding a static ncclwiz (built with
// CGO_ENABLED=0 from this module) and the static C holder as an image (no
// registry: docker import), removed when the test ends.
func buildTestImage(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker is needed")
	}
	if out, err := docker(t, "info", "--format", "{{.ServerVersion}}"); err != nil {
		t.Skipf("no Docker Engine here: %v %s", err, out)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is needed to build a static ncclwiz for the image")
	}
	root := t.TempDir()
	for _, d := range []string{"dev/shm", "proc", "sys", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	holder := shmtest.BuildHolderStatic(t)
	b, err := os.ReadFile(holder)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "holder"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	module := filepath.Dir(filepath.Dir(file))
	build := exec.Command(goBin, "build", "-o", filepath.Join(root, "ncclwiz"), ".")
	build.Dir = module
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static ncclwiz: %v\n%s", err, out)
	}
	tag := "ncclwiz-test-shm:" + randomHex(t)
	imp := exec.Command("docker", "import", "-", tag)
	tarc := exec.Command("tar", "-C", root, "-c", ".")
	pipe, err := tarc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp.Stdin = pipe
	if err := tarc.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v %s", err, out)
	}
	_ = tarc.Wait()
	t.Cleanup(func() { _, _ = docker(t, "rmi", "-f", tag) })
	return tag
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// runContainer starts a detached container (stdin kept open, so a holder
// waits) and removes it when the test ends.
func runContainer(t *testing.T, name string, args ...string) {
	t.Helper()
	argv := append([]string{"run", "-d", "-i", "--name", name}, args...)
	t.Cleanup(func() { _, _ = docker(t, "rm", "-f", name) }) // also when it was created but failed to start
	if out, err := docker(t, argv...); err != nil {
		t.Fatalf("docker %v: %v %s", argv, err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		logs, _ := docker(t, "logs", name)
		if strings.Contains(logs, "ready") {
			return
		}
		if strings.Contains(logs, "error") || time.Now().After(deadline) {
			t.Fatalf("container %s: %q", name, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCleanupDockerSharedIPC (item 2): container X holds segments in its
// /dev/shm (a tmpfs named "shm", once taken as proof of privacy) — by a
// descriptor only in flight in a socket queue, and from a second container
// joined with --ipc=container:X by a thread after its main thread exited. ncclwiz runs in a third container sharing X's IPC
// namespace: its PID namespace sees none of them. The check no longer says
// every holder is visible, and fix removes only the orphan.
func TestCleanupDockerSharedIPC(t *testing.T) {
	shmtest.RequireRoot(t)
	img := buildTestImage(t)
	x := "ncclwiz-test-shm-x-" + randomHex(t)
	// X's main thread must stay alive: runc joins X's namespaces through
	// its PID 1.
	runContainer(t, x, "--ipc=shareable", "-e", "HOLDER_CREATE=1", img, "/holder", "scm-inflight", "/dev/shm/nccl-Fly02")
	y := "ncclwiz-test-shm-y-" + randomHex(t)
	runContainer(t, y, "--ipc=container:"+x, "-e", "HOLDER_CREATE=1", img, "/holder", "leader-map", "/dev/shm/nccl-Held01")
	pid, err := docker(t, "inspect", "-f", "{{.State.Pid}}", x)
	if err != nil {
		t.Fatal(pid, err)
	}
	shmDir := "/proc/" + pid + "/root/dev/shm" // X's /dev/shm, seen from the host
	orphan := shmtest.MakeSegment(t, shmDir, "nccl-Orph03", 4096, time.Hour)
	inodes := map[string]uint64{}
	for _, n := range []string{"nccl-Held01", "nccl-Fly02"} {
		inodes[n] = inode(t, filepath.Join(shmDir, n))
	}

	check, _ := docker(t, "run", "--rm", "--ipc=container:"+x, img, "/ncclwiz", "check", "--only", "shm.segments", "--json")
	if !strings.Contains(check, `"all_holders_visible": false`) {
		t.Errorf("check from a container sharing X's IPC namespace:\n%s", check)
	}
	out, err := docker(t, "run", "--rm", "--ipc=container:"+x, img, "/ncclwiz", "fix", "--apply", "shm.cleanup", "--yes")
	if err != nil && !strings.Contains(out, "removed") {
		t.Fatalf("fix: %v\n%s", err, out)
	}
	if exists(orphan) || !strings.Contains(out, "removed 1 segment") {
		t.Errorf("the orphan was not removed:\n%s", out)
	}
	for n, ino := range inodes {
		p := filepath.Join(shmDir, n)
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil || st.Ino != ino {
			t.Errorf("REMOVED WHILE HELD in another container: %s\n%s", n, out)
		}
	}
}
