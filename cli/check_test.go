package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ncclwiz/ncclwiz/internal/shmtest"
	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
	"github.com/ncclwiz/ncclwiz/scenario"
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

// jsonDoc is the JSON document, decoded for the cross-checks the schema
// cannot express.
type jsonDoc struct {
	Host struct {
		ShmDir string `json:"shm_dir"`
	} `json:"host"`
	Summary map[string]int `json:"summary"`
	Checks  []struct {
		ID, Status string
	} `json:"checks"`
	Findings []struct {
		Check, Severity, Title, Guide string
		Fixes                         []string
		Evidence                      map[string]any
	} `json:"findings"`
}

// validate checks doc against docs/report.schema.json and the invariants
// between its parts: summary counts, per-check status, exit code.
func validateReport(t *testing.T, sch *jsonschema.Schema, doc string, code int) jsonDoc {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, doc)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("output does not match docs/report.schema.json: %v\n%s", err, doc)
	}
	var r jsonDoc
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	worst := map[string]string{}
	rank := map[string]int{"error": 0, "warn": 1, "skipped": 2, "info": 3, "ok": 4, "": 5}
	for _, f := range r.Findings {
		counts[f.Severity]++
		if rank[f.Severity] < rank[worst[f.Check]] {
			worst[f.Check] = f.Severity
		}
	}
	for sev, key := range map[string]string{"error": "errors", "warn": "warnings", "skipped": "skipped", "info": "info", "ok": "ok"} {
		if r.Summary[key] != counts[sev] {
			t.Errorf("summary %s = %d, findings say %d", key, r.Summary[key], counts[sev])
		}
	}
	for _, c := range r.Checks {
		if worst[c.ID] != c.Status {
			t.Errorf("check %s status %s, its findings' worst is %q", c.ID, c.Status, worst[c.ID])
		}
	}
	wantCode := 0
	if counts["error"]+counts["warn"] > 0 {
		wantCode = 1
	}
	if r.Summary["exit_code"] != wantCode || code != wantCode {
		t.Errorf("exit code %d, summary says %d, findings imply %d", code, r.Summary["exit_code"], wantCode)
	}
	return r
}

func (r jsonDoc) finding(check, sub string) bool {
	for _, f := range r.Findings {
		if f.Check == check && strings.Contains(f.Title, sub) {
			return true
		}
	}
	return false
}

// Every practice scenario is a deterministic machine for the JSON contract.
func TestCheckJSONMatchesSchema(t *testing.T) {
	sch := compileSchema(t)
	list, err := scenario.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range list {
		t.Run(sc.Name, func(t *testing.T) {
			out, _, code := runCLI(t, nil, "check", "--json", "--scenario", sc.Name)
			r := validateReport(t, sch, out, code)
			if len(r.Checks) == 0 {
				t.Error("no checks ran")
			}
		})
	}
	out, _, code := runCLI(t, nil, "check", "--json", "--scenario", "shm-orphans", "--only", "shm")
	r := validateReport(t, sch, out, code)
	if code != 1 || !r.finding("shm.segments", "12 orphaned NCCL segments and 1 other hold 110.3 MiB in /dev/shm") {
		t.Errorf("shm-orphans: exit %d\n%s", code, out)
	}
}

// The schema must be strict enough to catch drift: each of these documents
// breaks one rule and must be rejected.
func TestSchemaRejectsDrift(t *testing.T) {
	sch := compileSchema(t)
	out, _, _ := runCLI(t, nil, "check", "--json", "--scenario", "shm-orphans", "--only", "shm")
	var good map[string]any
	if err := json.Unmarshal([]byte(out), &good); err != nil {
		t.Fatal(err)
	}
	segEvidence := func(d map[string]any) map[string]any {
		for _, f := range d["findings"].([]any) {
			fm := f.(map[string]any)
			if ev, ok := fm["evidence"].(map[string]any); ok && fm["check"] == "shm.segments" && ev["segments"] != nil {
				return ev
			}
		}
		t.Fatal("no shm.segments evidence")
		return nil
	}
	mutations := map[string]func(d map[string]any){
		"unknown top-level field": func(d map[string]any) { d["extra"] = 1 },
		"bad severity":            func(d map[string]any) { d["findings"].([]any)[0].(map[string]any)["severity"] = "fatal" },
		"unknown finding field":   func(d map[string]any) { d["findings"].([]any)[0].(map[string]any)["hint"] = "x" },
		"camelCase evidence key":  func(d map[string]any) { segEvidence(d)["reclaimableBytes"] = 1 },
		"segment state":           func(d map[string]any) { segEvidence(d)["segments"].([]any)[0].(map[string]any)["state"] = "stale" },
		"segment without inode":   func(d map[string]any) { delete(segEvidence(d)["segments"].([]any)[0].(map[string]any), "inode") },
		"negative byte count":     func(d map[string]any) { segEvidence(d)["reclaimable_bytes"] = -1 },
		"exit code 2 in summary":  func(d map[string]any) { d["summary"].(map[string]any)["exit_code"] = 2 },
		"schema 2":                func(d map[string]any) { d["schema"] = 2 },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			var d map[string]any
			_ = json.Unmarshal([]byte(out), &d)
			mutate(d)
			b, _ := json.Marshal(d)
			inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err := sch.Validate(inst); err == nil {
				t.Errorf("schema accepted a document with %s", name)
			}
		})
	}
	if inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(out)); sch.Validate(inst) != nil {
		t.Error("the unmodified document was rejected")
	}
}

func TestCheckExitCodesAndFlags(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		code      int
		stdout    []string
		notStdout []string
		stderr    string
	}{
		{"healthy shm", []string{"check", "--scenario", "healthy-h100", "--only", "shm"}, 0, []string{"shm.mount", "shm.segments", "No problems found"}, nil, ""},
		{"orphans", []string{"check", "--scenario", "shm-orphans", "--only", "shm.segments"}, 1, []string{"orphaned NCCL segments", "→ ncclwiz fix --apply shm.cleanup"}, []string{"shm.mount", "env.nccl"}, ""},
		{"only shm.mount", []string{"check", "--scenario", "docker-small-shm", "--only", "shm.mount"}, 1, []string{"shm.mount", "64 MiB, the Docker and Kubernetes default"}, []string{"shm.segments"}, ""},
		// The container explains the 64 MiB without counting it again.
		{"container shm counted once", []string{"check", "--json", "--scenario", "docker-small-shm", "--only", "host.container"}, 0, []string{"with the Docker default /dev/shm of 64 MiB", `"severity": "info"`, `"container.shm"`}, []string{`"severity": "warn"`, `"severity": "error"`}, ""},
		// Simulated GPUs sit on the simulated PCI bus too.
		{"pci bus matches NVML", []string{"check", "--scenario", "healthy-h100", "--only", "host.pcie,gpu.inventory"}, 0, []string{"8 NVIDIA GPUs on the PCI bus", "8× NVIDIA H100"}, nil, ""},
		{"only shm.mount json", []string{"check", "--json", "--scenario", "healthy-h100", "--only", "shm.mount"}, 0, []string{`"id": "shm.mount"`}, []string{`"shm.segments"`}, ""},
		{"unknown check", []string{"check", "--only", "nope"}, 2, nil, nil, "unknown check nope"},
		{"unknown dotted check", []string{"check", "--only", "nope.nope"}, 2, nil, nil, "unknown check nope.nope"},
		{"unknown flag", []string{"check", "--bogus"}, 2, nil, nil, "unknown flag"},
		{"stray argument", []string{"check", "shm"}, 2, nil, nil, ""},
		{"unknown scenario", []string{"check", "--scenario", "nope"}, 2, nil, nil, "unknown scenario"},
		{"list checks", []string{"check", "--list-checks"}, 0, []string{"shm.mount", "shm.segments", "host.ipc", "ID", "CATEGORY"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := runCLI(t, nil, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.notStdout {
				if strings.Contains(out, s) {
					t.Errorf("stdout has %q:\n%s", s, out)
				}
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q lacks %q", stderr, tt.stderr)
			}
		})
	}
}

// holdOpen starts a real process that keeps path open (fd 3) until the
// test ends, the way a live NCCL rank holds its segment.
func holdOpen(t *testing.T, path string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", `exec sleep 600 3<>"$1"`, "sh", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	fd := fmt.Sprintf("/proc/%d/fd/3", cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		// The shell opens fd 3 before it execs sleep: wait for both, or the
		// holder may still be named "sh".
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		if target, err := os.Readlink(fd); err == nil && target == path && strings.TrimSpace(string(comm)) == "sleep" {
			return cmd.Process.Pid
		}
	}
	t.Fatalf("holder of %s did not start", path)
	return 0
}

// check --json --shm-path on a real tmpfs: empty (exit 0), with orphans and
// a held segment (exit 1), full (shm.mount error), and a missing path.
func TestCheckJSONOnRealTmpfs(t *testing.T) {
	sch := compileSchema(t)
	dir := shmtest.MountTmpfs(t, "256M")
	out, _, code := runCLI(t, nil, "check", "--json", "--shm-path", dir, "--only", "shm")
	r := validateReport(t, sch, out, code)
	if code != 0 || r.Host.ShmDir != dir || !r.finding("shm.segments", "No NCCL or PyTorch segments in "+dir) {
		t.Fatalf("empty tmpfs: exit %d\n%s", code, out)
	}

	for _, n := range []string{"nccl-aaaaaa", "nccl-bbbbbb"} {
		shmtest.MakeSegment(t, dir, n, 100<<10, time.Hour)
	}
	held := shmtest.MakeSegment(t, dir, "nccl-hhhhhh", 100<<10, time.Hour)
	pid := holdOpen(t, held)
	out, _, code = runCLI(t, nil, "check", "--json", "--shm-path", dir, "--only", "shm")
	r = validateReport(t, sch, out, code)
	if code != 1 || !r.finding("shm.segments", "2 orphaned NCCL segments hold 200 KiB in "+dir) ||
		!r.finding("shm.segments", "1 segment in use by 1 running process") {
		t.Errorf("orphans: exit %d\n%s", code, out)
	}
	for _, f := range r.Findings {
		if list, ok := f.Evidence["segments"].([]any); ok {
			for _, s := range list {
				sm := s.(map[string]any)
				if sm["name"] == "nccl-hhhhhh" && (sm["state"] != "in-use" || !strings.HasPrefix(fmt.Sprint(sm["holders"]), fmt.Sprintf("[%d/sleep via fd", pid))) {
					t.Errorf("held segment: %v", sm)
				}
			}
		}
	}

	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 1<<20); ; {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	out, _, code = runCLI(t, nil, "check", "--json", "--shm-path", dir, "--only", "shm.mount")
	r = validateReport(t, sch, out, code)
	if code != 1 || !r.finding("shm.mount", dir+" is full: 0 B free") {
		t.Errorf("full: exit %d\n%s", code, out)
	}

	missing := filepath.Join(t.TempDir(), "no-such-shm")
	out, _, code = runCLI(t, nil, "check", "--json", "--shm-path", missing, "--only", "shm")
	r = validateReport(t, sch, out, code)
	if code != 1 || !r.finding("shm.mount", missing+" does not exist") {
		t.Errorf("missing: exit %d\n%s", code, out)
	}
}

// The real binary: without a TTY it prints the report (what `ssh host
// ncclwiz` gets); under a pseudo-terminal it colours, unless NO_COLOR is set
// to any non-empty value, --no-color is given or TERM=dumb.
func TestCheckBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := tmuxtest.Build(t, "..")

	t.Run("no TTY", func(t *testing.T) {
		cmd := exec.Command(bin, "--scenario", "shm-orphans")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color"}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("ncclwiz without a TTY did not finish")
		}
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, out.String())
		}
		if !strings.Contains(out.String(), "ncclwiz check") || strings.Contains(out.String(), "\x1b") {
			t.Errorf("no-TTY output:\n%q", out.String())
		}
	})

	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script(1) from util-linux is needed for a pseudo-terminal")
	}
	// script(1) runs the command on a pseudo-terminal and copies its output.
	inPTY := func(t *testing.T, env []string, args ...string) string {
		t.Helper()
		line := bin
		for _, a := range args {
			line += " " + a
		}
		cmd := exec.Command("script", "-qefc", line, "/dev/null")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}, env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		out, _ := cmd.Output()
		return string(out)
	}
	colour := inPTY(t, []string{"TERM=xterm-256color", "COLORTERM=truecolor"}, "check", "--scenario", "shm-orphans")
	if !strings.Contains(colour, "ncclwiz check") || !strings.Contains(colour, "\x1b[") {
		t.Fatalf("on a terminal without NO_COLOR the report should be coloured (else this test proves nothing):\n%q", colour)
	}
	for _, env := range [][]string{
		{"TERM=xterm-256color", "NO_COLOR=1"}, {"TERM=xterm-256color", "NO_COLOR=0"}, {"TERM=xterm-256color", "NO_COLOR=false"},
		{"TERM=xterm-256color", "NO_COLOR=anything at all"}, {"TERM=dumb"},
	} {
		t.Run(strings.Join(env, " "), func(t *testing.T) {
			out := inPTY(t, append(env, "COLORTERM=truecolor"), "check", "--scenario", "shm-orphans", "-v")
			checkNoEscapes(t, out)
		})
	}
	t.Run("--no-color", func(t *testing.T) {
		out := inPTY(t, []string{"TERM=xterm-256color"}, "--no-color", "check", "--scenario", "shm-orphans")
		checkNoEscapes(t, out)
	})
}

// checkNoEscapes fails if the report is missing or carries any ESC byte
// (colour, bold or reset alike).
func checkNoEscapes(t *testing.T, out string) {
	t.Helper()
	if !strings.Contains(out, "orphaned NCCL segments") {
		t.Fatalf("no report:\n%q", out)
	}
	if i := strings.IndexByte(out, 0x1b); i >= 0 {
		t.Errorf("%d ESC bytes in the output; the first at %q", strings.Count(out, "\x1b"), out[max(0, i-20):min(len(out), i+40)])
	}
}

// --deep is gone: it still parses, says so on stderr, and leaves stdout
// (the JSON) alone.
func TestCheckDeepIsGone(t *testing.T) {
	out, errOut, code := runCLI(t, nil, "check", "--deep", "--json", "--scenario", "healthy-h100", "--only", "shm")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "--deep is no longer needed") || !strings.Contains(errOut, "ncclwiz test") {
		t.Fatalf("stderr does not explain --deep: %q", errOut)
	}
	validateReport(t, compileSchema(t), out, code)
	help, _, _ := runCLI(t, nil, "check", "--help")
	if strings.Contains(help, "--deep") {
		t.Fatal("check --help still offers --deep")
	}
}
