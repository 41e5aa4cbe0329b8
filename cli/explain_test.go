package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ncclwiz/ncclwiz/internal/gobin"
	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

const corpusDir = "../explain/testdata/corpus"

func runExplainCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &App{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Env: []string{"TERM=dumb"}}
	err := Execute(a, append([]string{"explain"}, args...))
	return out.String(), errb.String(), ExitCode(err)
}

func TestExplainFileAndJSON(t *testing.T) {
	out, errs, code := runExplainCLI(t, "", filepath.Join(corpusDir, "shm-docker-nospace.log"))
	if code != 0 || !strings.Contains(out, "Root cause: /dev/shm ran out of space") || !strings.Contains(out, "[shm-create-nospace]") {
		t.Fatalf("code %d stderr %q\n%s", code, errs, out)
	}
	for _, want := range []string{"ncclwiz guides shm-no-space", "ncclwiz check --only", "shm.cleanup", "rank 2", "NCCL 2.22.3+cuda12.2"} {
		if !strings.Contains(out, want) {
			t.Errorf("plain output lacks %q", want)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("escape sequences in non-terminal output")
	}

	out, _, code = runExplainCLI(t, "", "--json", filepath.Join(corpusDir, "watchdog-hang-straggler.log"))
	if code != 0 {
		t.Fatalf("code %d", code)
	}
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "explain", "report.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Diagnoses []struct {
			ID        string
			RootCause bool `json:"root_cause"`
			Watchdog  struct{ Verdict string }
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Diagnoses) == 0 || r.Diagnoses[0].ID != "watchdog-timeout" || r.Diagnoses[0].Watchdog.Verdict != "hang" {
		t.Fatalf("json = %+v (%v)", r, err)
	}
}

func TestExplainExitCodes(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.log")
	os.WriteFile(empty, nil, 0o644)
	healthy := filepath.Join(corpusDir, "healthy-info.log")
	// Issue 25 item 12: a directory is read as its logs — torchrun's
	// --log-dir nests them (LOG_DIR/RUN_ID/attempt_0/RANK/stderr.log).
	emptyDir := filepath.Join(dir, "nothing-here")
	logDir := filepath.Join(dir, "torchrun-logs")
	rankLog := filepath.Join(logDir, "run1", "attempt_0", "1", "stderr.log")
	if err := os.MkdirAll(emptyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(rankLog), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rankLog, []byte("[W socket.cpp:401] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// All-NUL inputs of every shape (issue 22 item 19): NULs between
	// newlines, and a sparse file whose one "line" is cut at --max-line
	// (the NULs kept are then a sliver of the bytes read).
	nulLines := filepath.Join(dir, "nul-lines.log")
	os.WriteFile(nulLines, bytes.Repeat([]byte("\x00\x00\x00\n"), 1000), 0o644)
	sparse := filepath.Join(dir, "sparse.log")
	if f, err := os.Create(sparse); err == nil {
		f.Truncate(8 << 20)
		f.Close()
	}
	self, err := os.Executable() // this test binary holds every signature's text
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
		stdout string
	}{
		{"no NCCL failure", "", []string{healthy}, 1, "", "No NCCL failure found"},
		{"python exception is no NCCL diagnosis", "", []string{filepath.Join(corpusDir, "python-exception.log")}, 1, "", "ValueError"},
		{"missing file", "", []string{filepath.Join(dir, "nope.log")}, 2, "no such file", ""},
		{"empty directory", "", []string{emptyDir}, 2, "holds no files to explain", ""},
		{"torchrun log directory", "", []string{logDir}, 0, "", "master-port-in-use"},
		{"empty file", "", []string{empty}, 2, "empty", ""},
		{"stdin twice", "x", []string{"-", "-"}, 2, "only once", ""},
		{"bad max-line", "", []string{"--max-line", "10", healthy}, 2, "--max-line", ""},
		{"piped stdin, no args", "gpu1:1:1 [0] misc/socket.cc:622 NCCL WARN socketTryAccept: Accept failed: Too many open files\n", nil, 0, "", "fd-exhaustion"},
		{"stdin as -", "[W socket.cpp:401] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n", []string{"-"}, 0, "", "master-port-in-use"},
		{"empty stdin", "", nil, 2, "empty", ""},
		// Strings in a binary name every failure there is: not a diagnosis.
		{"binary file", "", []string{filepath.Join(corpusDir, "binary-junk.bin")}, 2, "not a text log", "nothing was diagnosed"},
		{"executable", "", []string{self}, 2, "not a text log", "nothing was diagnosed"},
		{"NULs between newlines", "", []string{nulLines}, 2, "not a text log", "nothing was diagnosed"},
		{"sparse file of zeros", "", []string{sparse}, 2, "not a text log", "nothing was diagnosed"},
		{"NULs on stdin", strings.Repeat("\x00\x00\n", 500), []string{"-"}, 2, "not a text log", "nothing was diagnosed"},
		{"several ranks", "", []string{filepath.Join(corpusDir, "watchdog-rank-crashed", "rank0.log"), filepath.Join(corpusDir, "watchdog-rank-crashed", "rank1.log")}, 0, "", "KeyError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runExplainCLI(t, tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.stderr) || !strings.Contains(out, tt.stdout) {
				t.Fatalf("code %d (want %d)\nstderr %q (want %q)\nstdout:\n%s", code, tt.code, errs, tt.stderr, out)
			}
		})
	}
}

func TestExplainUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "secret.log")
	if err := os.WriteFile(p, []byte("x\n"), 0o000); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		_, errs, code := runExplainCLI(t, "", p)
		if code != 2 || !strings.Contains(errs, "permission denied") {
			t.Fatalf("code %d stderr %q", code, errs)
		}
		return
	}
	// Root reads any file: run the real binary as nobody instead (CI is root).
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := gobin.Reachable(t, tmuxtest.Build(t, ".."))
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "explain", p)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "permission denied") {
		t.Fatalf("as nobody: %v, stderr %q", err, stderr.String())
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "x\n" {
		t.Errorf("the file changed: %q %v", b, err)
	}
}

// A .gz file is recognised by its magic bytes, not its name.
func TestExplainGzipByMagic(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(corpusDir, "ib-memlock-container.log"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(src)
	zw.Close()
	p := filepath.Join(t.TempDir(), "renamed.txt")
	os.WriteFile(p, buf.Bytes(), 0o644)
	out, _, code := runExplainCLI(t, "", "--json", p)
	if code != 0 || !strings.Contains(out, `"id": "ib-memlock"`) || !strings.Contains(out, `"gzip": true`) {
		t.Fatalf("code %d\n%s", code, out)
	}
}

// The wizard's "Explain a log" entry uses the same engine.
func TestExplainForWizard(t *testing.T) {
	a := &App{Env: []string{"TERM=dumb"}}
	r, err := ExplainForWizard(context.Background(), a, "", filepath.Join(corpusDir, "socket-connect-224.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Diagnoses) == 0 || r.Diagnoses[0].ID != "socket-connect-failed" || !r.Diagnoses[0].RootCause || !strings.Contains(r.Render(80), "NCCL 2.25.1+cuda12.8") {
		t.Fatalf("result = %+v", r)
	}
	if _, err := ExplainForWizard(context.Background(), a, "", filepath.Join(t.TempDir(), "missing.log")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("err = %v", err)
	}
}

// A log pasted into the wizard reads as `ncclwiz explain -` reads it, and
// the wizard draws the CLI's own text: its notes and "Next" steps, wrapped
// at the window's width. testdata/paste-nodevice.log is ours; its lines
// follow PyTorch's deprecation warning (c10d Utils.hpp getCvarString),
// NCCL's CUDACHECK "Cuda failure '%s'" (src/include/checks.h) and
// C10D_NCCL_CHECK's DistBackendError (NCCLUtils.hpp).
func TestExplainTextForWizardMatchesCLI(t *testing.T) {
	src, err := os.ReadFile("testdata/paste-nodevice.log")
	if err != nil {
		t.Fatal(err)
	}
	cli, _, code := runExplainCLI(t, string(src), "-")
	if code != 0 {
		t.Fatalf("explain -: exit %d\n%s", code, cli)
	}
	r, err := ExplainTextForWizard(context.Background(), &App{Env: []string{"TERM=dumb"}}, "", string(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Diagnoses) == 0 || r.Diagnoses[0].ID != "cuda-init-failure" || r.Diagnoses[0].Guide != "cuda-driver" {
		t.Fatalf("diagnoses %+v", r.Diagnoses)
	}
	wiz := r.Render(80)
	for _, want := range []string{"Notes (not failures)", "Deprecated PyTorch NCCL variable name", "Next:     - CUDA error 100", "paste:4 (rank 1"} {
		if !strings.Contains(wiz, want) {
			t.Errorf("wizard report lacks %q:\n%s", want, wiz)
		}
	}
	// Line for line the CLI's text, but for the input's name, the log lines
	// themselves (the wizard cuts them to the window) and where lines wrap.
	squeeze := func(s string) string { return strings.Join(strings.Fields(s), "") }
	words := squeeze(wiz)
	lines := strings.Split(cli, "\n")
	for i, l := range lines {
		if i > 0 && strings.Contains(lines[i-1], "Evidence:") {
			continue
		}
		l = squeeze(strings.ReplaceAll(l, "<stdin>:", "paste:"))
		if !strings.Contains(words, l) {
			t.Errorf("the wizard lacks the CLI's line %q", l)
		}
	}
	for _, l := range strings.Split(wiz, "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line of %d cells in an 80-column report: %q", n, l)
		}
	}
}

// With a terminal on stdin and no file, explain says how to pass a log
// instead of waiting for input.
func TestExplainTTYWithoutArgs(t *testing.T) {
	bin := tmuxtest.Build(t, "..")
	s := tmuxtest.Start(t, 100, 20, "", []string{"TERM=xterm-256color"}, bin+" explain")
	scr := s.WaitFor(20*time.Second, "NCCLWIZ-EXIT=2")
	if !strings.Contains(scr, "no log given") || !strings.Contains(scr, "ncclwiz explain train.log") {
		t.Fatalf("screen:\n%s", scr)
	}
}

// On a terminal the report is styled; NO_COLOR (any value) removes every
// escape sequence.
func TestExplainColourOnTerminal(t *testing.T) {
	bin := tmuxtest.Build(t, "..")
	log, _ := filepath.Abs(filepath.Join(corpusDir, "fd-exhaustion.log"))
	s := tmuxtest.Start(t, 120, 40, "", []string{"TERM=xterm-256color", "LANG=C.UTF-8"}, bin+" explain "+log)
	s.WaitFor(20*time.Second, "NCCLWIZ-EXIT=0", "Root cause")
	if !strings.Contains(s.ScreenEscapes(), "\x1b[") {
		t.Error("no styling on a terminal")
	}
	s = tmuxtest.Start(t, 120, 40, "", []string{"TERM=xterm-256color", "LANG=C.UTF-8", "NO_COLOR=1"}, bin+" explain "+log)
	s.WaitFor(20*time.Second, "NCCLWIZ-EXIT=0", "Root cause")
	if scr := s.ScreenEscapes(); strings.Contains(scr, "\x1b[1m") || strings.Contains(scr, "\x1b[3") {
		t.Errorf("styling despite NO_COLOR:\n%q", scr)
	}
}

// Pasted text may carry terminal escapes (a log copied from a coloured
// terminal, or planted in it): none reaches the wizard's screen raw.
func TestExplainTextForWizardSanitises(t *testing.T) {
	src, err := os.ReadFile("testdata/paste-nodevice.log")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), "NCCL WARN Cuda failure", "NCCL WARN \x1b]0;owned\x07\x1b[2JCuda failure", 1) + "\x1b[31mred\x1b[0m\r\n"
	r, err := ExplainTextForWizard(context.Background(), &App{Env: []string{"TERM=dumb"}}, "", text)
	if err != nil {
		t.Fatal(err)
	}
	out := r.Render(80)
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Errorf("control bytes in the wizard's report: %q", out)
	}
	if len(r.Diagnoses) == 0 || r.Diagnoses[0].ID != "cuda-init-failure" {
		t.Errorf("escapes changed the diagnosis: %+v", r.Diagnoses)
	}
}
