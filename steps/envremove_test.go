package steps

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/envcheck"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
	"github.com/ncclwiz/ncclwiz/steps/envsnippet"
)

// The layout of issue 13 item 5: NCCL_TIMEOUT, NCCL_SHM_DIR and
// NCCL_ASYNC_ERROR_HANDLING exported, from ~/.bashrc, fish's config and
// /etc/environment. check warned, but fix, env and the wizard offered
// only NCCL_DEBUG=INFO and the summary said "2 problems left".
func inventedEnvHost(t *testing.T) *host.Host {
	t.Helper()
	return ft.Tree(t, map[string]any{
		"/home/user/.bashrc":                  "# ~/.bashrc\nalias ll='ls -l'\nexport NCCL_TIMEOUT=1800\n# export NCCL_SHM_DIR=/old\n",
		"/home/user/.config/fish/config.fish": "set -gx NCCL_SHM_DIR /scratch/shm\n",
		"/etc/environment":                    "PATH=/usr/bin\nNCCL_ASYNC_ERROR_HANDLING=1\n",
	}, host.FixtureSpec{UID: 1000, Home: "/home/user", Env: map[string]string{
		"NCCL_TIMEOUT": "1800", "NCCL_SHM_DIR": "/scratch/shm", "NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_DEBUG": "INFO",
	}})
}

func envFindings(t *testing.T, h *host.Host) []checks.Finding {
	t.Helper()
	c := envcheck.Checks()[0]
	fs, err := c.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fs {
		fs[i].Check = c.ID
	}
	return fs
}

func TestInventedAndRenamedVariablesHaveAFix(t *testing.T) {
	h := inventedEnvHost(t)
	findings := envFindings(t, h)
	// Every problem (and the deprecation note) names env.export.
	for _, f := range findings {
		if (f.Severity.IsProblem() || strings.Contains(f.Title, "deprecated")) && !slices.Contains(f.Fixes, "env.export") {
			t.Errorf("no fix for %q", f.Title)
		}
	}
	plan := Plan(context.Background(), h, findings)
	fx, ok := ByID(plan, "env.export")
	if !ok {
		t.Fatalf("env.export not planned: %v", ids(plan))
	}
	if fx.Title != "Set TORCH_NCCL_ASYNC_ERROR_HANDLING=1; unset NCCL_ASYNC_ERROR_HANDLING NCCL_SHM_DIR NCCL_TIMEOUT for the next run" {
		t.Errorf("title %q", fx.Title)
	}
	pv := strings.Join(fx.Preview(), "\n")
	for _, want := range []string{
		"export TORCH_NCCL_ASYNC_ERROR_HANDLING=1", "unset NCCL_ASYNC_ERROR_HANDLING", "unset NCCL_SHM_DIR", "unset NCCL_TIMEOUT",
		`torch.distributed.init_process_group("nccl", timeout=datetime.timedelta(seconds=1800))`,
		"~/.bashrc:3: export NCCL_TIMEOUT=1800", "~/.config/fish/config.fish:1: set -gx NCCL_SHM_DIR /scratch/shm",
		"/etc/environment:2: NCCL_ASYNC_ERROR_HANDLING=1",
	} {
		if !strings.Contains(pv, want) {
			t.Errorf("preview lacks %q:\n%s", want, pv)
		}
	}
	if strings.Contains(pv, "/old") {
		t.Errorf("a commented-out line was reported:\n%s", pv)
	}
	// Every output format, each in its own idiom.
	vars := EnvChanges(findings)
	idioms := map[string][]string{
		"bash":   {"unset NCCL_TIMEOUT\n", "export TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n"},
		"zsh":    {"unset NCCL_SHM_DIR\n"},
		"fish":   {"set -e NCCL_TIMEOUT\n", "set -gx TORCH_NCCL_ASYNC_ERROR_HANDLING '1'\n"},
		"python": {`os.environ.pop("NCCL_TIMEOUT", None)` + "\n", `os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"`},
		"dotenv": {"# delete the line NCCL_TIMEOUT=… from this file", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n"},
		"slurm":  {"TORCH_NCCL_ASYNC_ERROR_HANDLING=1", "unset NCCL_ASYNC_ERROR_HANDLING\n"},
		"docker": {"# delete -e NCCL_SHM_DIR=… from the docker run command", "-e TORCH_NCCL_ASYNC_ERROR_HANDLING=1"},
		"k8s":    {`# delete the env entry "- name: NCCL_TIMEOUT" from the container spec`, "- name: TORCH_NCCL_ASYNC_ERROR_HANDLING"},
	}
	for _, f := range envsnippet.Formats {
		out, err := envsnippet.Render(f, vars)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, want := range append(idioms[f], "init_process_group(\"nccl\", timeout=", "~/.bashrc:3: export NCCL_TIMEOUT=1800: delete that line") {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", f, want, out)
			}
		}
	}
	// The bash snippet does it when sourced, and shellcheck accepts it.
	out, _ := envsnippet.Render("bash", vars)
	shellcheck(t, "#!/bin/bash\n"+out)
	got, err := exec.Command("env", "-i", "NCCL_TIMEOUT=1800", "NCCL_SHM_DIR=/x", "NCCL_ASYNC_ERROR_HANDLING=1",
		"bash", "-c", out+"\nenv | grep -E '^(NCCL|TORCH)_' | sort").CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "TORCH_NCCL_ASYNC_ERROR_HANDLING=1" {
		t.Errorf("sourcing the bash snippet left: %q %v", got, err)
	}
	// So does the Python one, at the top of an entry point.
	py, _ := envsnippet.Render("python", vars)
	if python, err := exec.LookPath("python3"); err == nil {
		cmd := exec.Command(python, "-c", py+"\nprint(sorted(k for k in os.environ if k.startswith(('NCCL_', 'TORCH_'))))")
		cmd.Env = []string{"NCCL_TIMEOUT=1800", "NCCL_SHM_DIR=/x", "NCCL_ASYNC_ERROR_HANDLING=1"}
		if got, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(got)) != "['TORCH_NCCL_ASYNC_ERROR_HANDLING']" {
			t.Errorf("python snippet left: %s %v", got, err)
		}
	}
	// Once the user has done it (startup files and environment clean),
	// the check has nothing left to warn about and the fix is not offered.
	for _, p := range []string{"/home/user/.bashrc", "/home/user/.config/fish/config.fish", "/etc/environment"} {
		if err := os.Remove(filepath.Join(h.Root, p)); err != nil {
			t.Fatal(err)
		}
	}
	h.Env = []string{"NCCL_DEBUG=INFO", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1"}
	after := envFindings(t, h)
	if e, w := checks.Problems(after); e+w != 0 {
		t.Errorf("problems left after the fix: %+v", after)
	}
	if _, ok := ByID(Plan(context.Background(), h, after), "env.export"); ok {
		t.Error("env.export still offered")
	}
}

// A variable set only in an NCCL config file is reported with its file and
// line: unsetting it in a shell would not help.
func TestInventedVariableInNCCLConf(t *testing.T) {
	h := ft.Tree(t, map[string]any{"/etc/nccl.conf": "# site\nNCCL_TIMEOUT=600\n"},
		host.FixtureSpec{UID: 1000, Home: "/home/user", Env: map[string]string{"NCCL_DEBUG": "INFO"}})
	fx, ok := ByID(Plan(context.Background(), h, envFindings(t, h)), "env.export")
	if !ok {
		t.Fatal("env.export not planned")
	}
	if pv := strings.Join(fx.Preview(), "\n"); !strings.Contains(pv, "/etc/nccl.conf:2: NCCL_TIMEOUT=600") || !strings.Contains(pv, "seconds=600") {
		t.Errorf("preview:\n%s", pv)
	}
}
