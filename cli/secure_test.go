package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// binRun is one run of the real binary.
type binRun struct {
	stdout, stderr string
	code           int
}

// runBin runs the built binary with env (plus PATH) and a generous
// deadline; a run that hits the deadline fails the test.
func runBin(t *testing.T, bin string, env []string, args ...string) binRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}, env...)
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v did not finish", args)
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return binRun{out.String(), errb.String(), code}
}

// startLeftoverRank starts a real process that looks like a rank whose
// launcher is gone (RANK set, re-parented away from its starter), with
// secrets on its command line, and returns its PID. It is killed at the
// end of the test.
func startLeftoverRank(t *testing.T, args string) int {
	t.Helper()
	// sh starts a Python process in the background and exits, so it loses
	// its parent. Python, as a rank is (a shell with RANK is not one).
	cmd := exec.Command("sh", "-c", `exec /usr/bin/python3 -c 'import time; time.sleep(120)' train.py `+args+` >/dev/null 2>&1 & echo $!`)
	cmd.Env = append(os.Environ(), "RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=2")
	// A group of its own, so that cleanup ends bash's sleep too (it would
	// otherwise outlive the test, carrying RANK).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("start rank: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("rank pid %q: %v", out, err)
	}
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	// The command line is visible once bash has started.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if bytes.Contains(b, []byte("train.py")) {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank %d did not start: %q", pid, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBinaryRedactsSecrets reproduces issue 14 item 7 with the real binary
// on this machine: NCCL_NET carries a URL password with an empty user, a
// leftover rank (a real process, read through /proc) carries --hf_token,
// --aws_secret_access_key and --pw on its command line. No output —
// report, check --json, check -v, the fix preview, the dry run, the
// exported script — may show them. A two-minute-old leftover cannot be
// made here for the binary (proc.stale needs positive evidence, age
// included), so the fix preview, dry run and script are proven on the same
// kind of process with the clock seam: steps.TestStaleFixRedactsCommandLine.
func TestBinaryRedactsSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := tmuxtest.Build(t, "..")
	// Issue 22 item 15 adds a user:password@host without a scheme and a
	// bare 40-character AWS secret key.
	const bareAWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYbareAWS773"
	secrets := []string{"hfSecret7731", "awsSecret7731", "pwSecret7731", "urlSecret7731", "userinfoSecret7731", bareAWS[:20]}
	// --pw first: the exported script shows only the first 60 characters.
	startLeftoverRank(t, "--pw pwSecret7731 --hf_token hfSecret7731 --aws_secret_access_key awsSecret7731 "+bareAWS)
	env := []string{"NCCL_NET=redis://:urlSecret7731@store.example.com:6379", "NCCL_COMM_ID=admin:userinfoSecret7731@10.0.0.5:1234"}

	runs := map[string]binRun{
		"report":       runBin(t, bin, env, "report"),
		"check --json": runBin(t, bin, env, "check", "--json"),
		"check -v":     runBin(t, bin, env, "check", "-v"),
	}
	// What each output must show, so the test knows it saw the data.
	wants := map[string][]string{
		"report":       {"--pw [redacted] --hf_token [redacted] --aws_secret_access_key [redacted]", "redis://:[redacted]@", "admin:[redacted]@"},
		"check --json": {"--pw [redacted] --hf_token [redacted] --aws_secret_access_key [redacted] [redacted]", "redis://:[redacted]@", "admin:[redacted]@"},
		"check -v":     {"--hf_token [redacted]", "redis://:[redacted]@", "admin:[redacted]@"},
	}
	for name, r := range runs {
		all := r.stdout + r.stderr
		for _, s := range secrets {
			if strings.Contains(all, s) {
				t.Errorf("%s leaks %q:\n%s", name, s, grepLines(all, s))
			}
		}
		// check -v wraps its evidence to the width, so a wanted phrase may
		// span two lines: compare with whitespace runs folded.
		folded := strings.Join(strings.Fields(all), " ")
		for _, w := range wants[name] {
			if !strings.Contains(folded, w) {
				t.Errorf("%s lacks %q (exit %d):\n%s", name, w, r.code, all)
			}
		}
	}
}

// TestBinaryReportPseudonymisesLinkLocal: a link-local IPv6 address (it
// embeds the MAC address) on an interface is replaced in `report`, like
// any other address. The interface is a dummy one in a private network
// namespace.
func TestBinaryReportPseudonymisesLinkLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace (CI runs as root)")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	bin := tmuxtest.Build(t, "..")
	const ll = "fe80::1c2d:3eff:fe4f:5a6b"
	script := "ip link add nwz-sec0 type veth peer name nwz-sec1 && ip link set nwz-sec0 up && ip -6 addr add " + ll + "/64 dev nwz-sec0 nodad && " +
		"ip -6 addr show dev nwz-sec0 | grep -q 3eff:fe4f && exec \"$0\" report"
	r := runBin(t, "unshare", nil, "-n", "sh", "-c", script, bin)
	if !strings.Contains(r.stdout, "nwz-sec0") {
		t.Fatalf("the report does not show the test interface (exit %d):\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, leak := range []string{ll, "3eff:fe4f"} {
		if strings.Contains(r.stdout, leak) {
			t.Errorf("report leaks %s:\n%s", leak, grepLines(r.stdout, leak))
		}
	}
	if !strings.Contains(r.stdout, "ip-") {
		t.Errorf("no pseudonym in the report:\n%s", grepLines(r.stdout, "nwz-sec0"))
	}
}

// explainLeakLog is a failing job's log whose evidence lines carry a URL
// password with an empty user, an AWS secret in an env dump without '='
// and a Bearer token.
const explainLeakLog = `node1:1234:1300 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node1:1234:1300 [0] NCCL WARN NET/Plugin : connect to https://:urlPwSecret9@store.example.com/v1 failed
node1:1234:1300 [0] include/socket.h:409 NCCL WARN Net : Connect to 10.0.0.2<43981> failed : Connection refused
[rank0]: RuntimeError: upload failed, AWS_SECRET_ACCESS_KEY awsSpaceSecret77/K7MDENGbPxRfiCY rejected (Authorization: Bearer bearerSecret67890)
[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
[rank0]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
[rank0]: Last error:
[rank0]: socketStartConnect: Connect to 10.0.0.2<43981> failed : Software caused connection abort https://:urlPwSecret8@x.example.com
`

// TestBinaryExplainRedactsLogSecrets: explain shows the lines that matter
// (text and --json) with their secrets redacted and the rest intact.
func TestBinaryExplainRedactsLogSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := tmuxtest.Build(t, "..")
	log := filepath.Join(t.TempDir(), "rank0.log")
	if err := os.WriteFile(log, []byte(explainLeakLog), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"explain", "-v", log}, {"explain", "--json", log}} {
		r := runBin(t, bin, nil, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		for _, s := range []string{"urlPwSecret8", "awsSpaceSecret77", "bearerSecret67890"} {
			if strings.Contains(r.stdout+r.stderr, s) {
				t.Errorf("%v leaks %s:\n%s", args, s, grepLines(r.stdout, s))
			}
		}
		for _, w := range []string{"https://:[redacted]@x.example.com", "AWS_SECRET_ACCESS_KEY [redacted] rejected", "Bearer [redacted]", "10.0.0.2<43981>", "ProcessGroupNCCL.cpp:1970"} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%v lacks %q:\n%s", args, w, r.stdout)
			}
		}
	}
}

// TestBinaryErrorsAreSanitised reproduces issue 14 item 10: arguments
// echoed in errors (cobra's unknown flag and command, an unknown check ID,
// a path that cannot be written) and in messages reached the terminal with
// their escape bytes. No ESC or BEL may reach stdout or stderr; the error
// shows them as visible text.
func TestBinaryErrorsAreSanitised(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := tmuxtest.Build(t, "..")
	const title = "\x1b]0;pwned\a"
	dir := t.TempDir()
	tests := [][]string{
		{"check", "--only", "x" + title},
		{"report", "-o", "/nonexist/" + title},
		{"check", "--" + title},
		{"check", "--" + title + "=1"},
		{title},
		{"version", title},
		{"guides", title},
		{"explain", title},
		{"--scenario", title},
		{"--lang", title, "guides"},
		{"env", "--shell", title},
		{"fix", "--apply", title},
		{"check", "--peer", title},
		{"fix", "--scenario", "shm-orphans", "--export", filepath.Join(dir, "fix"+title+".sh")},
		{"report", "--scenario", "shm-orphans", "-o", filepath.Join(dir, "r"+title+".md")},
	}
	for _, args := range tests {
		r := runBin(t, bin, nil, args...)
		all := r.stdout + r.stderr
		if strings.ContainsAny(all, "\x1b\a") {
			t.Errorf("%q: a raw escape reached the terminal (exit %d): %q", args, r.code, all)
		}
		if r.code == 2 && !strings.Contains(r.stderr, `\x1b]0;pwned`) {
			t.Errorf("%q: the error does not show the argument: %q", args, r.stderr)
		}
	}
}

// blockedIn waits (polling, with a generous deadline) until process pid
// has path open or one of its threads sleeps in a kernel function whose
// name contains wchan: then it is waiting where the test wants it.
func blockedIn(t *testing.T, pid int, path, wchan string) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid)
	end := time.Now().Add(30 * time.Second)
	for time.Now().Before(end) {
		if path != "" {
			fds, _ := os.ReadDir(dir + "/fd")
			for _, fd := range fds {
				if l, _ := os.Readlink(dir + "/fd/" + fd.Name()); l == path {
					return
				}
			}
		}
		if wchan != "" {
			tasks, _ := os.ReadDir(dir + "/task")
			for _, task := range tasks {
				if w, _ := os.ReadFile(dir + "/task/" + task.Name() + "/wchan"); strings.Contains(string(w), wchan) {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("pid %d never blocked on %q / %q", pid, path, wchan)
}

// TestBinaryExplainStreams reproduces issue 14 item 9 with the real
// binary: a FIFO whose writer wrote and exited is explained (it used to be
// opened twice, the second open waiting forever); /dev/zero is read up to
// the bound, which the output names; and SIGINT or SIGTERM while it waits
// for a writer, for data, or reads an endless device ends it with a clear
// message (it used to ignore both).
func TestBinaryExplainStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := tmuxtest.Build(t, "..")
	dir := t.TempDir()
	mkfifo := func(name string) string {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("FIFO whose writer exits", func(t *testing.T) {
		p := mkfifo("writer-exits.fifo")
		log := filepath.Join(dir, "job.log")
		if err := os.WriteFile(log, []byte(explainLeakLog), 0o600); err != nil {
			t.Fatal(err)
		}
		// The writer writes the whole log and exits (the log fits in the
		// pipe buffer, so it need not wait for the reader).
		writer := exec.Command("sh", "-c", `cat "$1" > "$2"`, "sh", log, p)
		if err := writer.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = writer.Process.Kill(); _ = writer.Wait() }()
		r := runBin(t, bin, nil, "explain", p)
		if r.code != 0 || !strings.Contains(r.stdout, "Root cause") {
			t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("more files than file descriptors", func(t *testing.T) {
		// Each input is opened when it is read, not all up front.
		var args []string
		for i := 0; i < 100; i++ {
			p := filepath.Join(dir, "rank"+strconv.Itoa(i)+".log")
			if err := os.WriteFile(p, []byte(explainLeakLog), 0o600); err != nil {
				t.Fatal(err)
			}
			args = append(args, p)
		}
		r := runBin(t, "sh", nil, append([]string{"-c", `ulimit -n 40 && exec "$0" explain "$@"`, bin}, args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "100 inputs") && !strings.Contains(r.stdout, "100 files") {
			t.Errorf("exit %d:\n%s%s", r.code, r.stdout[:min(len(r.stdout), 2000)], r.stderr)
		}
	})

	t.Run("/dev/zero is bounded", func(t *testing.T) {
		r := runBin(t, bin, nil, "explain", "--max-stream", "4194304", "/dev/zero")
		if !strings.Contains(r.stdout, "/dev/zero is not a regular file: read its first 4 MiB; the rest was not read") {
			t.Errorf("exit %d, no bound in the output:\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	signals := []struct {
		name  string
		args  []string
		stdin func(t *testing.T) *os.File
		ready func(t *testing.T, pid int, p string)
		sig   syscall.Signal
	}{
		{"SIGINT waiting for a FIFO writer", []string{"explain", "@fifo"}, nil,
			func(t *testing.T, pid int, _ string) { blockedIn(t, pid, "", "wait_for_partner") }, syscall.SIGINT},
		{"SIGTERM waiting for a FIFO writer", []string{"explain", "--json", "@fifo"}, nil,
			func(t *testing.T, pid int, _ string) { blockedIn(t, pid, "", "wait_for_partner") }, syscall.SIGTERM},
		{"SIGINT reading a silent FIFO", []string{"explain", "@held"}, nil,
			func(t *testing.T, pid int, p string) { blockedIn(t, pid, p, "") }, syscall.SIGINT},
		{"SIGINT reading /dev/zero without end", []string{"explain", "--max-stream", "1000000000000000", "/dev/zero"}, nil,
			func(t *testing.T, pid int, _ string) { blockedIn(t, pid, "/dev/zero", "") }, syscall.SIGINT},
		{"SIGINT reading a silent stdin pipe", []string{"explain", "-"},
			func(t *testing.T) *os.File {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = w.Close() })
				return r
			},
			func(t *testing.T, pid int, _ string) { blockedIn(t, pid, "", "pipe") }, syscall.SIGINT},
	}
	for i, tt := range signals {
		t.Run(tt.name, func(t *testing.T) {
			fifo := mkfifo("sig" + strconv.Itoa(i) + ".fifo")
			args := append([]string(nil), tt.args...)
			for j, a := range args {
				switch a {
				case "@fifo":
					args[j] = fifo
				case "@held":
					args[j] = fifo
					// O_RDWR opens without waiting and keeps a silent writer.
					w, err := os.OpenFile(fifo, os.O_RDWR, 0)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = w.Close() })
				}
			}
			cmd := exec.Command(bin, args...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}
			if tt.stdin != nil {
				cmd.Stdin = tt.stdin(t)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			tt.ready(t, cmd.Process.Pid, fifo)
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(15 * time.Second): // generous: it must react within a second
				t.Fatalf("still running after %v", tt.sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(out.String(), "interrupted") {
				t.Errorf("exit %d (%v), want 2 and a message:\n%s", code, cmd.ProcessState, out.String())
			}
		})
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestPrintError(t *testing.T) {
	tests := []struct{ err, want string }{
		{"unknown flag: --\x1b]0;p\a", `ncclwiz: unknown flag: --\x1b]0;p\x07` + "\n"},
		// user:password@host is a secret even without a scheme (issue 22 item 15).
		{"bad peer user:pw@x\u202e", `ncclwiz: bad peer user:[redacted]@x\u202e` + "\n"},
		{"line one\nline two\r", "ncclwiz: line one\nline two\\r\n"},
		{"connect https://:hunter2@store failed", "ncclwiz: connect https://:[redacted]@store failed\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		PrintError(&b, errors.New(tt.err))
		if b.String() != tt.want {
			t.Errorf("PrintError(%q) = %q, want %q", tt.err, b.String(), tt.want)
		}
	}
}
