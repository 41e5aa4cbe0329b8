package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func runCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: env}
	err := Execute(a, args)
	return out.String(), errb.String(), ExitCode(err)
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile(filepath.Join("..", "docs", "report.schema.json"))
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, doc string) map[string]any {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, doc)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("output does not match docs/report.schema.json: %v\n%s", err, doc)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(doc), &m)
	return m
}

// A scenario host gives a deterministic machine for the CLI contract.
func TestCheckJSONMatchesSchema(t *testing.T) {
	sch := compileSchema(t)
	for _, sc := range []string{"shm-orphans", "healthy-h100", "docker-small-shm"} {
		t.Run(sc, func(t *testing.T) {
			out, stderr, code := runCLI(t, nil, "check", "--json", "--scenario", sc)
			doc := validate(t, sch, out)
			sum := doc["summary"].(map[string]any)
			if int(sum["exit_code"].(float64)) != code {
				t.Errorf("exit code %d but summary says %v (stderr %s)", code, sum["exit_code"], stderr)
			}
			if doc["host"].(map[string]any)["simulated"] != true {
				t.Error("scenario not marked simulated")
			}
		})
	}
}

func TestCheckExitCodesAndFlags(t *testing.T) {
	out, _, code := runCLI(t, nil, "check", "--scenario", "shm-orphans", "--only", "shm.segments")
	if code != 1 || !strings.Contains(out, "orphaned") || strings.Contains(out, "env.nccl") {
		t.Errorf("--only shm.segments on orphans: code %d\n%s", code, out)
	}
	out, _, code = runCLI(t, nil, "check", "--scenario", "healthy-h100", "--only", "shm")
	if code != 0 || !strings.Contains(out, "shm.mount") || !strings.Contains(out, "shm.segments") {
		t.Errorf("healthy shm: code %d\n%s", code, out)
	}
	_, stderr, code := runCLI(t, nil, "check", "--only", "nope.nope")
	if code != 2 || !strings.Contains(stderr, "unknown check nope.nope") {
		t.Errorf("unknown check: code %d stderr %q", code, stderr)
	}
	_, stderr, code = runCLI(t, nil, "check", "--bogus")
	if code != 2 || !strings.Contains(stderr, "unknown flag") {
		t.Errorf("bad flag: code %d stderr %q", code, stderr)
	}
	out, _, code = runCLI(t, nil, "check", "--list-checks")
	if code != 0 || !strings.Contains(out, "shm.segments") || !strings.Contains(out, "host.ipc") {
		t.Errorf("--list-checks: code %d\n%s", code, out)
	}
}

// The real binary under a pseudo-terminal would colour; piped and with
// NO_COLOR (any value) it must not emit escape sequences.
func TestNoColorAnyValue(t *testing.T) {
	for _, v := range []string{"1", "yes", "anything"} {
		out, _, _ := runCLI(t, []string{"NO_COLOR=" + v, "TERM=xterm-256color"}, "check", "--scenario", "shm-orphans", "-v")
		if strings.Contains(out, "\x1b") {
			t.Errorf("NO_COLOR=%s: escape bytes in output", v)
		}
	}
}

// The binary with no TTY and no arguments prints the report and exits with
// the check's code (what `ssh host ncclwiz` gets).
func TestBinaryWithoutTTY(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "ncclwiz")
	build := exec.Command("go", "build", "-o", bin, "..")
	build.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--scenario", "shm-orphans")
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("exit %d (%v), want 1:\n%s", code, err, out.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("ncclwiz without a TTY did not finish")
	}
	if !strings.Contains(out.String(), "ncclwiz check") || strings.Contains(out.String(), "TTY") {
		t.Errorf("no-TTY output:\n%s", out.String())
	}
}

func TestCheckJSONOnRealTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	old := time.Now().Add(-time.Hour)
	for _, n := range []string{"nccl-aaaaaa", "nccl-bbbbbb"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, bytes.Repeat([]byte{1}, 100<<10), 0o600); err != nil {
			t.Fatal(err)
		}
		_ = os.Chtimes(p, old, old)
	}
	out, _, code := runCLI(t, nil, "check", "--json", "--shm-path", dir, "--only", "shm")
	doc := validate(t, compileSchema(t), out)
	if code != 1 {
		t.Errorf("exit %d, want 1 (orphaned segments)", code)
	}
	if doc["host"].(map[string]any)["shm_dir"] != dir {
		t.Errorf("shm_dir = %v", doc["host"])
	}
	found := false
	for _, f := range doc["findings"].([]any) {
		fm := f.(map[string]any)
		if fm["check"] == "shm.segments" && strings.Contains(fm["title"].(string), "2 orphaned NCCL segment(s)") {
			found = true
		}
	}
	if !found {
		t.Errorf("orphaned segments not reported:\n%s", out)
	}
}
