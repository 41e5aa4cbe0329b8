package contain

import (
	"bufio"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/internal/polltest"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// TestMain serves as the keeper (as ncclwiz's main does) and, with
// CONTAIN_TEST_PARENT set, as a stand-in for ncclwiz that starts a run and
// waits to be killed.
func TestMain(m *testing.M) {
	Main()
	if mode := os.Getenv("CONTAIN_TEST_PARENT"); mode != "" {
		os.Exit(fakeParent(mode))
	}
	os.Exit(m.Run())
}

// lingerScript starts a child in the group and a grandchild that double
// forks, calls setsid, clears the marker and ignores SIGTERM and SIGHUP;
// both carry $1 in their argv. It prints "up" once they run.
const lingerScript = `m=$1
(setsid env -u CONTAIN_MARK bash -c 'trap "" TERM HUP; exec -a "$0-grandchild" sleep 100000' "$m" </dev/null >/dev/null 2>&1 &)
(exec -a "$m-child" sleep 100000) &
while ! grep -qs -- "$m-grandchild" /proc/[0-9]*/cmdline; do sleep 0.01; done
echo up
wait`

func fakeParent(mode string) int {
	r, err := Start(Spec{
		Path: "/bin/bash", Args: []string{"-c", lingerScript, "bash", os.Getenv("CONTAIN_TEST_ARGV")},
		Env: []string{"PATH=/usr/bin:/bin", "CONTAIN_MARK=1"}, Dir: "/", Output: os.Stdout,
		Marker: "CONTAIN_MARK=1", TmpDir: os.Getenv("CONTAIN_TEST_TMP"), Mode: mode, Name: os.Getenv("CONTAIN_TEST_CGROUP"),
	})
	if err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		return 1
	}
	os.Stdout.WriteString("mode " + r.Describe() + "\n")
	if os.Getenv("CONTAIN_TEST_END") == "panic" {
		// Once the run is up, like a bug in ncclwiz would: an unrecovered
		// panic exits the process without running anyone's defers.
		bufio.NewReader(os.Stdin).ReadString('\n')
		panic("ncclwiz crashed")
	}
	select {} // until killed
}

// needMode skips when the machine cannot make a PID namespace (a
// container without user namespaces, say); CI, as root, can.
func needMode(t *testing.T, mode string) {
	t.Helper()
	if err := Available(mode); err != nil {
		t.Skipf("%s is not available here: %v", mode, err)
	}
}

func newMarker(t *testing.T) string {
	t.Helper()
	return "ncclwiz-contain-" + strings.ToLower(rand.Text()[:12])
}

func argvAlive(marker string) []string {
	var out []string
	tab := table()
	if tab == nil {
		return []string{"cannot list /proc"}
	}
	for _, s := range tab.All() {
		if pid := s.PID; alive(s) && strings.Contains(Cmdline(pid), marker) && pid != os.Getpid() {
			out = append(out, strconv.Itoa(pid)+" "+Cmdline(pid))
		}
	}
	return out
}

// End reports every live process of the run, the escaped grandchild
// included (by the containment alone: it left the group and dropped the
// marker), ends them all, and removes the run's cgroup.
func TestEndReportsAndEndsEverything(t *testing.T) {
	for _, mode := range []string{ModeNamespace, ModeSubreaper} {
		t.Run(mode, func(t *testing.T) {
			needMode(t, mode)
			m := newMarker(t)
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			r, err := Start(Spec{Path: "/bin/bash", Args: []string{"-c", lingerScript, "bash", m}, Env: []string{"PATH=/usr/bin:/bin", "CONTAIN_MARK=1"},
				Dir: "/", Output: pw, Marker: "CONTAIN_MARK=1", Mode: mode, Name: m})
			pw.Close()
			if err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(pr).ReadString('\n')
			if line != "up\n" {
				t.Fatalf("the script said %q", line)
			}
			if r.Mode() != mode {
				t.Errorf("mode %s, want %s", r.Mode(), mode)
			}
			rep := r.End(10 * time.Second)
			whys := map[string]string{}
			for _, p := range rep.Ended {
				switch {
				case strings.HasPrefix(p.Command, m+"-grandchild"):
					whys["grandchild"] = p.Why
				case strings.HasPrefix(p.Command, m+"-child"):
					whys["child"] = p.Why
				case p.PID == r.LauncherPID():
					whys["launcher"] = p.Why
				}
			}
			want := map[string]string{"grandchild": "descendant", "child": "process group", "launcher": "launcher"}
			for k, v := range want {
				if whys[k] != v {
					t.Errorf("%s: why %q, want %q (ended %+v)", k, whys[k], v, rep.Ended)
				}
			}
			if len(rep.Leftover) > 0 {
				t.Errorf("leftover %+v", rep.Leftover)
			}
			if alive := argvAlive(m); len(alive) > 0 {
				t.Errorf("alive after End: %q", alive)
			}
			if ws, ok := r.Status(); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Errorf("launcher status %v %v, want killed", ws, ok)
			}
			if r.cg != nil {
				if _, err := os.Stat(r.cg.dir); !os.IsNotExist(err) {
					t.Errorf("cgroup %s not removed: %v", r.cg.dir, err)
				}
			}
			if again := r.End(time.Second); len(again.Ended) != 0 {
				t.Errorf("a second End ended %+v", again.Ended)
			}
		})
	}
}

// When ncclwiz is SIGKILLed, or crashes on a panic, its keeper ends the
// run, removes the private temporary directory and the run's cgroup:
// nothing of the run is left.
func TestKeeperCleansUpWhenParentIsKilled(t *testing.T) {
	for _, c := range []struct{ mode, end string }{{ModeNamespace, "kill"}, {ModeSubreaper, "kill"}, {ModeNamespace, "panic"}, {ModeSubreaper, "panic"}} {
		mode := c.mode
		t.Run(mode+"/"+c.end, func(t *testing.T) {
			needMode(t, mode)
			m := newMarker(t)
			tmp, err := os.MkdirTemp(t.TempDir(), TmpPrefix)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tmp, "probe.py"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/proc/self/exe", "-test.run=^$")
			cmd.Env = append(os.Environ(), "CONTAIN_TEST_PARENT="+mode, "CONTAIN_TEST_ARGV="+m, "CONTAIN_TEST_TMP="+tmp,
				"CONTAIN_TEST_CGROUP="+m, "CONTAIN_TEST_END="+c.end)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			br := bufio.NewReader(out)
			var lines []string
			for len(lines) < 2 {
				l, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("the stand-in for ncclwiz said %q: %v", lines, err)
				}
				lines = append(lines, strings.TrimSpace(l))
			}
			// The script and the stand-in share stdout: either comes first.
			if !strings.HasPrefix(strings.Join(lines, "|"), "mode ") && !strings.HasPrefix(lines[1], "mode ") || !slices.Contains(lines, "up") {
				t.Fatalf("the stand-in for ncclwiz said %q", lines)
			}
			if len(argvAlive(m+"-grandchild")) == 0 {
				t.Fatal("the grandchild is not running")
			}
			if c.end == "panic" {
				stdin.Write([]byte("go\n"))
			} else {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
			if err := cmd.Wait(); err == nil {
				t.Error("the stand-in for ncclwiz should have died")
			}
			if !polltest.Until(15*time.Second, func() bool { return len(argvAlive(m)) == 0 }) {
				t.Errorf("processes of the run survived ncclwiz: %q", argvAlive(m))
			}
			if !polltest.Until(5*time.Second, func() bool { _, err := os.Lstat(tmp); return os.IsNotExist(err) }) {
				t.Errorf("the keeper did not remove %s", tmp)
			}
			if own, err := ownCgroupDir(); err == nil {
				cg := filepath.Join(own, m)
				if !polltest.Until(5*time.Second, func() bool { _, err := os.Stat(cg); return os.IsNotExist(err) }) {
					t.Errorf("the keeper did not remove the cgroup %s", cg)
				}
			}
		})
	}
}

// TestProcReads: the run's reads through proctab on the real /proc — a
// child's start time, parent, group, marker, command line and namespace
// ids — and a PID reused after exit is not the process seen.
func TestProcReads(t *testing.T) {
	marker := "NCCLWIZ_CONTAIN_READS=" + newMarker(t)
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s, ok := readStat(pid)
	if !ok || !alive(s) || s.StartTicks == 0 || s.PPID != os.Getpid() || s.PGID != pid {
		t.Fatalf("readStat(child) = %+v, %v", s, ok)
	}
	if !polltest.Until(5*time.Second, func() bool { return Cmdline(pid) == "sleep 60" }) {
		t.Errorf("Cmdline = %q", Cmdline(pid))
	}
	if !hasEnv(pid, marker) || hasEnv(pid, marker+"x") || hasEnv(pid, "NCCLWIZ_CONTAIN_READS") || hasEnv(os.Getpid(), marker) {
		t.Error("hasEnv does not match KEY=VALUE exactly")
	}
	if nspid, nspgid, ok := nsLocal(pid); !ok || nspid == 0 || nspgid == 0 {
		t.Errorf("nsLocal = %d %d %v", nspid, nspgid, ok)
	}
	tab := table()
	if tab == nil {
		t.Fatal("no process table")
	}
	if kids := tab.Descendants(os.Getpid()); !slices.ContainsFunc(kids, func(p proctab.Process) bool { return p.PID == pid }) {
		t.Errorf("child %d not among the descendants %+v", pid, kids)
	}
	// A start time that is not the child's names another process: no signal.
	if err := killExact(pid, s.StartTicks+1, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if now, ok := readStat(pid); !ok || !alive(now) {
		t.Fatalf("killExact with a wrong start time signalled %d", pid)
	}
	if err := killExact(pid, s.StartTicks, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("the child was not killed")
	}
	if _, ok := readStat(pid); ok {
		t.Error("a reaped child still reads")
	}
	if _, ok := readStat(-5); ok {
		t.Error("no such process")
	}
}

// BenchmarkStartEnd measures what containment adds to a launch: the
// keeper's re-exec, the namespace or subreaper set-up, the cgroup, and
// End's scans of /proc.
func BenchmarkStartEnd(b *testing.B) {
	for _, mode := range []string{ModeNamespace, ModeSubreaper} {
		b.Run(mode, func(b *testing.B) {
			if err := Available(mode); err != nil {
				b.Skip(err)
			}
			for i := 0; i < b.N; i++ {
				r, err := Start(Spec{Path: "/bin/true", Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Mode: mode, Name: "ncclwiz-bench-" + strconv.Itoa(i)})
				if err != nil {
					b.Fatal(err)
				}
				<-r.Exited()
				r.End(10 * time.Second)
			}
		})
	}
	b.Run("plain-exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Run cgroups left empty (ncclwiz and its keeper both killed) are removed
// by a later run once they are old enough; a fresh empty one (a run about
// to start its launcher) and a populated one are kept.
func TestSweepCgroups(t *testing.T) {
	own, err := ownCgroupDir()
	if err != nil {
		t.Skipf("no cgroup v2: %v", err)
	}
	base := TmpPrefix + "sweeptest-" + strings.ToLower(rand.Text()[:8])
	mk := func(suffix string, age time.Duration) string {
		d := filepath.Join(own, base+suffix)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Skipf("cannot create cgroups under %s (not root, not delegated): %v", own, err)
		}
		t.Cleanup(func() { _ = unix.Rmdir(d) })
		if age > 0 {
			old := time.Now().Add(-age)
			if err := os.Chtimes(d, old, old); err != nil {
				t.Skipf("cannot age a cgroup directory: %v", err)
			}
		}
		return d
	}
	stale := mk("-stale", 2*staleAge)
	fresh := mk("-fresh", 0)
	busy := mk("-busy", 2*staleAge)
	sleeper := exec.Command("sleep", "100000")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	if err := os.WriteFile(filepath.Join(busy, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0); err != nil {
		t.Skipf("cannot move a process into a cgroup: %v", err)
	}
	old := time.Now().Add(-2 * staleAge)
	_ = os.Chtimes(busy, old, old)
	sweepCgroups(own)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale empty cgroup was kept: %v", err)
	}
	for _, d := range []string{fresh, busy} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s should be kept: %v", d, err)
		}
	}
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	_ = removeCgroup(busy)
}
