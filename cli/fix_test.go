package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ncclwiz/ncclwiz/internal/shmtest"
	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
	"github.com/ncclwiz/ncclwiz/steps"
	"github.com/ncclwiz/ncclwiz/tui"
)

// runIn runs the CLI with the given stdin (never a terminal).
func runIn(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &App{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Env: []string{"HOME=" + t.TempDir()}}
	err := Execute(a, args)
	return out.String(), errb.String(), ExitCode(err)
}

func TestFixCommand(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"list", []string{"--scenario", "shm-orphans", "fix"}, 0,
			[]string{"shm.cleanup — Remove 13 orphaned segments (110.3 MiB) from /dev/shm", "rm -- /dev/shm/nccl-1aZ0pQ", "shm.remount", "Apply: ncclwiz fix --apply"}, nil},
		{"unknown fix", []string{"--scenario", "shm-orphans", "fix", "--apply", "shm.nuke"}, 2, nil, []string{`unknown fix "shm.nuke"`}},
		{"no terminal, no --yes", []string{"--scenario", "shm-orphans", "fix", "--apply", "shm.cleanup"}, 2, nil, []string{"pass --yes", "--export FILE"}},
		{"dry run", []string{"--scenario", "shm-orphans", "fix", "--apply", "shm.cleanup", "--dry-run"}, 0,
			[]string{"would remove /dev/shm/nccl-1aZ0pQ (9.2 MiB): proven unused just now", "would remove 13 segments (110.3 MiB); nothing changed", "Dry run: nothing was changed."}, nil},
		{"apply with --yes", []string{"--scenario", "shm-orphans", "fix", "--apply", "shm.cleanup", "--yes"}, 0,
			[]string{"removed nccl-1aZ0pQ (9.2 MiB)", "removed 13 segments, 110.3 MiB freed", "re-check shm.segments", "proof: the re-check no longer reports the problem."}, nil},
		{"nothing to do", []string{"--scenario", "healthy-h100", "fix", "--apply", "shm.cleanup", "--yes"}, 0,
			[]string{"shm.cleanup: no segment in /dev/shm is proven orphaned."}, nil},
		{"impossible in a container", []string{"--scenario", "docker-small-shm", "fix", "--apply", "shm.remount", "--yes"}, 1,
			[]string{"not possible here", "container.shm"}, nil},
		{"export to stdout", []string{"--scenario", "shm-orphans", "fix", "--export", "-"}, 0,
			[]string{"#!/usr/bin/env bash", "set -euo pipefail", "remove_unused /dev/shm/nccl-1aZ0pQ"}, nil},
		{"export and dry-run", []string{"--scenario", "shm-orphans", "fix", "--export", "x.sh", "--dry-run"}, 2, nil, []string{"drop --dry-run"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runIn(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errs)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
		})
	}
}

func TestFixExportFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fix.sh")
	_, errs, code := runIn(t, "", "--scenario", "shm-orphans", "fix", "--export", p)
	if code != 0 || !strings.Contains(errs, "wrote "+p) {
		t.Fatalf("exit %d: %s", code, errs)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("script: %v %v", fi, err)
	}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		if out, err := exec.Command(sc, "-s", "bash", p).CombinedOutput(); err != nil {
			t.Errorf("shellcheck: %v\n%s", err, out)
		}
	}
	// Issue 13 item 4, the user's commands: the script of a practice
	// scenario says so and refuses --apply before any step.
	if !strings.Contains(errs, "a practice script for the simulated scenario shm-orphans") || strings.Contains(errs, "--apply\n") {
		t.Errorf("export message: %s", errs)
	}
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), "# ncclwiz-practice-scenario: shm-orphans") {
		t.Errorf("no marker in the script")
	}
	out, err := exec.Command("bash", p, "--apply").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(string(out), "refusing --apply") {
		t.Errorf("bash %s --apply: %v\n%s", p, err, out)
	}
}

// On a real tmpfs (root): fix --apply removes the orphan and keeps the
// segment a live process maps; the exported script then has nothing to do.
func TestFixOnRealTmpfs(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "64M")
	orphan := shmtest.MakeSegment(t, dir, "nccl-orphan", 1<<20, time.Hour)
	held := shmtest.MakeSegment(t, dir, "nccl-held", 1<<20, time.Hour)
	// A live process holding it open (as its stdin), as an NCCL rank would.
	f, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "600")
	holder.Stdin = f
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	out, errs, code := runIn(t, "", "--shm-path", dir, "fix", "--apply", "shm.cleanup", "--yes")
	if code != 0 || fileExists(orphan) || !fileExists(held) || !strings.Contains(out, "removed 1 segment, 1 MiB freed") {
		t.Fatalf("exit %d orphan %v held %v\n%s\n%s", code, fileExists(orphan), fileExists(held), out, errs)
	}
	out, _, code = runIn(t, "", "--shm-path", dir, "fix", "--apply", "shm.cleanup", "--yes")
	if code != 0 || !strings.Contains(out, "shm.cleanup: no segment in "+dir+" is proven orphaned") {
		t.Errorf("second run: exit %d\n%s", code, out)
	}
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

func TestEnvCommand(t *testing.T) {
	// From a practice scenario the snippet is marked and inert.
	out, errs, code := runIn(t, "", "--scenario", "shm-orphans", "env", "--shell", "k8s", "--set", "NCCL_SOCKET_IFNAME=eth0")
	if code != 0 || !strings.Contains(out, "# ncclwiz-practice-scenario: shm-orphans") || !strings.Contains(out, "#   - name: NCCL_SOCKET_IFNAME") {
		t.Errorf("practice k8s snippet: exit %d\n%s%s", code, out, errs)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			t.Errorf("active line in a practice snippet: %q", l)
		}
	}
	out, _, code = runIn(t, "", "env", "--shell", "k8s", "--set", "NCCL_SOCKET_IFNAME=eth0")
	var spec struct {
		Env []struct{ Name, Value string } `yaml:"env"`
	}
	if code != 0 || yaml.Unmarshal([]byte(out), &spec) != nil || len(spec.Env) == 0 {
		t.Fatalf("k8s: exit %d\n%s", code, out)
	}
	found := false
	for _, e := range spec.Env {
		found = found || (e.Name == "NCCL_SOCKET_IFNAME" && e.Value == "eth0")
	}
	if !found {
		t.Errorf("--set missing from:\n%s", out)
	}
	if _, errs, code := runIn(t, "", "--scenario", "shm-orphans", "env", "--set", "NCCL_TIMEOUT=1800"); code != 2 || !strings.Contains(errs, "init_process_group") {
		t.Errorf("NCCL_TIMEOUT accepted: exit %d %s", code, errs)
	}
	if _, _, code := runIn(t, "", "--scenario", "shm-orphans", "env", "--shell", "ini"); code != 2 {
		t.Errorf("unknown format: exit %d", code)
	}
	out, _, code = runIn(t, "", "--scenario", "healthy-h100", "env")
	if code != 0 || !strings.HasPrefix(out, "#") {
		t.Errorf("nothing to set: exit %d %q", code, out)
	}
}

func TestFallbackCommand(t *testing.T) {
	for _, tt := range []struct {
		name, stdin string
		args        []string
		code        int
		stdout      string
		stderr      []string
	}{
		{"seed line after --", "", []string{"fallback", "--", "accelerate", "launch", "--multi_gpu", "--num_processes", "2", "./train_low_mem.py", "train", "--is_finetune=True"}, 0,
			"CUDA_VISIBLE_DEVICES=0 accelerate launch --num_processes=1 ./train_low_mem.py train --is_finetune=True\n",
			[]string{"--multi_gpu removed", "multiply gradient accumulation by 2"}},
		{"one quoted line keeps its quoting", "", []string{"fallback", `torchrun --nproc_per_node=8 train.py --name "run 1"`}, 0,
			"CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=1 train.py --name \"run 1\"\n", nil},
		{"stdin with continuations", "deepspeed --num_gpus 4 \\\n  train.py --deepspeed ds.json\n", []string{"fallback", "--gpu", "2", "-"}, 0,
			"deepspeed --include=localhost:2 train.py --deepspeed ds.json\n", []string{"ignores CUDA_VISIBLE_DEVICES"}},
		{"refused with a reason", "", []string{"fallback", "torchrun train.py && echo done"}, 1, "", []string{"&& list"}},
		{"control bytes", "", []string{"fallback", "--", "python", "t.py", "\x1b[31m"}, 1, "", []string{"control characters"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runIn(t, tt.stdin, tt.args...)
			if code != tt.code || out != tt.stdout {
				t.Errorf("exit %d (want %d)\nstdout %q\nwant   %q\nstderr %s", code, tt.code, out, tt.stdout, errs)
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
		})
	}
}

// On a terminal, fix --apply asks before each fix: "n" skips, "y" applies.
func TestFixPromptsOnATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := tmuxtest.Build(t, "..")
	s := tmuxtest.Start(t, 120, 50, "", []string{"TERM=xterm-256color", "HOME=" + t.TempDir()},
		bin+" --scenario shm-orphans fix --apply shm.cleanup,shm.remount")
	s.WaitFor(30*time.Second, "Apply shm.cleanup? [y/N]")
	s.Type("n")
	s.Keys("Enter")
	s.WaitFor(10*time.Second, "skipped.", "Apply shm.remount? [y/N]")
	s.Type("y")
	s.Keys("Enter")
	screen := s.WaitFor(30*time.Second, "NCCLWIZ-EXIT=")
	if !strings.Contains(screen, "grew from 128 MiB to") || !strings.Contains(screen, "NCCLWIZ-EXIT=0") {
		t.Errorf("screen:\n%s", screen)
	}
}

// The wizard reads the fixer's verdicts by name; the two lists must agree.
func TestWizardVerdictNamesMatchSteps(t *testing.T) {
	for _, p := range [][2]string{{tui.VerdictPassed, steps.VerdictPassed}, {tui.VerdictFailed, steps.VerdictFailed}, {tui.VerdictUnproven, steps.VerdictUnproven}, {tui.VerdictHandedOn, steps.VerdictHandedOn}} {
		if p[0] != p[1] {
			t.Errorf("tui %q != steps %q", p[0], p[1])
		}
	}
}

// TestSuggestedCommandsKeepContext: the commands check and fix suggest
// next repeat the flags that chose the machine. Without them, `ncclwiz
// --scenario shm-orphans check` told a practising user to run `ncclwiz fix
// --apply shm.cleanup`, which acts on the real /dev/shm, and `--shm-path
// DIR` sent them to /dev/shm (issue 25 item 6 fixed only in the wizard and
// the script).
func TestSuggestedCommandsKeepContext(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"check's fix hint", []string{"--scenario", "shm-orphans", "check", "--only", "shm.segments"},
			[]string{"→ ncclwiz fix --apply shm.cleanup --scenario shm-orphans"}},
		{"fix list", []string{"--scenario", "shm-orphans", "fix"},
			[]string{"Apply: ncclwiz fix --apply ID[,ID] --scenario shm-orphans", "Script: ncclwiz fix --export fix.sh --scenario shm-orphans"}},
		{"nothing to fix", []string{"--scenario", "healthy-h100", "fix"},
			[]string{"`ncclwiz check --scenario healthy-h100` shows what was looked at"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, _ := runIn(t, "", tt.args...)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("%v: no %q in:\n%s%s", tt.args, w, out, errOut)
				}
			}
		})
	}
}
