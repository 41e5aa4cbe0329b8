package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// openPTY opens a pseudo-terminal of w x h: the master (the terminal's
// side) and the slave (the program's).
func openPTY(t *testing.T, w, h int) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(w), Row: uint16(h)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(); _ = s.Close() })
	return m, s
}

// lateTerminal plays a terminal over a slow link: it records every byte
// the program writes and answers each query it sees — DECRQM, the kitty
// keyboard query, device attributes — but only after delay, as a reply
// crossing a slow SSH connection would arrive.
type lateTerminal struct {
	master *os.File
	delay  time.Duration
	mu     sync.Mutex
	out    bytes.Buffer
	sent   []string
	done   chan struct{}
}

func newLateTerminal(master *os.File, delay time.Duration) *lateTerminal {
	lt := &lateTerminal{master: master, delay: delay, done: make(chan struct{})}
	go lt.read()
	return lt
}

func (lt *lateTerminal) read() {
	defer close(lt.done)
	buf := make([]byte, 4096)
	for {
		n, err := lt.master.Read(buf)
		if n > 0 {
			lt.mu.Lock()
			lt.out.Write(buf[:n])
			lt.mu.Unlock()
			for _, r := range replies(buf[:n]) {
				go func(r string) {
					time.Sleep(lt.delay)
					lt.mu.Lock()
					lt.sent = append(lt.sent, r)
					lt.mu.Unlock()
					_, _ = lt.master.Write([]byte(r))
				}(r)
			}
		}
		if err != nil {
			return
		}
	}
}

// replies are a real terminal's answers to the queries in b (xterm's and
// kitty's wording).
func replies(b []byte) []string {
	var out []string
	s := string(b)
	for q, r := range map[string]string{
		"\x1b[?2026$p": "\x1b[?2026;2$y", "\x1b[?2027$p": "\x1b[?2027;2$y", "\x1b[?u": "\x1b[?0u",
		"\x1b[c": "\x1b[?62;22c", "\x1b[>c": "\x1b[>41;390;0c", "\x1b]11;?\x07": "\x1b]11;rgb:0000/0000/0000\x07",
	} {
		for range strings.Count(s, q) {
			out = append(out, r)
		}
	}
	return out
}

func (lt *lateTerminal) output() string {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.out.String()
}

func (lt *lateTerminal) wait(t *testing.T, what string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(lt.output(), what) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q from the program; it wrote:\n%q", what, lt.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Issue 25 item 9, through a real pty: the wizard starts, is quit at once,
// and the shell that ran it reads what the terminal sends next — as it
// would over a slow SSH link, where replies to start-up queries arrive
// after the program has stopped reading. The wizard sends no query at
// all (so nothing can be answered into the shell), sets and resets no
// window title, and with TERM=dumb draws no full-screen UI: it prints the
// plain report and says why.
func TestWizardNeverQueriesTheTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := tmuxtest.Build(t, "..")
	shm := t.TempDir()

	t.Run("late answers never reach the shell", func(t *testing.T) {
		master, slave := openPTY(t, 80, 24)
		leak := filepath.Join(t.TempDir(), "leak")
		// After the wizard, the shell reads one line of input for 2 s: any
		// late reply would land there (read -r keeps the escapes).
		cmd := exec.Command("bash", "-c", `"$0" --shm-path "$1"; IFS= read -r -t 2 line; printf %s "$line" > "$2"`, bin, shm, leak)
		cmd.Env = []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		lt := newLateTerminal(master, time.Second)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		lt.wait(t, "Diagnose this machine", 20*time.Second)
		if _, err := master.Write([]byte("q")); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("sh: %v\n%q", err, lt.output())
		}
		out := lt.output()
		if stripped, rest := termio.StripQueries([]byte(out)); string(stripped) != out || len(rest) > 0 {
			t.Errorf("the wizard queried the terminal; queries sent: %q", queriesIn(out))
		}
		lt.mu.Lock()
		sent := lt.sent
		lt.mu.Unlock()
		if len(sent) > 0 {
			t.Errorf("the terminal had to answer %q", sent)
		}
		if b, _ := os.ReadFile(leak); len(b) > 0 {
			t.Errorf("the shell after the wizard read a terminal reply as typed input: %q", b)
		}
		for _, title := range []string{"\x1b]0;", "\x1b]2;"} {
			if strings.Contains(out, title) {
				t.Errorf("the wizard set or reset the window title (%q)", title)
			}
		}
	})

	t.Run("TERM=dumb gets the plain report", func(t *testing.T) {
		master, slave := openPTY(t, 80, 24)
		cmd := exec.Command(bin, "--shm-path", shm)
		cmd.Env = []string{"TERM=dumb", "LANG=C.UTF-8", "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		lt := newLateTerminal(master, 0)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("TERM=dumb: still running; wrote:\n%q", lt.output())
		}
		_ = slave.Close()
		<-lt.done
		out := lt.output()
		if !strings.Contains(out, "TERM=dumb cannot show the wizard") || !strings.Contains(out, "shm.mount") {
			t.Errorf("TERM=dumb: no plain report with its reason:\n%s", out)
		}
		for _, seq := range []string{"\x1b[?1049h", "\x1b[H", "\x1b[1m", "\x1b[2J"} {
			if strings.Contains(out, seq) {
				t.Errorf("TERM=dumb: the output has %q (full-screen UI or bold)", seq)
			}
		}
	})
}

// queriesIn lists the query sequences in s, for the failure message.
func queriesIn(s string) []string {
	var out []string
	for q := range map[string]string{"\x1b[?2026$p": "", "\x1b[?2027$p": "", "\x1b[?u": "", "\x1b[c": "", "\x1b[>c": ""} {
		if strings.Contains(s, q) {
			out = append(out, q)
		}
	}
	return out
}
