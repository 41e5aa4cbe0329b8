package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// The real binary at 80×24, pasted into as a terminal pastes (tmux
// paste-buffer -p: bracketed, newlines as carriage returns). Explain a
// log: a pasted path lands in the field and is explained on Enter; a
// missing file's long error wraps at 80 columns; the log's text pasted
// itself (several lines, testdata/paste-nodevice.log) is explained from
// memory, with the CLI's notes and "Next" steps, and g opens its guide.
func TestWizardPasteInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	bin := tmuxtest.Build(t, "..")
	src, err := os.ReadFile("testdata/paste-nodevice.log")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	logPath := filepath.Join(work, "rank1.log")
	if err := os.WriteFile(logPath, src, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + work}
	s := tmuxtest.Start(t, 80, 24, work, env, bin)
	s.WaitFor(10*time.Second, "Diagnose this machine")
	s.Keys("2")
	s.WaitFor(5*time.Second, "log file:", "or paste the log") // the placeholder reads fully

	// A path, pasted.
	s.Paste(logPath)
	s.WaitFor(5*time.Second, "log file: "+logPath)
	s.Keys("Enter")
	s.WaitFor(10*time.Second, "Root cause: CUDA could not initialise", "rank1.log:4")

	// A missing file with a long path: the error wraps, nothing is cut.
	missing := filepath.Join(work, "a-directory-with-a-long-name", "another-long-directory-name", "rank0.log")
	s.Keys("o", "C-u")
	s.Paste(missing)
	s.Keys("Enter")
	scr := s.WaitFor(10*time.Second, "no such file")
	var joined strings.Builder
	for _, l := range strings.Split(scr, "\n") {
		joined.WriteString(strings.TrimRight(l, " "))
	}
	if !strings.Contains(joined.String(), missing+": no such file") {
		t.Errorf("the error is not shown whole:\n%s", scr)
	}

	// The log itself, pasted: several lines.
	s.Keys("o")
	s.Paste(string(src))
	scr = s.WaitFor(10*time.Second, "pasted text (5 lines)", "Root cause: CUDA could not initialise", "paste:4 (rank 1")
	if strings.Contains(scr, "log file:") {
		t.Errorf("the pasted log went into the path field:\n%s", scr)
	}
	// Scroll through the report: the notes and the Next steps the CLI
	// prints are all there.
	seen := scr
	for i := 0; i < 6 && !(strings.Contains(seen, "Notes (not failures)") && strings.Contains(seen, "Next:") && strings.Contains(seen, "Deprecated PyTorch NCCL variable")); i++ {
		s.Keys("NPage")
		time.Sleep(40 * time.Millisecond)
		seen += s.Screen()
	}
	for _, want := range []string{"Next:     - CUDA error 100", "Notes (not failures)", "Deprecated PyTorch NCCL variable name"} {
		if !strings.Contains(seen, want) {
			t.Errorf("scrolling the report never showed %q:\n%s", want, seen)
		}
	}
	s.WaitFor(5*time.Second, "g opens the guide cuda-driver")
	s.Keys("g")
	s.WaitFor(10*time.Second, "CUDA cannot start")
}
