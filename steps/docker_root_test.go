package steps

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/dockertest"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

// buildTestImage imports a directory holding a static ncclwiz (built with
// CGO_ENABLED=0 from this module) and the static C holder as an image (no
// registry: docker import), removed when the test ends.
func buildTestImage(t *testing.T) string {
	t.Helper()
	dockertest.Require(t)
	root := dockertest.Rootfs(t, "dev/shm", "proc", "sys", "tmp", "etc")
	dockertest.Copy(t, root, "holder", shmtest.BuildHolderStatic(t))
	dockertest.AddStatic(t, root, "ncclwiz", ".")
	return dockertest.Import(t, "shm", root)
}

// runContainer starts a detached container (stdin kept open, so a holder
// waits), waits until it says ready, and removes it when the test ends.
func runContainer(t *testing.T, name string, args ...string) {
	t.Helper()
	dockertest.Start(t, name, append([]string{"-i"}, args...)...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		logs, _ := dockertest.Docker("logs", name)
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
	x := dockertest.Name(t, "shm", "x")
	// X's main thread must stay alive: runc joins X's namespaces through
	// its PID 1.
	runContainer(t, x, "--ipc=shareable", "-e", "HOLDER_CREATE=1", img, "/holder", "scm-inflight", "/dev/shm/nccl-Fly02")
	y := dockertest.Name(t, "shm", "y")
	runContainer(t, y, "--ipc=container:"+x, "-e", "HOLDER_CREATE=1", img, "/holder", "leader-map", "/dev/shm/nccl-Held01")
	shmDir := "/proc/" + dockertest.PID(t, x) + "/root/dev/shm" // X's /dev/shm, seen from the host
	orphan := shmtest.MakeSegment(t, shmDir, "nccl-Orph03", 4096, time.Hour)
	inodes := map[string]uint64{}
	for _, n := range []string{"nccl-Held01", "nccl-Fly02"} {
		inodes[n] = inode(t, filepath.Join(shmDir, n))
	}

	check, _ := dockertest.Docker("run", "--rm", "--ipc=container:"+x, img, "/ncclwiz", "check", "--only", "shm.segments", "--json")
	if !strings.Contains(check, `"all_holders_visible": false`) {
		t.Errorf("check from a container sharing X's IPC namespace:\n%s", check)
	}
	out, err := dockertest.Docker("run", "--rm", "--ipc=container:"+x, img, "/ncclwiz", "fix", "--apply", "shm.cleanup", "--yes")
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
