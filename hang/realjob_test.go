package hang

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/gobin"
	"github.com/ncclwiz/ncclwiz/internal/rastest"
	"github.com/ncclwiz/ncclwiz/internal/realjob"
)

// The real-job matrix of issue 23: real torch 1.13 (gloo) and Open MPI
// jobs from internal/realjob, each with one rank stuck in one way, plus
// healthy jobs and jobs that end while they are watched. Every test
// asserts the verdict and the suspect; they run in parallel (the waits of
// the samples overlap) and stay right however loaded the machine is.

const ready = 4 * time.Minute // a start on 2 cores busy with other tests

func localHost() *host.Host { return host.Local(host.LocalOptions{NoNVML: true}) }

// inspect is `ncclwiz hang --pid pid` in this process (as root in CI).
func inspect(t *testing.T, pid int, o Options) *Report {
	t.Helper()
	if o.Interval == 0 {
		o.Interval = 2 * time.Second
	}
	r, _, err := Run(context.Background(), localHost(), pid, o)
	if err != nil {
		t.Fatalf("hang --pid %d: %v", pid, err)
	}
	return r
}

func expect(t *testing.T, r *Report, verdict, suspects string) {
	t.Helper()
	if r.Verdict != verdict || fmt.Sprint(r.Suspects) != suspects {
		var b strings.Builder
		_ = WritePlain(&b, r, false, 120)
		t.Fatalf("verdict %s %v, want %s %s\n%s", r.Verdict, r.Suspects, verdict, suspects, b.String())
	}
}

func start(t *testing.T, s realjob.Spec) *realjob.Job {
	t.Helper()
	j := realjob.Start(t, s)
	j.WaitReady(ready)
	return j
}

func TestRealJobs(t *testing.T) {
	realLayouts(t)
	t.Run("torchrun static, rank 1 sleeps; then its launcher is SIGKILLed", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.TorchrunStatic, Behave: map[int]realjob.Behaviour{1: realjob.Sleep}})
		r := inspect(t, j.Launchers()[0], Options{})
		expect(t, r, VerdictSuspect, "[1]")
		if r.Runtime.Backend != "gloo" || r.Runtime.Torch == "" || r.RAS.Skipped == "" || r.FlightRecorder.Note == "" {
			t.Errorf("runtime %+v, RAS %+v, flight recorder %+v: a gloo job on torch 1.13 has neither", r.Runtime, r.RAS, r.FlightRecorder)
		}
		for _, s := range r.NextSteps {
			if strings.Contains(s, "TORCH_NCCL_") || strings.Contains(s, "RAS arrived") {
				t.Errorf("NCCL advice for a gloo job: %s", s)
			}
		}
		// Any rank names the job, too.
		if r2 := inspect(t, j.Rank(2), Options{Interval: time.Second}); r2.Job.LauncherPID != j.Launchers()[0] {
			t.Errorf("--pid of rank 2 found launcher %d, want %d", r2.Job.LauncherPID, j.Launchers()[0])
		}

		// The launcher dies: the ranks stay hung, and a thread of each
		// spins on its connection to the dead store. Still hung, never
		// "no hang".
		j.KillLauncher()
		r = inspect(t, j.Rank(0), Options{})
		expect(t, r, VerdictSuspect, "[1]")
		if r.Job.Orphaned == "" || !strings.Contains(joinEvidence(r), "CLOSE-WAIT") {
			t.Errorf("orphaned %q; evidence lacks the closed store connection:\n%s", r.Job.Orphaned, joinEvidence(r))
		}
	})

	t.Run("torchrun c10d, rank 1 spins in Python", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.TorchrunC10d, Behave: map[int]realjob.Behaviour{1: realjob.Spin}})
		expect(t, inspect(t, j.Launchers()[0], Options{}), VerdictSuspect, "[1]")
	})

	t.Run("two torchrun launchers of one job, rank 1 sleeps", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.TorchrunTwo, Ranks: 4, Behave: map[int]realjob.Behaviour{1: realjob.Sleep}})
		ls := j.Launchers()
		r := inspect(t, ls[1], Options{})
		expect(t, r, VerdictSuspect, "[1]")
		if len(r.Job.LauncherPIDs) != 2 || r.Job.LocalRanks != 4 {
			t.Errorf("one job with both launchers %v and 4 ranks, got launchers %v, %d ranks", ls, r.Job.LauncherPIDs, r.Job.LocalRanks)
		}
	})

	t.Run("mpirun, rank 1 stopped by the test", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.MPI})
		j.Stop(1)
		r := inspect(t, j.Launchers()[0], Options{})
		expect(t, r, VerdictSuspect, "[1]")
		if r.Job.WorldSize != "3" {
			t.Errorf("world size %q from OMPI_COMM_WORLD_SIZE, want 3", r.Job.WorldSize)
		}
	})

	t.Run("mp.spawn in a PID namespace, rank 1 sleeps; --pid names an ancestor", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.Spawn, Where: realjob.PIDNamespace, Behave: map[int]realjob.Behaviour{1: realjob.Sleep}})
		unshare := parentOf(j.Launchers()[0])
		r := inspect(t, unshare, Options{})
		expect(t, r, VerdictSuspect, "[1]")
		for _, s := range r.Samples {
			if s.RankFrom != "start order" || s.NSPID == s.PID {
				t.Errorf("rank %d: from %q, ns pid %d (host %d)", s.Rank, s.RankFrom, s.NSPID, s.PID)
			}
		}
	})

	t.Run("custom subprocess launcher, rank 1 never arrives", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.Subprocess, Behave: map[int]realjob.Behaviour{1: realjob.Absent}})
		r := inspect(t, j.Launchers()[0], Options{})
		expect(t, r, VerdictSuspect, "[1]")
		if !strings.Contains(joinEvidence(r), "never reached the rendezvous") {
			t.Errorf("evidence:\n%s", joinEvidence(r))
		}
	})

	t.Run("a rank missing from the world: every rank here waits alike", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.Subprocess, Missing: 1})
		r := inspect(t, j.Launchers()[0], Options{})
		expect(t, r, VerdictStuck, "[]")
		if !strings.Contains(joinEvidence(r), "WORLD_SIZE is 4 and 3 ranks run here") {
			t.Errorf("evidence:\n%s", joinEvidence(r))
		}
	})

	t.Run("mismatched collectives without TORCH_DISTRIBUTED_DEBUG: stuck alike", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.Subprocess, Behave: map[int]realjob.Behaviour{1: realjob.Mismatch}})
		r := inspect(t, j.Launchers()[0], Options{})
		expect(t, r, VerdictStuck, "[]")
		if !strings.Contains(strings.Join(r.NextSteps, "\n"), "TORCH_DISTRIBUTED_DEBUG=DETAIL") {
			t.Errorf("no advice to catch mismatched collectives: %v", r.NextSteps)
		}
	})

	t.Run("healthy job, watched again and again: never stuck", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.TorchrunStatic})
		for i := 0; i < 6; i++ {
			r := inspect(t, j.Launchers()[0], Options{Interval: 2 * time.Second})
			expect(t, r, VerdictNoHang, "[]")
			if r.ExitCode != 0 || !strings.Contains(r.Summary, "progressed") {
				t.Fatalf("run %d: exit %d, %q", i, r.ExitCode, r.Summary)
			}
		}
	})

	// Jobs that end while they are watched, at different points of the
	// sample: ended or (caught before the end) no hang — never a suspect.
	for _, steps := range []int{4, 10, 18, 30} {
		t.Run(fmt.Sprintf("job ending after %d steps", steps), func(t *testing.T) {
			t.Parallel()
			launcher := realjob.Subprocess
			if steps == 18 {
				launcher = realjob.TorchrunStatic
			}
			j := start(t, realjob.Spec{Launcher: launcher, Steps: steps, At: 1})
			r, _, err := Run(context.Background(), localHost(), j.Launchers()[0], Options{Interval: 2 * time.Second})
			if err != nil {
				var pe PickError
				if !errorsAs(err, &pe) {
					t.Fatal(err)
				}
				return // ended before the table was read: nothing to judge
			}
			if r.Verdict != VerdictEnded && r.Verdict != VerdictNoHang {
				expect(t, r, VerdictEnded, "[]")
			}
			if r.ExitCode != 0 {
				t.Errorf("exit %d for a job that ended", r.ExitCode)
			}
		})
	}

	t.Run("as nobody: nobody's own job, and root's job", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("runs ncclwiz as nobody (CI runs as root)")
		}
		mine := start(t, realjob.Spec{Launcher: realjob.Subprocess, User: "nobody", Behave: map[int]realjob.Behaviour{1: realjob.BlockIO}})
		bin := copyBin(t, mine.Dir())
		// --pid names the custom launcher (a plain python parent).
		r, code := runAs(t, bin, 65534, "hang", "--json", "--interval", "2s", "--pid", strconv.Itoa(mine.Launchers()[0]))
		expect(t, r, VerdictSuspect, "[1]")
		if code != 1 {
			t.Errorf("exit %d", code)
		}

		roots := start(t, realjob.Spec{Launcher: realjob.TorchrunStatic, Behave: map[int]realjob.Behaviour{1: realjob.Spin}})
		r, code = runAs(t, bin, 65534, "hang", "--json", "--interval", "2s", "--pid", strconv.Itoa(roots.Launchers()[0]))
		if code != 1 || r.Job.LocalRanks != 3 || r.Job.UnreadableCount == 0 || !strings.Contains(r.Job.Unreadable, "could not be read") {
			t.Fatalf("root's job seen by nobody: exit %d, %d ranks, unreadable %d %q", code, r.Job.LocalRanks, r.Job.UnreadableCount, r.Job.Unreadable)
		}
		expect(t, r, VerdictSuspect, "[1]") // the spinner shows without its environment
		if r.Confidence == High {
			t.Errorf("high confidence with hidden wait channels")
		}
	})

	t.Run("docker: asked from the host and from inside, RAS in the container's network namespace", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.MPI, Where: realjob.Docker, Behave: map[int]realjob.Behaviour{1: realjob.Spin}})
		pid1 := j.Launchers()[0]
		ranks := j.Ranks()
		addr := serveRASIn(t, pid1, func() string { return rasBehind(t, ranks) })
		r := inspect(t, pid1, Options{RASAddr: addr})
		expect(t, r, VerdictSuspect, "[1]")
		if r.RAS.Reply == nil || !strings.Contains(r.RAS.Namespace, "the job's, entered through pid") {
			t.Errorf("RAS %+v", r.RAS)
		}
		if !strings.Contains(joinEvidence(r), "[ras]") {
			t.Errorf("no RAS evidence:\n%s", joinEvidence(r))
		}
		bin := copyBin(t, j.Dir())
		out, err := exec.Command("docker", "exec", j.Container(), bin, "hang", "--json", "--interval", "2s").Output()
		var in Report
		if jerr := json.Unmarshal(out, &in); jerr != nil {
			t.Fatalf("inside: %v %v\n%s", err, jerr, out)
		}
		if in.Verdict != r.Verdict || fmt.Sprint(in.Suspects) != fmt.Sprint(r.Suspects) {
			t.Errorf("inside the container: %s %v; from the host: %s %v", in.Verdict, in.Suspects, r.Verdict, r.Suspects)
		}
	})
}

func joinEvidence(r *Report) string {
	var b strings.Builder
	for _, e := range r.Evidence {
		fmt.Fprintf(&b, "rank %d [%s] %s\n", e.Rank, e.Source, e.Text)
	}
	return b.String()
}

func errorsAs(err error, pe *PickError) bool {
	e, ok := err.(PickError)
	*pe = e
	return ok
}

func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, _ := strconv.Atoi(f[1])
	return n
}

// copyBin puts the static ncclwiz into dir (readable by every user, and
// mounted in the job's container at the same path).
func copyBin(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(gobin.Ncclwiz(t, true))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "ncclwiz")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// runAs runs ncclwiz as uid (and its group) and decodes its JSON report.
func runAs(t *testing.T, bin string, uid int, args ...string) (*Report, int) {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", "LANG=C.UTF-8"}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	out, err := c.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("exit %d, not a report: %v\n%s", code, err, out)
	}
	return &r, code
}

// serveRASIn serves a fake NCCL RAS on loopback inside pid's network
// namespace (a container's), as a rank would, and returns its address.
func serveRASIn(t *testing.T, pid int, status func() string) string {
	t.Helper()
	type res struct {
		ln  net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		// The thread goes back to our namespace before it is unlocked. A
		// thread left in the container's would be retired with this
		// goroutine — unless it is the main thread, which Go keeps: then
		// /proc/self/ns/net is the container's, and ncclwiz (in this
		// process) believes it shares the job's namespace (it flaked so).
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer self.Close()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err == nil {
			defer ns.Close()
			err = unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET)
		}
		if err != nil {
			runtime.UnlockOSThread()
			ch <- res{nil, err}
			return
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if berr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); berr != nil {
			ch <- res{ln, fmt.Errorf("back to our network namespace: %w", berr)} // stays locked: retired
			return
		}
		runtime.UnlockOSThread()
		ch <- res{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen in the container's network namespace: %v", r.err)
	}
	return rastest.ServeOn(t, r.ln, rastest.Server{JSON: true, Status: status})
}

// rasBehind is a RAS status (NCCL 2.28.9's JSON) in which rank 1 launched
// one AllReduce fewer than the others; PIDs are the ranks' in their
// container, as NCCL reports getpid().
func rasBehind(t *testing.T, hostPIDs map[int]int) string {
	var ranks []string
	for r := 0; r < len(hostPIDs); r++ {
		n := 7
		if r == 1 {
			n = 6
		}
		ranks = append(ranks, fmt.Sprintf(`{"rank": %d, "host": "127.0.0.1", "pid": %d, "cuda_dev": %d, "nvml_dev": %d,
  "status": {"init_state": 0, "async_error": 0, "finalize_called": false, "destroy_flag": false, "abort_flag": false},
  "collective_counts": {"Broadcast": 1, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0, "AllReduce": %d, "SendRecv": 0}}`, r, nsPID(t, hostPIDs[r]), r, r, n))
	}
	return fmt.Sprintf(`{"nccl_version": "2.28.9", "cuda_runtime_version": 12090, "cuda_driver_version": 13000,
  "timestamp": "2026-11-27 12:00:00", "communicators_count": 1,
  "communicators": [{"hash": "0x7a1", "secondary_hash": "0x1:0x2", "size": %d, "ranks_count": %d, "missing_ranks_count": 0,
    "ranks": [%s], "missing_ranks": []}],
  "ras": {"collection_time_sec": 0.010, "timeouts_count": 0}}
`, len(ranks), len(ranks), strings.Join(ranks, ",\n"))
}

func nsPID(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Errorf("rank pid %d: %v", pid, err)
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return pid
}
