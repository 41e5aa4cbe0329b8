package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runTestCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	// The fake python3 on the test's PATH is named with --python: by the
	// job's-Python rule a rank of another job running on this machine (CI
	// runs real torch jobs side by side) would come before PATH.
	if py := pathPython(env); py != "" {
		args = append([]string{"--python", py}, args...)
	}
	var out, errb bytes.Buffer
	a := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: env}
	err := Execute(a, append([]string{"test"}, args...))
	return out.String(), errb.String(), ExitCode(err)
}

// pathPython is the python3 the PATH of env finds, or "".
func pathPython(env []string) string {
	for _, kv := range env {
		if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(dirs) {
				if p := filepath.Join(d, "python3"); isFile(p) {
					return p
				}
			}
		}
	}
	return ""
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// fakeTestEnv puts validate's fake launchers (and the fake torch package
// they load) first on PATH.
func fakeTestEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the fake launchers run the real scripts with it")
	}
	bin, err := filepath.Abs(filepath.Join("..", "validate", "testdata", "fake"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "FAKE_REAL_PYTHON=" + py}, extra...)
}

// This machine has no GPU and no torch: a clear message, exit 2, no crash.
func TestTestCommandCannotRun(t *testing.T) {
	env := []string{"PATH=" + t.TempDir(), "HOME=" + t.TempDir()}
	out, errOut, code := runTestCLI(t, env)
	if code != 2 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// The job's Python is a running rank's when one runs here (gpu.JobPython):
	// other tests' real torch jobs on this machine can be that rank.
	noPy := "  - The torchrun backend cannot be used: no running or leftover rank, no active virtualenv or conda env, and no python3 or python on PATH"
	if strings.Contains(out, "(the job's rank pid ") {
		noPy = "  - The torchrun backend cannot be used: "
	}
	for _, want := range []string{"A collective test cannot run here:", noPy,
		"  - The nccl-tests backend cannot be used: all_reduce_perf is not on PATH.", "What to do:", "  - Install PyTorch", "pip install torch", "--nccl-tests"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The wizard's Validate screen says the same, as prose: one sentence
	// each, the backends by their names.
	_, why := wizardDeps(&App{Stdin: strings.NewReader(""), Env: env}, nil).CanValidate(context.Background())
	for _, want := range []string{strings.TrimPrefix(noPy, "  - "), "The nccl-tests backend cannot be used: all_reduce_perf is not on PATH.\n\nInstall PyTorch", "Install PyTorch"} {
		if !strings.Contains(why, want) {
			t.Errorf("wizard's reason lacks %q:\n%s", want, why)
		}
	}
	for _, bad := range []string{"Torchrun", "Nccl-tests", "; ", ".."} {
		if strings.Contains(why, bad) {
			t.Errorf("wizard's reason has %q:\n%s", bad, why)
		}
	}
	if !strings.HasPrefix(errOut, "ncclwiz: a collective test cannot run here") {
		t.Errorf("stderr: %q", errOut)
	}

	out, _, code = runTestCLI(t, env, "--json")
	var doc struct {
		Schema  int      `json:"schema"`
		CanRun  bool     `json:"can_run"`
		Reasons []string `json:"reasons"`
		Hints   []string `json:"hints"`
	}
	if code != 2 || json.Unmarshal([]byte(out), &doc) != nil || doc.Schema != 1 || doc.CanRun || len(doc.Reasons) < 2 || len(doc.Hints) == 0 {
		t.Errorf("exit %d JSON %s", code, out)
	}
}

// The whole command against the fake torchrun: live progress, the table,
// the verdict and exit 0; --json gives the result document.
func TestTestCommandRuns(t *testing.T) {
	env := fakeTestEnv(t, "NCCL_P2P_DISABLE=1")
	out, errOut, code := runTestCLI(t, env, "--rungs", "single,all,fix", "--max-size", "64M", "--timeout", "1m")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"ncclwiz test: torchrun backend", "[all] all 8 GPUs with NCCL's defaults", "NCCL connects via P2P/IPC/read",
		"all_reduce    64 MiB", "RUNG    RANKS  RESULT", "A/B: rung \"all\" without and with NCCL_P2P_DISABLE=1",
		"It costs bandwidth", "Verdict: PASS — all 3 rungs passed (single, all, fix)", "The test's processes ran in a "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, _, code = runTestCLI(t, env, "--rungs", "all", "--max-size", "64M", "--json")
	var res struct {
		Schema  int    `json:"schema"`
		Backend string `json:"backend"`
		Pass    bool   `json:"pass"`
		Rungs   []struct {
			Status     string `json:"status"`
			Transports []struct {
				Class string `json:"class"`
			} `json:"transports"`
		} `json:"rungs"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Schema != 1 || res.Backend != "torchrun" || !res.Pass ||
		res.Rungs[0].Status != "pass" || res.Rungs[0].Transports[0].Class != "P2P" {
		t.Errorf("exit %d: %s", code, out)
	}
	if strings.Contains(out, "ncclwiz test:") {
		t.Error("--json must not mix progress lines into the document")
	}
}

func TestTestCommandFailureExit(t *testing.T) {
	out, _, code := runTestCLI(t, fakeTestEnv(t, "FAKE_SCENARIO=wrong", "FAKE_WRONG=1:67108864"), "--rungs", "all", "--max-size", "64M")
	if code != 1 || !strings.Contains(out, "rank 1: 12 WRONG values in all_reduce at 64 MiB") || !strings.Contains(out, "Verdict: FAIL") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

func TestTestCommandUsage(t *testing.T) {
	env := fakeTestEnv(t)
	for _, args := range [][]string{
		{"--max-size", "lots"}, {"--rungs", "everything"}, {"--env", "NOEQUALS"}, {"--timeout", "0s"},
		{"--tolerance", "3"}, {"--backend", "mpi"}, {"--gpus", "-1"}, {"extra-arg"}, {"--contain", "chroot"},
	} {
		_, errOut, code := runTestCLI(t, env, args...)
		if code != 2 || !strings.HasPrefix(errOut, "ncclwiz: ") {
			t.Errorf("%v: exit %d %q", args, code, errOut)
		}
		// The shape asked for survives the secret redactor (issue 22 item
		// 19: it said "want KEY=[redacted]").
		if args[0] == "--env" && (!strings.Contains(errOut, "want NAME=value") || strings.Contains(errOut, "[redacted]")) {
			t.Errorf("%v: %q", args, errOut)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"256M": 256 << 20, "1g": 1 << 30, "4096": 4096, "8K": 8192} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "0", "-1M", "1T", "65G"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
