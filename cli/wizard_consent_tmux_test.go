package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
	"github.com/ncclwiz/ncclwiz/tui"
)

// The layout for real: a small tmpfs (8 MiB, as root) holding 30
// orphaned NCCL segments, the real binary at 80x24 in tmux. Moving through
// every stage with Tab, Space and Enter changes nothing; y on a plan not yet
// shown in full changes nothing; after scrolling to its end, y removes the
// segments (and remounts when that fix is offered) except one a live process
// opened between the preview and y, which the Apply screen names as kept.
func TestWizardConsentInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	shmtest.RequireRoot(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (CI installs it)")
	}
	bin := tmuxtest.Build(t, "..")
	start := func(t *testing.T) (string, []string, *tmuxtest.Session) {
		dir := shmtest.MountTmpfs(t, "8M")
		var segs []string
		for i := range 30 {
			// Older than the cleanup's minimum age (shm.YoungAge).
			segs = append(segs, shmtest.MakeSegment(t, dir, fmt.Sprintf("nccl-tui%02d", i), 200<<10, time.Hour))
		}
		work := t.TempDir()
		env := []string{"TERM=xterm-256color", "LANG=C.UTF-8", "HOME=" + work, "NO_COLOR=1"}
		s := tmuxtest.Start(t, 80, 24, work, env, bin+" --shm-path "+dir)
		s.WaitFor(10*time.Second, "Diagnose this machine")
		s.Keys("Enter")
		s.WaitFor(30*time.Second, "Findings (3/8)", "30 orphaned NCCL segments")
		return dir, segs, s
	}
	untouched := func(t *testing.T, dir string, segs []string, when string) {
		t.Helper()
		for _, p := range segs {
			if _, err := os.Lstat(p); err != nil {
				t.Fatalf("%s: %s is gone: %v", when, p, err)
			}
		}
		if size := tmpfsSize(t, dir); size != 8<<20 {
			t.Fatalf("%s: %s is %d bytes, want the 8 MiB it was", when, dir, size)
		}
	}

	t.Run("navigation never acts", func(t *testing.T) {
		dir, segs, s := start(t)
		s.Keys("Tab")
		s.WaitFor(10*time.Second, "Explain (4/8)")
		s.Keys("Tab")
		s.WaitFor(10*time.Second, "Fixes for what was found")
		// Issue 25 item 14: enter with nothing ticked says so; it does not
		// skip the step unseen.
		s.Keys("Enter")
		s.WaitFor(5*time.Second, "Fix (5/8)", "no fix is chosen")
		s.Keys("Space") // cleanup chosen, as in the issue
		s.WaitFor(5*time.Second, "[x] low")
		s.Keys("Tab") // the issue: this applied the cleanup
		scr := s.WaitFor(10*time.Second, "Validate (7/8)")
		if strings.Contains(scr, "Appl") {
			t.Errorf("Tab from Fix reached Apply:\n%s", scr)
		}
		untouched(t, dir, segs, "Tab from Fix")
		s.Keys("BTab")
		s.WaitFor(10*time.Second, "Fix (5/8)", "[x] low")
		s.Keys("Enter")
		s.WaitFor(5*time.Second, "Apply 1 fix?")
		s.Keys("Space", "Enter")
		s.WaitFor(5*time.Second, "press y to apply the plan shown")
		s.Keys("Tab") // the issue: this left the confirm screen into Apply
		s.WaitFor(10*time.Second, "Validate (7/8)")
		untouched(t, dir, segs, "Tab from the confirm screen")
		// Every stage, with every key the issue used, twice around.
		for range 2 {
			for _, k := range []string{"Tab", "Space", "Enter", "BTab", "Space", "Enter", "Tab", "Tab", "Space", "Enter", "Escape", "Space"} {
				s.Keys(k)
				time.Sleep(100 * time.Millisecond) // pacing, not a measurement
			}
			s.Keys("Escape")
		}
		scr = s.Screen()
		untouched(t, dir, segs, "Tab/Space/Enter through every stage")
		if strings.Contains(scr, "Applied") || strings.Contains(scr, "Applying") {
			t.Errorf("navigation applied:\n%s", scr)
		}
	})

	// Issue 22 items 7 and 8, issue 25 item 14: the plan is listed line by
	// line, never as a count to say y to; y needs every line seen, again
	// after a resize (at 40x12 too); a pasted end marker followed by y
	// (\e[201~y) is pasted text, not consent; the "scroll to the end" hint
	// goes once the end is reached. Then y removes the segments except one
	// a live process opened after the preview, which Apply names.
	t.Run("y needs the whole plan, applies it, names what it kept", func(t *testing.T) {
		dir, segs, s := start(t)
		s.Keys("Tab", "Tab")
		scr := s.WaitFor(10*time.Second, "Fixes for what was found", "Remove 30 orphaned")
		s.Keys("Space")
		s.WaitFor(5*time.Second, "[x] low")
		remount := fixRow(scr, "(remount)") - fixRow(scr, "Remove 30 orphaned")
		want := "Apply 1 fix?"
		if remount > 0 {
			for range remount {
				s.Keys("Down")
			}
			s.Keys("Space")
			s.WaitFor(5*time.Second, "[x] medium")
			want = "Apply 2 fixes?"
		}
		s.Keys("Enter")
		// The cleanup's description fills most of the first page: its
		// command lines follow "It runs:" and are read by scrolling.
		scr = s.WaitFor(5*time.Second, want, "It runs:", "not yet shown", "y apply")
		if strings.Contains(scr, "commands") {
			t.Errorf("the plan is counted, not listed:\n%s", scr)
		}
		// A process opens one segment after the preview, as a new rank would.
		held := segs[7]
		holdOpen(t, held) // check_test.go's holder: a live sh/sleep with the file on fd 3
		s.Keys("y")
		scr = s.WaitFor(5*time.Second, "scroll to the end of the plan first (")
		if !strings.Contains(scr, "y apply") {
			t.Errorf("the y/n prompt is not on screen:\n%s", scr)
		}
		untouched(t, dir, segs, "y before the plan was shown")
		s.Keys("End")
		waitWithout(t, s, 5*time.Second, "scroll to the end of the plan first")
		s.WaitFor(5*time.Second, "end; pgup/home to go back", "rm -- ")
		// The plan is read: a paste holding an end marker and y is no y.
		s.Paste("\x1b[201~y")
		s.WaitFor(5*time.Second, "ignored keys that arrived with a paste")
		untouched(t, dir, segs, "a pasted \\e[201~y")
		// A smaller window shows the plan anew: read it again.
		s.Resize(40, 12)
		s.WaitUntil(5*time.Second, func(scr string) bool {
			return strings.Contains(scr, "not yet shown") && !strings.Contains(scr, strings.Repeat("-", 41))
		})
		s.Keys("y")
		s.WaitFor(5*time.Second, "scroll to the end")
		untouched(t, dir, segs, "y at 40x12 after a resize")
		s.Resize(80, 24)
		s.WaitFor(5*time.Second, strings.Repeat("-", 80), "not yet shown") // laid out anew before End
		s.Keys("End")
		s.WaitFor(5*time.Second, "end; pgup/home to go back")
		s.Keys("y")
		scr = s.WaitFor(60*time.Second, "Applied: what happened")
		for _, p := range segs {
			_, err := os.Lstat(p)
			switch {
			case p == held && err != nil:
				t.Errorf("%s was removed while a live process had it open", p)
			case p != held && err == nil:
				t.Errorf("%s survived the cleanup", p)
			}
		}
		if !strings.Contains(scr, "removed 29 segments") {
			t.Errorf("Apply screen lacks the count removed:\n%s", scr)
		}
		// The line under "left alone" names the held segment (and why:
		// the cleanup's own words).
		if row := fixRow(scr, "left alone (1):"); row < 0 || !strings.Contains(strings.Split(scr, "\n")[row+1], filepath.Base(held)+":") {
			t.Errorf("Apply screen does not name %s as left alone:\n%s", filepath.Base(held), scr)
		}
		if remount > 0 {
			if size := tmpfsSize(t, dir); size <= 8<<20 {
				t.Errorf("remount chosen and confirmed, but %s is still %d bytes", dir, size)
			}
		}
	})
}

// fixRow is the screen line number of the first line containing s, or -1.
func fixRow(screen, s string) int {
	for i, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, s) {
			return i
		}
	}
	return -1
}

func tmpfsSize(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * uint64(st.Bsize)
}

// The wizard's deps apply the fix of the plan a view came from, frozen when
// it was planned: a segment that appears after the preview is not touched,
// and a view of a plan never made applies nothing. (No tmux needed; kept
// beside the end-to-end test of the same promise.)
func TestWizardAppliesThePlanShown(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	seg := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shown := []string{seg("nccl-plan01"), seg("nccl-plan02"), seg("nccl-plan03")}
	a := &App{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, ShmPath: dir}
	reg, err := all.Registry()
	if err != nil {
		t.Fatal(err)
	}
	d := wizardDeps(a, reg.All())
	h, err := a.Host()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fs, err := findingsNow(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	var view tui.FixView
	for _, v := range d.PlanFixes(ctx, fs) {
		if v.ID == "shm.cleanup" {
			view = v
		}
	}
	if view.ID == "" {
		t.Fatalf("no cleanup planned for %s: %v", dir, fs)
	}
	later := seg("nccl-later1") // orphaned too, but never previewed

	bogus := view
	bogus.Plan = view.Plan + 100
	if r := d.ApplyFix(ctx, bogus, nil, nil, nil); r.Err == nil || !strings.Contains(r.Err.Error(), "not in the plan that was shown") {
		t.Errorf("a view of no plan: %+v", r)
	}
	for _, p := range append(shown, later) {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("%s removed by a view of no plan", p)
		}
	}

	r := d.ApplyFix(ctx, view, nil, func(string) {}, nil)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, p := range shown {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was previewed and confirmed but not removed: %+v", p, r)
		}
	}
	if _, err := os.Lstat(later); err != nil {
		t.Errorf("%s was not in the plan shown, yet it was removed", later)
	}
}
