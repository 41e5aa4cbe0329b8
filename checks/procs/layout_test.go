package procs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/dockertest"
	"github.com/ncclwiz/ncclwiz/internal/gobin"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// These tests reproduce issue 13 item 3 for real (root, Linux): PID
// namespaces made with unshare, ncclwiz run inside them with nsenter, and
// a Docker container whose PID 1 is the launcher, ncclwiz run with docker
// exec. They skip, with the reason, where that is impossible.

func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: PID namespaces (unshare -fp) and nsenter")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
}

// bins builds the rank helper and ncclwiz (static, so that both also run in
// an image holding nothing else).
type bins struct{ dir, helper, tini, ncclwiz string }

func buildBins(t *testing.T) bins {
	t.Helper()
	dir := t.TempDir()
	b := bins{dir: dir, helper: gobin.Build(t, "./checks/procs/testdata/rankhelper", true), tini: filepath.Join(dir, "tini"), ncclwiz: gobin.Ncclwiz(t, true)}
	// A copy named tini: its comm is "tini", as the real one's.
	data, err := os.ReadFile(b.helper)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.tini, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return b
}

// namespace starts args as PID 1 of a new PID and mount namespace and
// returns that process's PID as this test sees it. Ending it ends every
// process in the namespace.
func namespace(t *testing.T, args ...string) int {
	t.Helper()
	cmd := exec.Command("unshare", append([]string{"-fp", "--mount-proc"}, args...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	path := fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid)
	for i := 0; i < 200; i++ {
		if b, err := os.ReadFile(path); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				pid, _ := strconv.Atoi(f[0])
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("unshare started no namespace init")
	return 0
}

// ranksIn waits until n ranks run in the PID namespace of init and returns
// them as this test sees them, by PID.
func ranksIn(t *testing.T, init, n int) []proctab.Process {
	t.Helper()
	h := host.Local(host.LocalOptions{NoNVML: true})
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		ip, err := proctab.ReadProcess(ctx, h, init, proctab.Options{})
		if err != nil {
			t.Fatalf("namespace init %d: %v", init, err)
		}
		tab, err := proctab.Read(ctx, h, proctab.Options{EnvKeys: EnvKeys})
		if err != nil {
			t.Fatal(err)
		}
		var rs []proctab.Process
		for _, p := range tab.All() {
			if p.PIDNS == ip.PIDNS && IsRank(p) && p.PPID != 0 {
				rs = append(rs, p)
			}
		}
		// Orphans must have been adopted before the layout is complete.
		if len(rs) == n && (rs[0].PPID == init || len(tab.Children(init)) > 0) {
			return rs
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("namespace of %d never had %d ranks", init, n)
	return nil
}

// judge runs the judgement on the real machine, with the host's clock
// ahead by skew (the clock seam: a test cannot wait two minutes), and
// returns the assessments of pids.
func judge(t *testing.T, skew time.Duration, pids ...int) map[int]Assessment {
	t.Helper()
	h := host.Local(host.LocalOptions{NoNVML: true})
	h.Clock = func() time.Time { return time.Now().Add(skew) }
	as, err := Assess(context.Background(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]Assessment{}
	for _, a := range as {
		for _, pid := range pids {
			if a.PID == pid {
				out[pid] = a
			}
		}
	}
	return out
}

// inside runs ncclwiz in the PID and mount namespace of init, as a user
// would with nsenter.
func inside(t *testing.T, init int, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(init), "-p", "-m", bin}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errorsAs(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("nsenter %s %v: %v\n%s", bin, args, err, out)
	}
	return string(out)
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// report is the part of check --json these tests read.
type report struct {
	Findings []struct {
		Check    string         `json:"check"`
		Severity string         `json:"severity"`
		Title    string         `json:"title"`
		Evidence map[string]any `json:"evidence"`
		Fixes    []string       `json:"fixes"`
	} `json:"findings"`
}

// ranksSeen parses check --json: the proc.ranks evidence by PID (as seen
// inside), and whether any finding offers proc.stale.
func ranksSeen(t *testing.T, out string) (byPID map[int]map[string]any, offered bool) {
	t.Helper()
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check --json: %v\n%s", err, out)
	}
	byPID = map[int]map[string]any{}
	for _, f := range r.Findings {
		for _, fx := range f.Fixes {
			offered = offered || fx == "proc.stale"
		}
		if f.Check != "proc.ranks" {
			continue
		}
		list, _ := f.Evidence["ranks"].([]any)
		for _, e := range list {
			m := e.(map[string]any)
			byPID[int(m["pid"].(float64))] = m
		}
	}
	return byPID, offered
}

func alive(t *testing.T, p proctab.Process) bool {
	t.Helper()
	q, err := proctab.ReadProcess(context.Background(), host.Local(host.LocalOptions{NoNVML: true}), p.PID, proctab.Options{})
	return err == nil && q.StartTicks == p.StartTicks && !q.Zombie()
}

// TestLayoutsInPIDNamespaces: issue 13 item 3 in unshare'd namespaces.
func TestLayoutsInPIDNamespaces(t *testing.T) {
	needRoot(t, "unshare", "nsenter")
	b := buildBins(t)

	t.Run("launcher is PID 1, ncclwiz entered with nsenter: live ranks are never offered", func(t *testing.T) {
		init := namespace(t, b.helper, "launcher", "2", "busy")
		ranks := ranksIn(t, init, 2)
		// Even ten minutes old, ranks under a running launcher are live.
		as := judge(t, 10*time.Minute, ranks[0].PID, ranks[1].PID)
		for _, r := range ranks {
			if a := as[r.PID]; a.Verdict != Live || !strings.Contains(a.Reason(), "may be its launcher") {
				t.Errorf("rank %d judged %s: %s", r.PID, a.Verdict, a.Reason())
			}
		}
		out := inside(t, init, b.ncclwiz, "check", "--json")
		seen, offered := ranksSeen(t, out)
		if offered || len(seen) != 2 {
			t.Fatalf("inside: offered=%v ranks=%v\n%s", offered, seen, out)
		}
		for pid, e := range seen {
			if e["verdict"] != Live || !strings.Contains(fmt.Sprint(e["why"]), "rankhelper (pid 1) is running") {
				t.Errorf("inside, rank %d: %v", pid, e)
			}
		}
		if out := inside(t, init, b.ncclwiz, "fix"); strings.Contains(out, "proc.stale") || strings.Contains(out, "kill -TERM") {
			t.Errorf("fix offers to end live ranks:\n%s", out)
		}
		inside(t, init, b.ncclwiz, "fix", "--apply", "proc.stale", "--yes")
		for _, r := range ranks {
			if !alive(t, r) {
				t.Errorf("live rank %d was ended", r.PID)
			}
		}
	})

	t.Run("tini is PID 1, launcher died: idle old ranks are leftovers, young ones are not", func(t *testing.T) {
		init := namespace(t, b.tini, "init", "--", b.helper, "launcher", "2", "idle", "exit")
		ranks := ranksIn(t, init, 2)
		old := judge(t, 10*time.Minute, ranks[0].PID, ranks[1].PID)
		for _, r := range ranks {
			a := old[r.PID]
			if a.Verdict != Stale || !strings.Contains(a.Reason(), fmt.Sprintf("its parent is now tini (pid %d, PID 1 of its namespace)", init)) ||
				!strings.Contains(a.Reason(), "no CPU used") {
				t.Errorf("old orphan %d judged %s: %s", r.PID, a.Verdict, a.Reason())
			}
		}
		// As they are (a second old), nothing is flagged and fix ends nothing.
		young := judge(t, 0, ranks[0].PID, ranks[1].PID)
		for _, r := range ranks {
			if a := young[r.PID]; a.Verdict != Young {
				t.Errorf("young orphan %d judged %s: %s", r.PID, a.Verdict, a.Reason())
			}
		}
		seen, offered := ranksSeen(t, inside(t, init, b.ncclwiz, "check", "--json", "--only", "proc.ranks"))
		if offered || len(seen) != 2 {
			t.Errorf("inside: offered=%v ranks=%v", offered, seen)
		}
		for pid, e := range seen {
			if e["verdict"] != Young {
				t.Errorf("inside, rank %d: %v", pid, e)
			}
		}
		inside(t, init, b.ncclwiz, "fix", "--apply", "proc.stale", "--yes")
		for _, r := range ranks {
			if !alive(t, r) {
				t.Errorf("young orphan %d was ended", r.PID)
			}
		}

		// A rank entered from outside with nsenter has PPID 0 inside: not
		// re-parented, never a target.
		cmd := exec.Command("nsenter", "-t", strconv.Itoa(init), "-p", "-m", "env", "RANK=5", "LOCAL_RANK=5", "TORCHELASTIC_RUN_ID=entered", b.helper, "rank", "idle")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		var entered proctab.Process
		for i := 0; i < 300 && entered.PID == 0; i++ {
			tab, _ := proctab.Read(context.Background(), host.Local(host.LocalOptions{NoNVML: true}), proctab.Options{EnvKeys: EnvKeys})
			for _, p := range tab.All() {
				if p.Env["TORCHELASTIC_RUN_ID"] == "entered" && p.Comm == "rankhelper" {
					entered = p
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if entered.PID == 0 || len(entered.NSpid) != 2 {
			t.Fatalf("the nsenter'd rank did not start: %+v", entered)
		}
		seen, offered = ranksSeen(t, inside(t, init, b.ncclwiz, "check", "--json", "--only", "proc.ranks"))
		e := seen[entered.NSLocalPID()]
		if offered || e == nil || e["verdict"] != Live || !strings.Contains(fmt.Sprint(e["why"]), "PPID 0") {
			t.Errorf("inside, the nsenter'd rank: %v (offered %v)", e, offered)
		}
		inside(t, init, b.ncclwiz, "fix", "--apply", "proc.stale", "--yes")
		if !alive(t, entered) {
			t.Error("the nsenter'd rank was ended")
		}
	})

	t.Run("tini is PID 1, launcher died, ranks still working: reported, never offered", func(t *testing.T) {
		init := namespace(t, b.tini, "init", "--", b.helper, "launcher", "2", "busy", "exit")
		ranks := ranksIn(t, init, 2)
		as := judge(t, 10*time.Minute, ranks[0].PID, ranks[1].PID)
		for _, r := range ranks {
			if a := as[r.PID]; a.Verdict != Busy || a.Progress == nil || !a.Progress.Progressed() {
				t.Errorf("working orphan %d judged %s: %s", r.PID, a.Verdict, a.Reason())
			}
		}
	})
}

// TestLayoutsInDocker: a container whose PID 1 is the launcher, and one
// whose PID 1 is a rank (a Kubernetes pod's layout), inspected with docker
// exec. The image holds only the static helper and ncclwiz (docker import;
// there is no registry).
func TestLayoutsInDocker(t *testing.T) {
	dockertest.Require(t)
	b := buildBins(t)
	root := dockertest.Rootfs(t, "tmp", "etc", "dev/shm")
	dockertest.Copy(t, root, "launcher", b.helper)
	dockertest.Copy(t, root, "python3", b.helper) // a rank by name (positive evidence)
	dockertest.Copy(t, root, "tini", b.tini)
	dockertest.Copy(t, root, "ncclwiz", b.ncclwiz)
	image := dockertest.Import(t, "procs", root)

	run := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		name = dockertest.Name(t, "procs", name)
		dockertest.Start(t, name, append([]string{"--network", "none"}, args...)...)
		return name
	}
	exe := func(t *testing.T, c string, args ...string) string {
		t.Helper()
		out, code := dockertest.Exec(t, append([]string{"-e", "NO_COLOR=1", c, "/ncclwiz"}, args...)...)
		if code != 0 && code != 1 {
			t.Fatalf("docker exec %s %v: exit %d\n%s", c, args, code, out)
		}
		return out
	}
	// waitRanks returns the proc.ranks evidence seen inside once n ranks run.
	waitRanks := func(t *testing.T, c string, n int) map[int]map[string]any {
		t.Helper()
		for i := 0; i < 100; i++ {
			seen, offered := ranksSeen(t, exe(t, c, "check", "--json", "--only", "proc.ranks"))
			if offered {
				t.Fatalf("%s: proc.stale offered: %v", c, seen)
			}
			if len(seen) == n {
				return seen
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: never saw %d ranks", c, n)
		return nil
	}

	t.Run("launcher is the container's PID 1", func(t *testing.T) {
		c := run(t, "launcher", image, "/launcher", "launcher", "2", "busy")
		seen := waitRanks(t, c, 2)
		for pid, e := range seen {
			if e["verdict"] != Live || !strings.Contains(fmt.Sprint(e["why"]), "launcher (pid 1) is running") {
				t.Errorf("rank %d: %v", pid, e)
			}
		}
		if out := exe(t, c, "fix"); strings.Contains(out, "kill -TERM") {
			t.Errorf("fix offers to end live ranks:\n%s", out)
		}
		exe(t, c, "fix", "--apply", "proc.stale", "--yes")
		after := waitRanks(t, c, 2)
		for pid, e := range seen {
			if after[pid] == nil || after[pid]["age_seconds"].(float64) < e["age_seconds"].(float64) {
				t.Errorf("rank %d did not survive fix --apply proc.stale --yes: %v", pid, after)
			}
		}
	})

	// Issue 22 item 6: a rank started with docker exec -d has PPID 0 inside
	// and containerd-shim (outside its PID namespace) as parent from the
	// host: not re-parenting either way — one answer, whichever side asks.
	t.Run("a rank started by docker exec -d: live inside and from the host", func(t *testing.T) {
		c := run(t, "execd", image, "/tini", "init", "--", "/launcher", "rank", "idle")
		if out, err := dockertest.Docker("exec", "-d", "-e", "RANK=0", "-e", "LOCAL_RANK=0", "-e", "WORLD_SIZE=2",
			"-e", "TORCHELASTIC_RUN_ID=ncclwiz-execd", c, "/python3", "rank", "idle"); err != nil {
			t.Fatalf("docker exec -d: %v %s", err, out)
		}
		seen := waitRanks(t, c, 1)
		for pid, e := range seen {
			if e["verdict"] != Live || !strings.Contains(fmt.Sprint(e["why"]), "PPID 0") {
				t.Errorf("inside, rank %d: %v", pid, e)
			}
		}
		var hostPID int
		for i := 0; i < 100 && hostPID == 0; i++ {
			tab, _ := proctab.Read(context.Background(), host.Local(host.LocalOptions{NoNVML: true}), proctab.Options{EnvKeys: EnvKeys})
			for _, p := range tab.All() {
				if p.Env["TORCHELASTIC_RUN_ID"] == "ncclwiz-execd" && p.Comm == "python3" {
					hostPID = p.PID
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if hostPID == 0 {
			t.Fatal("the exec'd rank is not visible from the host")
		}
		if a := judge(t, 10*time.Minute, hostPID)[hostPID]; a.Verdict != Live || !strings.Contains(a.Reason(), "outside its PID namespace") {
			t.Errorf("from the host, rank %d judged %s: %s", hostPID, a.Verdict, a.Reason())
		}
	})

	t.Run("a rank is the container's PID 1 (a pod)", func(t *testing.T) {
		c := run(t, "rank", "-e", "RANK=0", "-e", "LOCAL_RANK=0", "-e", "WORLD_SIZE=2", "-e", "TORCHELASTIC_RUN_ID=pod", image, "/launcher", "rank", "idle")
		seen := waitRanks(t, c, 1)
		if e := seen[1]; e == nil || e["verdict"] != Live || !strings.Contains(fmt.Sprint(e["why"]), "PID 1 of its own PID namespace") {
			t.Errorf("PID 1 rank: %v", seen)
		}
		exe(t, c, "fix", "--apply", "proc.stale", "--yes")
		if out, err := dockertest.Docker("inspect", "-f", "{{.State.Running}}", c); err != nil || out != "true" {
			t.Errorf("the container's rank was ended: %s %v", out, err)
		}
	})
}
