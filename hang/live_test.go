package hang

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/grouptest"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// The test binary plays a launcher and its ranks when HANG_FAKE_ROLE says
// so: a torchrun-like parent starting WORLD_SIZE children with the
// variables torchrun sets; each child spins, blocks reading a pipe, or
// stops itself, as HANG_FAKE_PLAN says for its rank.
func TestMain(m *testing.M) {
	switch os.Getenv("HANG_FAKE_ROLE") {
	case "launcher":
		fakeLauncher()
		return
	case "rank":
		fakeRank()
		return
	}
	os.Exit(m.Run())
}

func fakeLauncher() {
	plan := strings.Split(os.Getenv("HANG_FAKE_PLAN"), ",")
	self, _ := os.Executable()
	if os.Args[0] != "torchrun" { // started by unshare: look like torchrun
		err := syscall.Exec(self, []string{"torchrun", "--nproc-per-node=3", "train.py"}, os.Environ())
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var cmds []*exec.Cmd
	for i, what := range plan {
		c := exec.Command(self)
		c.Args = []string{"python3", "train.py", "--rank-behaviour", what}
		c.Env = append(os.Environ(), "HANG_FAKE_ROLE=rank", "HANG_FAKE_DO="+what,
			"RANK="+strconv.Itoa(i), "LOCAL_RANK="+strconv.Itoa(i), "WORLD_SIZE="+strconv.Itoa(len(plan)),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", "TORCHELASTIC_RUN_ID=fake", "GROUP_RANK=0")
		if dir := os.Getenv("HANG_FAKE_LOGDIR"); dir != "" {
			f, err := os.Create(fmt.Sprintf("%s/rank%d.log", dir, i))
			if err == nil {
				c.Stdout, c.Stderr = f, f
			}
		}
		if what == "pipe" {
			r, _, err := os.Pipe() // the write end stays open and silent
			if err == nil {
				c.Stdin = r
			}
		}
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cmds = append(cmds, c)
	}
	fmt.Println("ready")
	for _, c := range cmds {
		_ = c.Wait()
	}
}

func fakeRank() {
	switch os.Getenv("HANG_FAKE_DO") {
	case "spin":
		x, last := 0, time.Now()
		for {
			x++
			if time.Since(last) > 200*time.Millisecond {
				fmt.Println("step", x)
				last = time.Now()
			}
		}
	case "pipe":
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	case "loader": // a rank with a data-loader worker, which inherits RANK
		self, _ := os.Executable()
		c := exec.Command(self)
		c.Env = append(os.Environ(), "HANG_FAKE_DO=sleep")
		_ = c.Start()
		fmt.Println("ready")
	case "stop":
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) // the fake rank stops itself
	}
	time.Sleep(time.Hour)
}

// startJob runs the fake launcher (under prefix, e.g. unshare) and returns
// its PID as this /proc shows it.
func startJob(t *testing.T, plan string, prefix ...string) int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, prefix...), self)
	c := exec.Command(args[0], args[1:]...)
	if len(prefix) == 0 {
		c.Args = []string{"torchrun", "--nproc-per-node=3", "train.py"}
	}
	c.Env = append(os.Environ(), "HANG_FAKE_ROLE=launcher", "HANG_FAKE_PLAN="+plan, "HANG_FAKE_LOGDIR="+t.TempDir())
	grouptest.StartReady(t, c)
	return c.Process.Pid
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
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(40000 + os.Getpid()%20000)
	var pids []int
	for _, spec := range []struct{ rank, port string }{{"0", port}, {"1", port}, {"0", port + "1"}} {
		c := exec.Command(self)
		c.Args = []string{"python3", "worker.py"}
		c.Env = append(os.Environ(), "HANG_FAKE_ROLE=rank", "HANG_FAKE_DO=loader", "RANK="+spec.rank, "WORLD_SIZE=2",
			"MASTER_ADDR=10.9.8.7", "MASTER_PORT="+spec.port)
		grouptest.StartReady(t, c)
		pids = append(pids, c.Process.Pid)
	}
	h := host.Local(host.LocalOptions{})
	var tab *proctab.Table
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
