package procs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/polltest"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// rankEnv is what a torchrun rank carries; programs started from a rank
// inherit it.
func rankEnv(run string) []string {
	return []string{"RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=" + run,
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(30000+os.Getpid()%20000), "PATH=/usr/bin:/bin", "HOME=/", "TERM=xterm"}
}

// orphanPython starts a real Python process with env whose parent exits at
// once (it is re-parented to an init): a leftover rank whose launcher is
// gone. It returns its PID; its session is killed when the test ends.
func orphanPython(t *testing.T, env []string) int {
	t.Helper()
	c := exec.Command("setsid", "sh", "-c", `/usr/bin/python3 -c 'import time; time.sleep(600)' </dev/null >/dev/null 2>&1 & echo $!`)
	c.Env = env
	out, err := c.Output()
	if err != nil {
		t.Fatalf("start orphan: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if !polltest.Until(20*time.Second, func() bool { return comm(pid) == "python3" && parent(pid) != c.Process.Pid }) {
		t.Fatalf("orphan %d did not start (comm %q)", pid, comm(pid))
	}
	return pid
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

func parent(pid int) int {
	p, err := proctab.ReadStat(host.Local(host.LocalOptions{NoNVML: true}), pid)
	if err != nil {
		return -1
	}
	return p.PPID
}

// Issue 22 item 5: a tmux server (and the shell in it) started from a rank
// inherit RANK, LOCAL_RANK, WORLD_SIZE and TORCHELASTIC_RUN_ID; the
// launcher is gone and they are old. They are not ranks: never stale, never
// targeted. A real Python orphan of the same run is (the positive control).
func TestInheritedEnvironmentIsNotARank(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tmux and python")
	}
	for _, tool := range []string{"tmux", "setsid", "/usr/bin/python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	env := rankEnv("ncclwiz-inherit")
	sock := filepath.Join(t.TempDir(), "hang-tmux.sock")
	c := exec.Command("tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "hang", "sh")
	c.Env = env
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", sock, "kill-server").Run() })
	out, err := exec.Command("tmux", "-S", sock, "display-message", "-p", "#{pid} #{pane_pid}").Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 2 {
		t.Fatalf("tmux pids: %v %q", err, out)
	}
	server, _ := strconv.Atoi(f[0])
	shell, _ := strconv.Atoi(f[1])
	py := orphanPython(t, env)

	h := host.Local(host.LocalOptions{NoNVML: true})
	h.Clock = func() time.Time { return time.Now().Add(10 * time.Minute) }
	as, err := Assess(context.Background(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]Assessment{}
	for _, a := range as {
		got[a.PID] = a
	}
	for _, pid := range []int{server, shell} {
		if a, ok := got[pid]; ok && (a.Verdict == Stale || a.Verdict == Busy) {
			t.Errorf("pid %d (%s) judged %s: %s", pid, comm(pid), a.Verdict, a.Reason())
		}
	}
	if a := got[py]; a.Verdict != Stale || !strings.Contains(a.Reason(), "maps") && !strings.Contains(a.Reason(), "runs Python") {
		t.Errorf("the Python orphan %d judged %s: %s", py, a.Verdict, a.Reason())
	}
	if what := NeverARank(proctab.Process{Comm: comm(server)}); what != "a terminal multiplexer" {
		t.Errorf("tmux's server (comm %q) is %q", comm(server), what)
	}
}

// Issue 22 item 6: a launcher that starts its rank through
// `sh -c 'exec rank &'` and sleeps on: the rank is re-parented to an init
// while its launcher lives. Its process group leader (the launcher) and a
// peer of the same run still under the launcher say so: live, never stale.
func TestLiveLauncherThatIsNotTheParent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts python")
	}
	// The "launcher": torchrun in name, it gives its ranks torchrun's
	// variables, starts rank 0 detached through sh and rank 1 as its own
	// child, then waits.
	rank := func(r int) string {
		return fmt.Sprintf("RANK=%d LOCAL_RANK=%d WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 TORCHELASTIC_RUN_ID=ncclwiz-notparent", r, r)
	}
	script := rank(0) + ` sh -c 'exec /usr/bin/python3 -c "import time; time.sleep(600)" </dev/null >/dev/null 2>&1 &'; ` +
		rank(1) + ` /usr/bin/python3 -c 'import time; time.sleep(600)' & echo ready; wait`
	c := exec.Command("bash", "-c", "exec -a torchrun bash -c \"$0\"", script)
	c.Env = []string{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(31000+os.Getpid()%20000), "PATH=/usr/bin:/bin", "HOME=/"}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL); _ = c.Wait() })
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil {
		t.Fatal(err)
	}
	h := host.Local(host.LocalOptions{NoNVML: true})
	var detached int
	polltest.Until(20*time.Second, func() bool {
		tab, err := proctab.Read(context.Background(), h, proctab.Options{EnvKeys: EnvKeys})
		if err != nil {
			return false
		}
		for _, p := range tab.All() {
			if p.PGID == c.Process.Pid && p.PPID != c.Process.Pid && p.Env["RANK"] == "0" && p.Comm == "python3" {
				detached = p.PID
			}
		}
		return detached != 0
	})
	if detached == 0 {
		t.Fatal("the detached rank did not start")
	}
	h.Clock = func() time.Time { return time.Now().Add(10 * time.Minute) }
	as, err := Assess(context.Background(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.PID == detached {
			if a.Verdict != Live || !strings.Contains(a.Reason(), "still runs") {
				t.Fatalf("rank %d whose launcher lives judged %s: %s", detached, a.Verdict, a.Reason())
			}
			return
		}
	}
	t.Fatalf("rank %d not judged", detached)
}
