package hang

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/gobin"
	"github.com/ncclwiz/ncclwiz/internal/grouptest"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// fakeJob is hang/internal/fakejob, the fake launcher and ranks (static:
// the same build serves the Docker test's image).
func fakeJob(t *testing.T) string {
	t.Helper()
	return gobin.Build(t, "./hang/internal/fakejob", true)
}

// jobUnder finds the job whose launcher is pid or a descendant of pid.
func jobUnder(t *testing.T, h *host.Host, pid, want int) Job {
	t.Helper()
	for try := 0; try < 50; try++ {
		tab, err := proctab.Read(context.Background(), h, proctab.Options{EnvKeys: EnvKeys})
		if err != nil {
			t.Fatal(err)
		}
		under := map[int]bool{pid: true}
		for _, d := range tab.Descendants(pid) {
			under[d.PID] = true
		}
		for _, j := range FindJobs(tab) {
			if j.Launcher != nil && under[j.Launcher.PID] && len(j.Ranks) == want {
				return j
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no job with %d ranks under pid %d", want, pid)
	return Job{}
}

// settle waits until pid sleeps or is stopped.
func settle(t *testing.T, h *host.Host, pid int) {
	t.Helper()
	for try := 0; try < 100; try++ {
		p, err := proctab.ReadProcess(context.Background(), h, pid, proctab.Options{})
		if err != nil {
			t.Fatalf("rank %d: %v", pid, err)
		}
		if p.State == "S" || p.State == "T" || p.State == "t" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("rank %d never blocked", pid)
}

// TestJobsWithoutLauncher: ranks started without a launcher (by a
// scheduler) form jobs by their rendezvous address; a rank's data-loader
// child, which carries RANK too, is not a rank of its own.
func TestJobsWithoutLauncher(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	bin := fakeJob(t)
	port := strconv.Itoa(40000 + os.Getpid()%20000)
	var pids []int
	for _, spec := range []struct{ rank, port string }{{"0", port}, {"1", port}, {"0", port + "1"}} {
		c := exec.Command(bin)
		c.Args = []string{"python3", "worker.py"}
		c.Env = append(os.Environ(), "FAKEJOB_DO=loader", "RANK="+spec.rank, "WORLD_SIZE=2",
			"MASTER_ADDR=10.9.8.7", "MASTER_PORT="+spec.port)
		grouptest.StartReady(t, c)
		pids = append(pids, c.Process.Pid)
	}
	h := host.Local(host.LocalOptions{})
	var tab *proctab.Table
	var err error
	for try := 0; try < 50; try++ { // the loaders must be visible too
		tab, err = ReadTable(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		if len(tab.Children(pids[0])) > 0 && len(tab.Children(pids[1])) > 0 && len(tab.Children(pids[2])) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	jobs := FindJobs(tab)
	j, err := Pick(jobs, pids[1])
	if err != nil {
		t.Fatal(err)
	}
	if j.Launcher != nil || len(j.Ranks) != 2 || j.Ranks[0].PID != pids[0] || j.Ranks[1].PID != pids[1] {
		t.Fatalf("job of pid %d: launcher %v, ranks %+v", pids[1], j.Launcher, j.Ranks)
	}
	other, err := Pick(jobs, pids[2])
	if err != nil || len(other.Ranks) != 1 {
		t.Fatalf("the job on another port: %+v %v", other, err)
	}
	// --pid of a rank's data-loader child names its rank's job; the child
	// is no rank of its own.
	loader := tab.Children(pids[0])[0].PID
	if lj, err := Pick(jobs, loader); err != nil || lj.ID() != j.ID() {
		t.Fatalf("--pid of the loader %d: %v %v", loader, lj.ID(), err)
	}
	for _, r := range j.Ranks {
		if r.PID == loader {
			t.Fatal("a data-loader child was taken for a rank")
		}
	}
}
