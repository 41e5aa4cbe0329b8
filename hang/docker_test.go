package hang

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
)

// TestJobInDocker inspects, from the host, a job running in a container:
// its ranks live in another PID and mount namespace, and their dumps are
// in the container's /tmp (read through /proc/PID/root). The image holds
// only the static fake job (hang/internal/fakejob), named torchrun.
func TestJobInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs a container")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for Docker and for reading another namespace's /proc/PID/root")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("no Docker Engine: %v %s", err, out)
	}
	root := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(root, "torchrun"), "./internal/fakejob")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fakejob: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	suffix := strconv.Itoa(os.Getpid())
	image := "ncclwiz-test-hang:" + suffix
	imp := exec.Command("sh", "-c", `tar -C "$1" -c . | docker import - "$2"`, "sh", root, image)
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })
	name := "ncclwiz-test-hang-" + suffix
	out, err := exec.Command("docker", "run", "-d", "--name", name, "--network", "none", image, "/torchrun", "launcher", "spin,pipe,spin").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	pidOut, err := exec.Command("docker", "inspect", "--format", "{{.State.Pid}}", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	launcher, _ := strconv.Atoi(strings.TrimSpace(string(pidOut)))

	h := host.Local(host.LocalOptions{})
	j := jobUnder(t, h, launcher, 3)
	if j.Launcher.PID != launcher || !j.Launcher.IsNamespaceInit() {
		t.Fatalf("launcher %+v, want the container's PID 1 (host pid %d)", j.Launcher, launcher)
	}
	settle(t, h, j.Ranks[1].PID)
	waitFile(t, h, "/proc/"+strconv.Itoa(j.Ranks[1].PID)+"/root/tmp/nccl_trace_rank_1")
	r, err := Inspect(context.Background(), h, j, Options{Interval: time.Second, NoRAS: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Suspects) != 1 || r.Suspects[0] != 1 {
		t.Fatalf("suspects %v, want [1]: %+v", r.Suspects, r.Evidence)
	}
	for _, s := range r.Samples {
		if s.NSPID == s.PID {
			t.Errorf("rank %d: ns pid %d equals host pid: not seen across namespaces", s.Rank, s.PID)
		}
	}
	fr := r.FlightRecorder
	if len(fr.Dumps) != 3 || len(fr.Groups) != 1 || len(fr.Groups[0].Lagging) != 1 || fr.Groups[0].Lagging[0] != 1 {
		t.Fatalf("dumps from the container's /tmp: %+v", fr)
	}
}

func waitFile(t *testing.T, h *host.Host, p string) {
	t.Helper()
	for try := 0; try < 100; try++ {
		if _, err := h.Lstat(p); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", p)
}
