package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

// envRunCLI makes the test binary run ncclwiz itself (as main.go does), so
// that tests can signal a real process.
const envRunCLI = "NCCLWIZ_CLI_TEST_MAIN"

// makeOrphans creates n empty, hour-old segments quickly.
func makeOrphans(t *testing.T, dir string, n int) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("nccl-int-%06d", i))
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

var removedRe = regexp.MustCompile(`interrupted: removed ([\d,]+) segments?`)

// TestFixInterrupted: SIGINT, SIGTERM or SIGHUP while fix --apply
// shm.cleanup is removing thousands of orphans. Every time, ncclwiz exits
// with 130 after the file it was on, prints the summary (how many it
// removed), every file is either removed or untouched (the count on disk
// matches the summary), nothing is left renamed, and the held segment is
// still there. Before, an interrupt killed it without a summary and 6 of
// 15 left files renamed to nccl-ncclwiz-rm-*.
func TestFixInterrupted(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "64M")
	const n = 8200
	held := shmtest.MakeSegment(t, dir, "nccl-held", 4096, time.Hour)
	shmtest.Start(t, "open", held)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sigs := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}
	interrupted, lastOut := 0, ""
	for run := range 15 {
		makeOrphans(t, dir, n)
		cmd := exec.Command(self, "--shm-path", dir, "fix", "--apply", "shm.cleanup", "--yes")
		cmd.Env = append(os.Environ(), envRunCLI+"=1")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(stdout)
		var out strings.Builder
		sig := sigs[run%len(sigs)]
		for {
			line, err := rd.ReadString('\n')
			out.WriteString(line)
			if strings.Contains(line, "proved ") { // the first batch is done
				time.Sleep(time.Duration(run) * time.Millisecond) // a different moment each run
				_ = cmd.Process.Signal(sig)
				break
			}
			if err != nil {
				break
			}
		}
		rest, _ := io.ReadAll(rd)
		out.Write(rest)
		err = cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		ents, _ := os.ReadDir(dir)
		left := 0
		for _, e := range ents {
			switch {
			case strings.HasPrefix(e.Name(), "nccl-ncclwiz-rm-"):
				t.Errorf("run %d: left renamed: %s", run, e.Name())
			case strings.HasPrefix(e.Name(), "nccl-int-"):
				left++
			}
		}
		if !fileExists(held) {
			t.Fatalf("run %d: the held segment was removed", run)
		}
		if code == 0 && left == 0 {
			continue // finished before the signal arrived
		}
		m := removedRe.FindStringSubmatch(out.String())
		if code != 130 || m == nil || !strings.Contains(out.String(), "Interrupted (") {
			t.Fatalf("run %d (%v): exit %d, no interrupted summary:\n%s", run, sig, code, tail(out.String()))
		}
		removed, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", "")) // thousands are grouped
		if removed+left != n {
			t.Errorf("run %d: summary says %d removed, %d of %d are left (some half-done?)", run, removed, left, n)
		}
		interrupted++
		lastOut = tail(out.String())
	}
	if interrupted == 0 {
		t.Error("no run was interrupted while it worked")
	}
	t.Logf("%d of 15 runs interrupted mid-cleanup; the last said:\n%s", interrupted, lastOut)
}

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// TestFixBrokenPipe (issue 22 item 13): `ncclwiz fix --apply … --yes |
// head` closes ncclwiz's stdout while it removes 3,000 orphans (here awk
// exits after the 20th removal it reads). Go's
// default killed ncclwiz with SIGPIPE on its next write, mid-apply and
// without a word. Now it stops after the file in hand, says on stderr how
// many it removed (matching the disk) and exits 141.
func TestFixBrokenPipe(t *testing.T) {
	dir := shmtest.MountTmpfs(t, "64M")
	const n = 3000
	makeOrphans(t, dir, n)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `"$0" --shm-path "$1" fix --apply shm.cleanup --yes 2>"$2" | awk '/removed nccl-int-/ { if (++n == 20) exit }'; echo "${PIPESTATUS[0]}"`,
		self, dir, filepath.Join(t.TempDir(), "stderr"))
	cmd.Env = append(os.Environ(), envRunCLI+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	stderr, _ := os.ReadFile(cmd.Args[len(cmd.Args)-1])
	code := strings.TrimSpace(string(out))
	ents, _ := os.ReadDir(dir)
	left := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "nccl-int-") {
			left++
		}
	}
	if left == 0 {
		t.Skipf("all %d removed before head closed the pipe (exit %s)", n, code)
	}
	m := removedRe.FindStringSubmatch(string(stderr))
	if code != "141" || m == nil || !strings.Contains(string(stderr), "broken pipe") {
		t.Fatalf("exit %s, %d of %d left; stderr:\n%s", code, left, n, tail(string(stderr)))
	}
	removed, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
	if removed+left != n {
		t.Errorf("stderr says %d removed, %d of %d are left", removed, left, n)
	}
	// What to run next looks at the same directory, not /dev/shm.
	if want := "`ncclwiz check --shm-path " + dir + "` shows what is left"; !strings.Contains(string(stderr), want) {
		t.Errorf("no %q in stderr:\n%s", want, tail(string(stderr)))
	}
	t.Logf("exit %s; stderr ends:\n%s", code, tail(string(stderr)))
}
