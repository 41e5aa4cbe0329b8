package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/polltest"
	"github.com/ncclwiz/ncclwiz/scenario"
)

// fakeEngines puts ssh, pdsh, srun and scp on PATH that only log their
// calls, and returns the log.
func fakeEngines(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls.log")
	for _, name := range []string{"ssh", "pdsh", "srun", "scp", "sbatch", "squeue", "scontrol"} {
		script := "#!/bin/sh\necho \"" + name + " $*\" >> " + log + "\nexit 255\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return log
}

// TestClusterCheckRefusesScenario (issue 22 item 16): `--scenario X
// cluster check --hosts …` made four real ssh calls and showed real
// results inside a practice run. Every engine, from the CLI and the
// wizard, is refused before any node is contacted.
func TestClusterCheckRefusesScenario(t *testing.T) {
	log := fakeEngines(t)
	list, err := scenario.List()
	if err != nil || len(list) == 0 {
		t.Fatal(err)
	}
	sc := list[0].Name
	env := []string{"SLURM_JOB_ID=77", "SLURM_JOB_NODELIST=gpu[01-02]"}
	for _, args := range [][]string{
		{"--hosts", "gpu01,gpu02,gpu03,gpu04"},
		{"--hosts", "gpu01,gpu02", "--engine", "pdsh"},
		{"--hosts", "gpu01,gpu02", "--engine", "ssh", "--mesh"},
		{"--slurm"},
		{"--nodelist", "gpu[01-02]"},
	} {
		_, stderr, code := runCLI(t, env, append([]string{"--scenario", sc, "cluster", "check"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "does not run in a practice scenario") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	a := &App{Stdin: strings.NewReader(""), Scenario: sc}
	defer a.Close()
	if _, err := a.Host(); err != nil {
		t.Fatal(err)
	}
	if _, err := wizardClusterCheck(context.Background(), a, "gpu01,gpu02", func(string) {}); err == nil || !strings.Contains(err.Error(), "practice scenario") {
		t.Errorf("wizard: %v", err)
	}
	if b, err := os.ReadFile(log); err == nil {
		t.Errorf("real engines were run under --scenario:\n%s", b)
	}
}

// scenarioCopies lists the practice copies in dir.
func scenarioCopies(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), scenario.TmpPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestScenarioCopyRemovedOnSignal (issue 22 item 16): SIGHUP during a
// scenario command (here `hang`, which samples for 3 s and does not handle
// SIGHUP) left its private copy in /tmp — 24 were found. Now the copy is
// gone when the process ends by SIGHUP, SIGTERM or SIGINT, and a copy a
// SIGKILL leaves is swept by the next scenario run.
func TestScenarioCopyRemovedOnSignal(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	start := func() *exec.Cmd {
		cmd := exec.Command(self, "--scenario", "watchdog-timeout", "hang")
		cmd.Env = append(os.Environ(), envRunCLI+"=1", "TMPDIR="+tmp)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !polltest.Until(5*time.Second, func() bool { return len(scenarioCopies(tmp)) == 1 }) {
			t.Fatal("the scenario copy never appeared")
		}
		return cmd
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT} {
		cmd := start()
		_ = cmd.Process.Signal(sig)
		_ = cmd.Wait()
		if left := scenarioCopies(tmp); len(left) != 0 {
			t.Errorf("%v: copies left: %v", sig, left)
			for _, l := range left {
				_ = os.RemoveAll(filepath.Join(tmp, l))
			}
		}
	}
	cmd := start()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if left := scenarioCopies(tmp); len(left) != 1 {
		t.Fatalf("after SIGKILL: %v", left)
	}
	next := exec.Command(self, "--scenario", "healthy-h100", "check")
	next.Env = append(os.Environ(), envRunCLI+"=1", "TMPDIR="+tmp)
	_ = next.Run()
	if left := scenarioCopies(tmp); len(left) != 0 {
		t.Errorf("the next scenario run did not sweep the copy SIGKILL left: %v", left)
	}
}
