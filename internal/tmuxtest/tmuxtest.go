// Package tmuxtest drives a real binary in a detached tmux session for
// end-to-end tests: fixed size, send-keys, and polling capture-pane for a
// marker with a deadline instead of fixed sleeps.
package tmuxtest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/gobin"
)

// Session is one tmux session running a command.
type Session struct {
	t    testing.TB
	name string
	sock string
}

// Build returns the ncclwiz binary (with NVML, as released), built once
// per test binary by internal/gobin; moduleRoot must be this module's root
// (the callers' "..").
func Build(t testing.TB, moduleRoot string) string {
	t.Helper()
	abs, err := filepath.Abs(moduleRoot)
	if err != nil || abs != gobin.ModuleRoot() {
		t.Fatalf("tmuxtest.Build: %s is not the module root %s (%v)", moduleRoot, gobin.ModuleRoot(), err)
	}
	return gobin.Ncclwiz(t, false)
}

// Start runs command in dir in a new w x h session. env is set with `env`,
// so the tmux server's own environment does not leak in.
func Start(t testing.TB, w, h int, dir string, env []string, command string) *Session {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (CI installs it)")
	}
	s := &Session{t: t, name: fmt.Sprintf("ncclwiz-%d", time.Now().UnixNano()), sock: filepath.Join(t.TempDir(), "tmux.sock")}
	if dir == "" {
		dir = t.TempDir()
	}
	full := "cd '" + dir + "' && env " + strings.Join(env, " ") + " " + command + "; echo NCCLWIZ-EXIT=$?; sleep 600"
	s.tmux("new-session", "-d", "-s", s.name, "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), full)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", s.sock, "kill-server").Run() })
	return s
}

func (s *Session) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", s.sock}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// Keys sends tmux key names (Enter, Escape, Tab, Space, C-c, BTab …).
func (s *Session) Keys(keys ...string) {
	s.t.Helper()
	for _, k := range keys {
		s.tmux("send-keys", "-t", s.name, k)
		// Escape followed quickly by another key reads as alt+key.
		if k == "Escape" {
			time.Sleep(120 * time.Millisecond)
		}
	}
}

// Type sends literal text.
func (s *Session) Type(text string) {
	s.t.Helper()
	s.tmux("send-keys", "-t", s.name, "-l", text)
}

// Screen returns the visible pane as text.
func (s *Session) Screen() string { return s.tmux("capture-pane", "-p", "-t", s.name) }

// ScreenEscapes returns the pane with its SGR escape sequences.
func (s *Session) ScreenEscapes() string { return s.tmux("capture-pane", "-p", "-e", "-t", s.name) }

// WaitFor polls the screen until it contains every marker and has
// settled (see WaitUntil), or fails.
func (s *Session) WaitFor(timeout time.Duration, markers ...string) string {
	s.t.Helper()
	return s.wait(timeout, fmt.Sprintf("%q", markers), func(screen string) bool {
		for _, m := range markers {
			if !strings.Contains(screen, m) {
				return false
			}
		}
		return true
	})
}

// WaitUntil polls the screen until ok accepts it and it has settled, or
// fails. Settled means two captures settleGap apart are identical: tmux
// reads a program's frame from the pty in chunks of a few KB and updates
// its grid between them, so a capture can hold the top of the new frame
// over the bottom of the old one (a 100x30 frame with SGR is bigger than
// one chunk). Markers near the top then match before the frame is
// complete; on a loaded machine the gap is wide enough to catch.
func (s *Session) WaitUntil(timeout time.Duration, ok func(string) bool) string {
	s.t.Helper()
	return s.wait(timeout, "condition", ok)
}

// settleGap is long enough for tmux to read the rest of a frame already
// written to the pty, short enough not to slow the tests.
const settleGap = 50 * time.Millisecond

func (s *Session) wait(timeout time.Duration, what string, ok func(string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var screen, prev string
	for time.Now().Before(deadline) {
		screen = s.Screen()
		if ok(screen) && screen == prev {
			return screen
		}
		prev = screen
		time.Sleep(settleGap)
	}
	s.t.Fatalf("timed out waiting for %s (settled); screen:\n%s", what, screen)
	return ""
}

// Resize changes the window size.
func (s *Session) Resize(w, h int) {
	s.t.Helper()
	s.tmux("resize-window", "-t", s.name, "-x", fmt.Sprint(w), "-y", fmt.Sprint(h))
}

// Paste pastes text as a terminal does: through a tmux buffer, bracketed
// (paste-buffer -p) when the program asked for bracketed paste, with its
// newlines sent as carriage returns like a real paste.
func (s *Session) Paste(text string) {
	s.t.Helper()
	buf := s.name + "-paste"
	cmd := exec.Command("tmux", "-S", s.sock, "load-buffer", "-b", buf, "-")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("tmux load-buffer: %v\n%s", err, out)
	}
	s.tmux("paste-buffer", "-p", "-d", "-b", buf, "-t", s.name)
	// Keys sent at once after a paste are part of it to the wizard (it
	// takes keys arriving in or right after a paste for pasted text):
	// leave the pause a person leaves.
	time.Sleep(PasteQuiet)
}

// PasteQuiet is longer than the wizard's quiet after a paste (tui's
// pasteQuiet, 300 ms).
const PasteQuiet = 450 * time.Millisecond
