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

// startJob runs the fake launcher (under prefix, e.g. unshare) and returns
// its PID as this /proc shows it.
func startJob(t *testing.T, plan string, prefix ...string) int {
	t.Helper()
	args := append(append([]string{}, prefix...), fakeJob(t))
	c := exec.Command(args[0], args[1:]...)
	if len(prefix) == 0 {
		c.Args = []string{"torchrun", "--nproc-per-node=3", "train.py"}
	}
	c.Env = append(os.Environ(), "FAKEJOB_PLAN="+plan, "FAKEJOB_LOGDIR="+t.TempDir())
	grouptest.StartReady(t, c)
	return c.Process.Pid
}

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

func TestLiveFakeRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and samples them for a second")
	}
	cases := []struct {
		name, plan string
		prefix     []string
		root       bool
		suspect    int
	}{
		{name: "pipe", plan: "spin,pipe,spin", suspect: 1},
		{name: "sigstop", plan: "spin,spin,stop", suspect: 2},
		{name: "pid-namespace", plan: "pipe,spin,spin", suspect: 0, root: true,
			prefix: []string{"unshare", "-fp", "--mount-proc", "--kill-child"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root {
				if os.Geteuid() != 0 {
					t.Skip("unshare -p needs root")
				}
				if _, err := exec.LookPath("unshare"); err != nil {
					t.Skip("unshare not installed")
				}
			}
			pid := startJob(t, tc.plan, tc.prefix...)
			h := host.Local(host.LocalOptions{})
			j := jobUnder(t, h, pid, 3)
			if tc.root {
				for _, r := range j.Ranks {
					if len(r.NSpid) < 2 {
						t.Fatalf("rank %d has NSpid %v: not in a PID namespace", r.PID, r.NSpid)
					}
				}
			}
			// The blocked or stopped rank must have got there before the
			// sample: a process that is still starting up runs.
			settle(t, h, j.Ranks[tc.suspect].PID)
			ss, err := Sample(context.Background(), h, j, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			ev, _ := JudgeSamples(ss)
			got := Suspects(ev)
			if len(got) != 1 || got[0] != tc.suspect {
				t.Fatalf("suspects %v, want [%d]; evidence %+v; samples %+v", got, tc.suspect, ev, ss)
			}
			grew := false
			for _, s := range ss {
				for _, o := range s.Outputs {
					grew = grew || o.Grew
				}
			}
			if !grew {
				t.Errorf("no spinning rank's log grew: %+v", ss)
			}
		})
	}
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
	if _, err := Pick(jobs, tab.Children(pids[0])[0].PID); err == nil {
		t.Fatal("a data-loader child was taken for a rank")
	}
}
