package hang

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/dockertest"
)

// TestJobInDocker inspects, from the host, a job running in a container:
// its ranks live in another PID and mount namespace, and their dumps are
// in the container's /tmp (read through /proc/PID/root). The image holds
// only the static fake job (hang/internal/fakejob), named torchrun.
func TestJobInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs a container")
	}
	dockertest.Require(t)
	root := dockertest.Rootfs(t, "tmp")
	dockertest.AddStatic(t, root, "torchrun", "./hang/internal/fakejob")
	image := dockertest.Import(t, "hang", root)
	name := dockertest.Name(t, "hang", "job")
	dockertest.Start(t, name, "--network", "none", "-e", "FAKEJOB_DUMPS=/tmp/nccl_trace_rank_", image, "/torchrun", "launcher", "wait,pipe,wait")
	launcher, _ := strconv.Atoi(dockertest.PID(t, name))

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
