package cli

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// The guide browser of the real binary in a real terminal (tmux, 100x30):
// filter the list, open a guide, scroll, search with n, resize, go back,
// walk the Learn track, quit. Every step is asserted from captured screens,
// polling for markers with a deadline.
func TestGuidesBrowserInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	bin := tmuxtest.Build(t, "..")
	s := tmuxtest.Start(t, 100, 30, "", []string{"TERM=xterm-256color", "LANG=C.UTF-8"}, bin+" guides")
	s.WaitFor(10*time.Second, "ncclwiz guides (", "/ filter")

	// Filter.
	s.Keys("/")
	s.WaitFor(5*time.Second, "Filter:")
	s.Type("sigbus")
	s.Keys("Enter")
	scr := s.WaitFor(5*time.Second, `“sigbus”`, "Bus error (SIGBUS) when /dev/shm runs out")
	if strings.Contains(scr, "Errors that are consequences") {
		t.Errorf("the filter kept unrelated guides:\n%s", scr)
	}

	// Open.
	s.Keys("Enter")
	scr = s.WaitFor(10*time.Second, "ncclwiz guides › shm-sigbus", "## Symptom", "/ search")
	assertLayout(t, scr)

	// Scroll: a page down leaves the first section and moves the position.
	s.Keys("PageDown")
	scr = waitUntil(t, s, 5*time.Second, func(scr string) bool {
		return !strings.Contains(scr, "## Symptom") && !regexp.MustCompile(`(?m)^\s+0%`).MatchString(scr)
	})
	if !regexp.MustCompile(`(?m)^\s*\d+%`).MatchString(scr) {
		t.Errorf("no scroll position after a page down:\n%s", scr)
	}

	// Search, next match.
	s.Keys("g")
	s.WaitFor(5*time.Second, "## Symptom")
	s.Keys("/")
	s.WaitFor(5*time.Second, "search this guide")
	s.Type("shm")
	s.Keys("Enter")
	scr = s.WaitFor(5*time.Second, `match 1/`, `for "shm"`)
	total := regexp.MustCompile(`match 1/(\d+)`).FindStringSubmatch(scr)[1]
	if total == "1" {
		t.Fatalf("want several matches for shm:\n%s", scr)
	}
	s.Keys("n")
	s.WaitFor(5*time.Second, "match 2/"+total)
	s.Keys("N", "N")
	s.WaitFor(5*time.Second, "match "+total+"/"+total)
	esc := s.ScreenEscapes()
	if !strings.Contains(esc, "\x1b[7m") && !regexp.MustCompile(`\x1b\[[0-9;]*;7[;m]`).MatchString(esc) {
		t.Errorf("the current match is not highlighted (reverse video):\n%q", esc)
	}

	// Resize: the guide is re-rendered to the new width (a line wider than
	// the window would wrap and push the header off the top).
	wide := s.Screen()
	s.Resize(60, 20)
	scr = waitUntil(t, s, 5*time.Second, func(scr string) bool {
		return scr != wide && strings.Contains(scr, "for \"shm\"") && strings.HasPrefix(scr, "ncclwiz guides")
	})
	assertLayout(t, scr)
	s.Resize(100, 30)
	s.WaitFor(5*time.Second, "ncclwiz guides › shm-sigbus")

	// Back: esc clears the search, esc again returns to the list.
	s.Keys("Escape")
	waitUntil(t, s, 5*time.Second, func(scr string) bool { return !regexp.MustCompile(`match \d+/`).MatchString(scr) })
	s.Keys("Escape")
	s.WaitFor(5*time.Second, "ncclwiz guides (", `“sigbus”`)
	s.Keys("Escape") // clears the filter
	// The list shows titles, so it is in their order (issue 25 item 15;
	// by ID it read as no order at all).
	scr = s.WaitFor(5*time.Second, "/dev/shm in Docker, Compose", "A GPU kernel faulted")
	if a, b := fixRow(scr, "/dev/shm is too small or full"), fixRow(scr, "A GPU kernel faulted"); a < 0 || b < a {
		t.Errorf("the guide list is not in the order of its titles:\n%s", scr)
	}

	// The Learn track: tab, open step 1, ] to step 2.
	s.Keys("Tab")
	s.WaitFor(5*time.Second, "Learn: 7 steps", "1. What NCCL does")
	s.Keys("Enter")
	assertLayout(t, s.WaitFor(10*time.Second, "Learn 1/7", "## What it is"))
	s.Keys("]")
	s.WaitFor(10*time.Second, "ncclwiz guides › reading-nccl-debug", "Learn 2/7")
	s.Keys("q")
	s.WaitFor(5*time.Second, "Learn: 7 steps")

	// Quit.
	s.Keys("q")
	scr = s.WaitFor(10*time.Second, "NCCLWIZ-EXIT=")
	if !strings.Contains(scr, "NCCLWIZ-EXIT=0") {
		t.Errorf("exit status:\n%s", scr)
	}
}

// With NO_COLOR (any value) the browser shows no colour, yet the search
// highlight stays visible (reverse video is not a colour).
func TestGuidesBrowserNoColorInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	bin := tmuxtest.Build(t, "..")
	s := tmuxtest.Start(t, 80, 24, "", []string{"TERM=xterm-256color", "LANG=zh_CN.UTF-8", "NO_COLOR=yes"}, bin+" guides --learn")
	s.WaitFor(10*time.Second, "Learn: 7 steps", "1. NCCL 做什么")
	s.Keys("Enter")
	s.WaitFor(10*time.Second, "Learn 1/7", "## 它是什么")
	s.Keys("/")
	s.Type("NVLink")
	s.Keys("Enter")
	s.WaitFor(5*time.Second, `for "NVLink"`)
	esc := s.ScreenEscapes()
	if c := colourSGR(esc); c != "" {
		t.Errorf("colour escape %q with NO_COLOR=yes:\n%q", c, esc)
	}
	if !strings.Contains(esc, "7m") {
		t.Errorf("no reverse-video highlight with NO_COLOR:\n%q", esc)
	}
	assertLayout(t, s.Screen())
	s.Keys("C-c")
	s.WaitFor(10*time.Second, "NCCLWIZ-EXIT=0")
}

func waitUntil(t *testing.T, s *tmuxtest.Session, timeout time.Duration, ok func(string) bool) string {
	t.Helper()
	return s.WaitUntil(timeout, ok)
}

// colourSGR returns the first SGR sequence in s that sets a foreground or
// background colour (30-37, 38;…, 40-47, 48;…, 90-97, 100-107), or "".
// Resets to the default colour (39, 49) and attributes are not colours.
func colourSGR(s string) string {
	for _, m := range regexp.MustCompile(`\x1b\[([0-9;:]*)m`).FindAllStringSubmatch(s, -1) {
		for _, p := range strings.Split(m[1], ";") {
			n, err := strconv.Atoi(p)
			if err == nil && (n >= 30 && n <= 38 || n >= 40 && n <= 48 || n >= 90 && n <= 97 || n >= 100 && n <= 107) {
				return m[0]
			}
		}
	}
	return ""
}

// assertLayout checks the viewer's frame: the header on the first line and
// the help bar on the last. Content wider than the window would wrap in
// the terminal and push them out.
func assertLayout(t *testing.T, scr string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(scr, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "ncclwiz guides › ") || !strings.Contains(lines[len(lines)-1], "back") {
		t.Errorf("header or help bar out of place:\n%s", scr)
	}
}
