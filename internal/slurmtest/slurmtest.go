// Package slurmtest runs a single-host Slurm for tests: Debian's munged,
// slurmctld and slurmd in the foreground with a config, key, state and
// ports of their own in a temp dir, all stopped by t.Cleanup. Commands
// find it through SLURM_CONF.
package slurmtest

import (
	"bytes"
	"context"
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
)

// Slurm is a running single-node cluster.
type Slurm struct {
	Conf string // SLURM_CONF
	Node string // the node name (this host's name)
}

// Env is os.Environ with SLURM_CONF pointing at this cluster.
func (s *Slurm) Env() []string { return append(os.Environ(), "SLURM_CONF="+s.Conf) }

// Start starts the daemons or skips t when they are not installed.
func Start(t testing.TB) *Slurm {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (slurmd runs jobs as any user); CI runs as root")
	}
	for _, p := range []string{"munged", "mungekey", "slurmctld", "slurmd", "srun", "sinfo"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("needs %s (apt-get install slurm-wlm munge)", p)
		}
	}
	// Not t.TempDir: a subtest's name puts commas and spaces in it, and
	// slurm.conf cannot hold a path with a comma (slurmctld never starts).
	dir, err := os.MkdirTemp("", "slurmtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	for _, d := range []string{"state", "spool"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(dir, "munge.key")
	run(t, "mungekey", "-c", "-k", key)
	sock := filepath.Join(dir, "munge.sock")
	daemon(t, dir, "munged", "munged", "-F", "-f", "--key-file="+key, "-S", sock, "--log-file="+filepath.Join(dir, "munged.log"),
		"--pid-file="+filepath.Join(dir, "munged.pid"), "--seed-file="+filepath.Join(dir, "munged.seed"))
	waitFor(t, func() bool { _, err := os.Stat(sock); return err == nil }, "munged socket")

	conf := filepath.Join(dir, "slurm.conf")
	// A cluster name of its own: two tests' clusters both run a job 1.
	body := fmt.Sprintf(`ClusterName=ncclwiz%s
SlurmctldHost=%s(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=%d
SlurmdPort=%d
AuthType=auth/munge
AuthInfo=socket=%s
CredType=cred/munge
StateSaveLocation=%s
SlurmdSpoolDir=%s
SlurmctldPidFile=%s
SlurmdPidFile=%s
SlurmctldLogFile=%s
SlurmdLogFile=%s
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
MpiDefault=none
NodeName=%s NodeAddr=127.0.0.1 CPUs=%d State=UNKNOWN
PartitionName=debug Nodes=%s Default=YES MaxTime=INFINITE State=UP
`, strings.TrimPrefix(filepath.Base(dir), "slurmtest-"), host, freePort(t), freePort(t), sock, filepath.Join(dir, "state"), filepath.Join(dir, "spool"),
		filepath.Join(dir, "slurmctld.pid"), filepath.Join(dir, "slurmd.pid"), filepath.Join(dir, "slurmctld.log"), filepath.Join(dir, "slurmd.log"),
		host, runtime.NumCPU(), host)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Slurm{Conf: conf, Node: host}
	daemon(t, dir, "slurmctld", "slurmctld", "-D", "-i", "-f", conf)
	daemon(t, dir, "slurmd", "slurmd", "-D", "-N", host, "-f", conf)
	waitFor(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sinfo", "-h", "-N", "-o", "%T")
		cmd.Env = s.Env()
		out, err := cmd.Output()
		return err == nil && strings.TrimSpace(string(out)) == "idle"
	}, "the node to be idle in sinfo (see "+dir+"/slurmd.log)")
	// Before the daemons stop (cleanups run last first): slurmd double-forks
	// each step's slurmstepd, so nothing the test started holds them, and a
	// stepd whose slurmd is gone stays forever.
	t.Cleanup(s.endSteps)
	return s
}

// endSteps cancels every job of this cluster and waits for their
// processes — slurmstepd, the tasks, srun clients: every process whose
// environment names this cluster's SLURM_CONF — to end, SIGKILLing those
// still there after 10 s.
func (s *Slurm) endSteps() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := exec.CommandContext(ctx, "squeue", "-h", "-o", "%i")
	q.Env = s.Env()
	if out, err := q.Output(); err == nil && len(strings.Fields(string(out))) > 0 {
		c := exec.CommandContext(ctx, "scancel", strings.Fields(string(out))...)
		c.Env = s.Env()
		_ = c.Run()
	}
	needle := []byte("SLURM_CONF=" + s.Conf)
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := s.processes(needle)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if time.Now().After(deadline.Add(5 * time.Second)) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processes lists the live processes whose environment holds needle.
func (s *Slurm) processes(needle []byte) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue // gone, or a zombie (nothing left to end)
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, needle) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// daemon starts a foreground daemon as a child and stops it at cleanup.
func daemon(t testing.TB, dir, name string, args ...string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logf.Close()
	})
}

// waitFor polls ok for up to 30 s: the daemons are up in about a second
// even on 2 loaded cores.
func waitFor(t testing.TB, ok func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if ok() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func run(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}
