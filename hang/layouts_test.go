package hang

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/realjob"
)

// realLayouts are the layouts the first real-job matrix left out, run as
// parallel subtests of TestRealJobs (their jobs overlap the others'): a
// Slurm step (srun, and srun inside sbatch) on a single-host Slurm of its
// own, a rank in uninterruptible sleep (D), and a job in a PID and network
// namespace of its own inspected from the host, from inside (nsenter) and
// as nobody, who cannot enter its network namespace to ask RAS.
func realLayouts(t *testing.T) {
	t.Run("srun, rank 1 sleeps", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.SlurmStep, Behave: map[int]realjob.Behaviour{1: realjob.Sleep}})
		r := inspect(t, j.Rank(2), Options{})
		expect(t, r, VerdictSuspect, "[1]")
		slurmJob(t, r, j)
		// The step's slurmstepd names the same job.
		if r2 := inspect(t, j.Launchers()[0], Options{Interval: time.Second}); r2.Job.LocalRanks != 3 || r2.Job.SlurmStep != r.Job.SlurmStep {
			t.Errorf("--pid of slurmstepd: %d ranks, step %q\n%s", r2.Job.LocalRanks, r2.Job.SlurmStep, plain(r2))
		}
	})

	t.Run("sbatch, rank 1 in uninterruptible sleep (D)", func(t *testing.T) {
		t.Parallel()
		j := start(t, realjob.Spec{Launcher: realjob.SlurmBatch, Behave: map[int]realjob.Behaviour{1: realjob.DState}})
		r := inspect(t, j.Rank(0), Options{})
		expect(t, r, VerdictSuspect, "[1]")
		slurmJob(t, r, j)
		var ev string
		for _, e := range r.Evidence {
			if e.Suspect && e.Rank == 1 {
				ev = e.Text
			}
		}
		next := strings.Join(r.NextSteps, "\n")
		for _, want := range []string{"uninterruptible sleep (D in", "a child it started with vfork", "(in kernel_clone)"} {
			if !strings.Contains(ev, want) {
				t.Errorf("rank 1's evidence lacks %q:\n%s", want, plain(r))
			}
		}
		for _, want := range []string{"Rank 1 (pid", "uninterruptible sleep (D)", "acts on no signal until that wait returns", "dmesg"} {
			if !strings.Contains(next, want) {
				t.Errorf("next steps lack %q:\n%s", want, plain(r))
			}
		}
	})

	t.Run("PID and network namespace: from the host, by nsenter inside, as nobody", func(t *testing.T) {
		t.Parallel()
		// torchrun: as nobody its ranks (root's, environment unreadable)
		// are found under it; a spinning rank shows without a wait channel.
		j := start(t, realjob.Spec{Launcher: realjob.TorchrunStatic, Where: realjob.NetNamespace, Behave: map[int]realjob.Behaviour{1: realjob.Spin}})
		pid1 := j.Launchers()[0]
		ranks := j.Ranks()
		addr := serveRASIn(t, pid1, func() string { return rasBehind(t, ranks) })
		r := inspect(t, pid1, Options{RASAddr: addr})
		expect(t, r, VerdictSuspect, "[1]")
		if r.RAS.Reply == nil || !strings.Contains(r.RAS.Namespace, "entered through pid") {
			t.Errorf("from the host: RAS %+v", r.RAS)
		}
		bin := copyBin(t, j.Dir())
		// Inside: the namespace's own /proc (-m), its PIDs (-p), its
		// loopback (-n); the job is the only one there, so no --pid.
		out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid1), "-p", "-m", "-n", bin, "hang", "--json", "--interval", "2s", "--ras-addr", addr).Output()
		var in Report
		if jerr := json.Unmarshal(out, &in); jerr != nil {
			t.Fatalf("inside: %v %v\n%s", err, jerr, out)
		}
		if in.Verdict != r.Verdict || fmt.Sprint(in.Suspects) != fmt.Sprint(r.Suspects) || in.Job.LocalRanks != 3 || in.Job.LauncherPID != 1 {
			t.Errorf("inside: %s %v, %d ranks, launcher %d; from the host: %s %v", in.Verdict, in.Suspects, in.Job.LocalRanks, in.Job.LauncherPID, r.Verdict, r.Suspects)
		}
		if in.RAS.Reply == nil || !strings.Contains(in.RAS.Namespace, "which ncclwiz shares") {
			t.Errorf("inside: RAS %+v", in.RAS)
		}

		// As nobody from the host: the namespace cannot be entered, and the
		// host's own port of the same number must not be asked instead.
		var asked atomic.Int32
		if ln, err := net.Listen("tcp", addr); err == nil {
			t.Cleanup(func() { _ = ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					asked.Add(1)
					_ = c.Close()
				}
			}()
		} else {
			t.Logf("the host's %s is taken (%v): only the report is checked", addr, err)
		}
		if os.Geteuid() != 0 {
			return
		}
		rn, code := runAs(t, bin, 65534, "hang", "--json", "--interval", "2s", "--pid", strconv.Itoa(pid1), "--ras-addr", addr)
		expect(t, rn, VerdictSuspect, "[1]")
		want := fmt.Sprintf(`nsenter -t %d -n "$(command -v ncclwiz)" hang --pid %d`, ranks[0], ranks[0])
		if code != 1 || rn.RAS.Reply != nil || !strings.Contains(rn.RAS.Error, "another network namespace") || !strings.Contains(rn.RAS.Error, want) {
			t.Errorf("as nobody: exit %d, RAS %+v; want it not asked, with %q", code, rn.RAS, want)
		}
		if n := asked.Load(); n != 0 {
			t.Errorf("as nobody, ncclwiz asked the host's %s (%d connections) for the job's RAS", addr, n)
		}
	})
}

// slurmJob checks what a Slurm step's report says: the step's slurmstepd
// as the launcher, the job and step, the world size, and Slurm's advice.
func slurmJob(t *testing.T, r *Report, j *realjob.Job) {
	t.Helper()
	if ls := j.Launchers(); len(ls) != 1 || r.Job.LauncherPID != ls[0] || !strings.HasPrefix(r.Job.Command, "slurmstepd") {
		t.Errorf("launcher %d %q, want slurmstepd %v", r.Job.LauncherPID, r.Job.Command, ls)
	}
	m := regexp.MustCompile(`^(\d+)\.0$`).FindStringSubmatch(r.Job.SlurmStep)
	if r.Job.LocalRanks != 3 || r.Job.WorldSize != "3" || m == nil {
		t.Fatalf("%d ranks, world %q, step %q\n%s", r.Job.LocalRanks, r.Job.WorldSize, r.Job.SlurmStep, plain(r))
	}
	next := strings.Join(r.NextSteps, "\n")
	if !strings.Contains(next, "`scancel "+m[1]+"`") || strings.Contains(next, "torchrun") {
		t.Errorf("advice for Slurm job %s:\n%s", m[1], next)
	}
}

// plain is the report as `ncclwiz hang` prints it, for failure messages.
func plain(r *Report) string {
	var b strings.Builder
	_ = WritePlain(&b, r, false, 120)
	return b.String()
}
