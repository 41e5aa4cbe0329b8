package cli

import (
	"crypto/rand"
	"encoding/json"
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
	"github.com/ncclwiz/ncclwiz/internal/contain"
	"github.com/ncclwiz/ncclwiz/internal/gobin"
	"github.com/ncclwiz/ncclwiz/internal/polltest"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// e2e is the built binary and what every case shares.
type e2e struct {
	bin, linger, dir string
	// python is the real interpreter for the fakes, per user: a root
	// developer's may live under /root, where nobody cannot reach it.
	python map[string]string
	// userns: whether the user can make a PID namespace here (root
	// directly, nobody through a user namespace); auto then uses one.
	userns map[string]bool
	nons   bool
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	pys := map[string]string{}
	if py, err := exec.LookPath("python3"); err == nil {
		pys["root"] = py
	} else {
		t.Skip("python3 is not installed: the fake launchers run the real probe with it")
	}
	if os.Geteuid() == 0 {
		for _, py := range []string{pys["root"], "/usr/bin/python3"} {
			if exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", py, "-c", "pass").Run() == nil {
				pys["nobody"] = py
				break
			}
		}
	}
	linger, err := filepath.Abs(filepath.Join("..", "validate", "testdata", "linger"))
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir (0700): the nobody cases must reach the binary, and
	// their case directories (made beside it).
	bin := gobin.Reachable(t, gobin.Ncclwiz(t, false))
	dir := filepath.Dir(bin)
	ns := map[string]bool{"root": exec.Command("unshare", "--user", "--pid", "--fork", "--mount", "true").Run() == nil}
	if os.Geteuid() == 0 {
		ns["root"] = exec.Command("unshare", "--pid", "--fork", "--mount", "true").Run() == nil
		ns["nobody"] = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			"unshare", "--user", "--pid", "--fork", "--mount", "true").Run() == nil
	}
	pys["nons"] = pys["root"]
	nons := exec.Command("unshare", "--user", "--map-root-user", "--mount", "sh", "-c", "echo 0 >/proc/sys/user/max_pid_namespaces").Run() == nil
	return &e2e{bin: bin, linger: linger, python: pys, dir: dir, userns: ns, nons: nons}
}

// e2eCase is one run of `ncclwiz test` against the linger fake.
type e2eCase struct {
	// user is "root" (the test's user), "nobody", or "nons": the test's
	// user inside a user namespace that allows no nested PID or user
	// namespace, as in a container, so auto must fall back to the
	// subreaper.
	user   string
	mode   string // --contain
	how    string // hup (tmux kill-session), int, term, timeout, done, kill
	marker string
	dir    string
}

func (c *e2eCase) command(x *e2e) []string {
	var argv []string
	switch c.user {
	case "nobody":
		argv = append(argv, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--")
	case "nons":
		argv = append(argv, "unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
			`echo 0 >/proc/sys/user/max_pid_namespaces && echo 0 >/proc/sys/user/max_user_namespaces && exec "$0" "$@"`)
	}
	// --python names the fake: a rank of another job on this machine would
	// otherwise be the job's Python (gpu.JobPython).
	argv = append(argv, x.bin, "test", "--python", filepath.Join(x.linger, "python3"), "--rungs", "single", "--max-size", "64M", "--json")
	if c.how == "timeout" {
		argv = append(argv, "--timeout", "2s")
	}
	if c.mode != "" {
		argv = append(argv, "--contain", c.mode)
	}
	return argv
}

func (c *e2eCase) env(x *e2e) []string {
	linger := "hang"
	if c.how == "done" {
		linger = "done"
	}
	return []string{
		"PATH=" + x.linger + ":/usr/bin:/bin", "HOME=" + filepath.Join(c.dir, "home"), "TMPDIR=" + filepath.Join(c.dir, "tmp"),
		"LANG=C.UTF-8", "FAKE_REAL_PYTHON=" + x.python[c.user], "FAKE_ARGV_MARKER=" + c.marker, "FAKE_LINGER=" + linger,
	}
}

// argvProcs lists live processes whose command line holds marker.
func argvProcs(marker string, prefix bool) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl := contain.Cmdline(pid)
		if prefix && strings.HasPrefix(cl, marker) || !prefix && strings.Contains(cl, marker) {
			if st, err := proctab.ReadStat(host.Local(host.LocalOptions{NoNVML: true}), pid); err == nil && !st.Zombie() {
				out = append(out, e.Name()+" "+cl)
			}
		}
	}
	return out
}

// run starts the case, ends ncclwiz the case's way once the setsid
// grandchild is up, and returns the JSON document written (nil for kill).
func (c *e2eCase) run(t *testing.T, x *e2e) []byte {
	t.Helper()
	out := filepath.Join(c.dir, "out.json")
	// Up, or ncclwiz already wrote its report (it could not run).
	grandchild := func() bool {
		return len(argvProcs(c.marker+"-grandchild", true)) > 0 || readFile(out) != ""
	}
	if c.how == "hup" {
		// ncclwiz is the session's leader in a real terminal; killing the
		// session hangs the terminal up (SIGHUP), as closing a window does.
		script := filepath.Join(c.dir, "run.sh")
		// The marker stays out of tmux's argv: only the script holds it.
		var words []string
		for _, w := range append(c.env(x), c.command(x)...) {
			words = append(words, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		body := "#!/bin/sh\nexec env -i " + strings.Join(words, " ") +
			" >" + out + " 2>" + filepath.Join(c.dir, "err.log") + "\n"
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(c.dir, "tmux.sock")
		tmux := func(args ...string) {
			if b, err := exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("tmux %v: %v\n%s", args, err, b)
			}
		}
		tmux("new-session", "-d", "-s", "run", "-x", "100", "-y", "30", script)
		t.Cleanup(func() { _ = exec.Command("tmux", "-S", sock, "kill-server").Run() })
		if !polltest.Until(30*time.Second, grandchild) || readFile(out) != "" {
			t.Fatalf("the fake launcher's grandchild never started: %s\nstderr: %s", readFile(out), readFile(filepath.Join(c.dir, "err.log")))
		}
		tmux("kill-session", "-t", "run")
		// Wait for ncclwiz to finish its report.
		if !polltest.Until(30*time.Second, func() bool { return len(argvProcs(x.bin+" test", false)) == 0 }) {
			t.Fatal("ncclwiz did not exit after its terminal was closed")
		}
		return []byte(readFile(out))
	}

	argv := c.command(x)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = c.env(x)
	of, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer of.Close()
	var errb strings.Builder
	cmd.Stdout, cmd.Stderr = of, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // signals reach ncclwiz only
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sig := map[string]syscall.Signal{"int": syscall.SIGINT, "term": syscall.SIGTERM, "kill": syscall.SIGKILL}[c.how]
	if sig != 0 {
		exited := false
		if !polltest.Until(30*time.Second, func() bool {
			select {
			case err := <-done:
				done <- err
				exited = true
				return true
			default:
				return grandchild()
			}
		}) || exited {
			t.Fatalf("the fake launcher's grandchild never started: %s\nstderr: %s", readFile(out), errb.String())
		}
		_ = cmd.Process.Signal(sig)
	}
	select {
	case err := <-done:
		if c.how != "kill" && ExitCode(err) != 1 && cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("exit %v, want 1 (a failed or interrupted test); stderr: %s", err, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("ncclwiz did not exit; stderr: %s", errb.String())
	}
	if c.how == "kill" {
		return nil
	}
	return []byte(readFile(out))
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// Item 6 end to end: the built binary runs `ncclwiz test` against a fake
// launcher whose rank stays in its group and whose grandchild double
// forks, calls setsid, clears NCCLWIZ_RUN_ID and ignores SIGTERM, SIGHUP
// and SIGINT. Whether ncclwiz's terminal is closed (tmux kill-session), it
// gets SIGINT or SIGTERM, the rung times out, the launcher ends normally
// leaving the grandchild, or ncclwiz is SIGKILLed: shortly after, no
// process with the run's marker in its argv is alive and no
// ncclwiz-test-* directory is left in TMPDIR; where ncclwiz could still
// write its report, the JSON lists the grandchild (PID, command). Each
// case runs as root and as nobody (setpriv), with the strongest
// containment (a PID namespace; a user namespace too for nobody) and with
// the subreaper fallback forced; and as "nons", inside a user namespace
// whose limits allow no nested PID or user namespace (a container), where
// the automatic choice must fall back to the subreaper and say so.
func TestTestCommandContainsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs 27 contained runs")
	}
	x := newE2E(t)
	_, tmuxErr := exec.LookPath("tmux")
	_, setprivErr := exec.LookPath("setpriv")
	var cases []e2eCase
	for _, user := range []string{"root", "nobody", "nons"} {
		for _, mode := range []string{"", contain.ModeSubreaper} {
			if user == "nons" && mode != "" {
				continue
			}
			hows := []string{"hup", "int", "term", "timeout", "done", "kill"}
			if mode == contain.ModeSubreaper || user == "nons" {
				hows = []string{"hup", "int", "term", "done", "kill"}
			}
			for _, how := range hows {
				cases = append(cases, e2eCase{user: user, mode: mode, how: how})
			}
		}
	}
	for _, c := range cases {
		name := c.user + "/" + map[string]string{"": "auto", contain.ModeSubreaper: "subreaper"}[c.mode] + "/" + c.how
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			switch {
			case c.user == "nobody" && os.Geteuid() != 0:
				t.Skip("running as nobody needs root (setpriv); CI runs as root")
			case c.user == "nobody" && setprivErr != nil:
				t.Skip("setpriv is not installed (util-linux)")
			case c.user == "nons" && !x.nons:
				t.Skip("cannot make a user namespace here to forbid nested namespaces in")
			case x.python[c.user] == "":
				t.Skip("no python3 that nobody can run (CI installs Debian's)")
			case c.how == "hup" && tmuxErr != nil:
				t.Skip("tmux is not installed (CI installs it)")
			}
			c.marker = "ncclwiz-e2e-" + strings.ToLower(rand.Text()[:12])
			dir, err := os.MkdirTemp(x.dir, "case-")
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{dir, filepath.Join(dir, "tmp"), filepath.Join(dir, "home")} {
				if err := os.MkdirAll(d, 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(d, 0o777); err != nil {
					t.Fatal(err)
				}
			}
			c.dir = dir
			doc := c.run(t, x)

			if !polltest.Until(15*time.Second, func() bool { return len(argvProcs(c.marker, false)) == 0 }) {
				t.Errorf("processes of the run survived: %q", argvProcs(c.marker, false))
			}
			tmpLeft := func() []string {
				m, _ := filepath.Glob(filepath.Join(dir, "tmp", contain.TmpPrefix+"*"))
				return m
			}
			if !polltest.Until(5*time.Second, func() bool { return len(tmpLeft()) == 0 }) {
				t.Errorf("temporary directories left: %v", tmpLeft())
			}
			if c.how == "kill" {
				return
			}
			var res struct {
				Containment string   `json:"containment"`
				Interrupted bool     `json:"interrupted"`
				Notes       []string `json:"notes"`
				Rungs       []struct {
					TimedOut  bool `json:"timed_out"`
					Survivors []struct {
						PID     int    `json:"pid"`
						Command string `json:"command"`
						Why     string `json:"why"`
					} `json:"survivors"`
				} `json:"rungs"`
			}
			if err := json.Unmarshal(doc, &res); err != nil || len(res.Rungs) == 0 {
				t.Fatalf("JSON report: %v\n%s\nstderr: %s", err, doc, readFile(filepath.Join(dir, "err.log")))
			}
			var killed []string
			found := false
			for _, s := range res.Rungs[0].Survivors {
				killed = append(killed, fmt.Sprintf("%d %s (%s)", s.PID, s.Command, s.Why))
				found = found || s.PID > 0 && strings.HasPrefix(s.Command, c.marker+"-grandchild")
			}
			if !found {
				t.Errorf("the report should list the killed grandchild with its PID and command, lists %q", killed)
			}
			switch c.how {
			case "hup", "int", "term":
				if !res.Interrupted {
					t.Error("the run should be marked interrupted")
				}
			case "timeout":
				if !res.Rungs[0].TimedOut {
					t.Error("the rung should have timed out")
				}
			}
			want := "PID namespace"
			if c.mode == contain.ModeSubreaper || !x.userns[c.user] || c.user == "nons" {
				want = "subreaper"
			}
			if !strings.Contains(res.Containment, want) {
				t.Errorf("containment %q, want %s", res.Containment, want)
			}
			if c.user == "nons" && !strings.Contains(strings.Join(res.Notes, "\n"), "a PID namespace is not available here") {
				t.Errorf("the fallback should be noted: %q", res.Notes)
			}
		})
	}
}
