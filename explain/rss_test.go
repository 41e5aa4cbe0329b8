package explain

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/explain/internal/loggen"
	"github.com/ncclwiz/ncclwiz/internal/gobin"
)

// maxRSSKiB is README's bound on the real binary's peak resident memory
// while explaining, whatever the input.
const maxRSSKiB = 50 << 10

// The real binary stays under 50 MB of peak RSS (GNU time's %M, no timing
// involved) on a 128 MB INFO log, 8 rank files at once, a 2 GiB line
// without a newline on stdin and a gzip bomb.
func TestBinaryPeakRSS(t *testing.T) {
	skipUnderRace(t)
	if testing.Short() {
		t.Skip("builds the binary and writes 256 MB of logs")
	}
	// A child started by this (big) test process inherits its RSS high
	// water mark through vfork and exec (Linux keeps ru_maxrss across
	// execve), so the child's own rusage would report the parent's. GNU
	// time forks the binary from a small process and reports its own peak.
	timeBin, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		t.Skip("GNU time not installed (CI installs it: apt-get install time)")
	}
	bin := gobin.Ncclwiz(t, false)
	dir := t.TempDir()
	gen := func(name string, o loggen.Options) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := loggen.Generate(f, o); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	job := gen("job.log", loggen.Options{Size: 128e6, Seed: 1, Realistic: true})
	initLog := gen("init.log", loggen.Options{Size: 128e6, Seed: 1, InitHeavy: true})
	var ranks []string
	for r := 0; r < 8; r++ {
		ranks = append(ranks, gen(fmt.Sprintf("rank%d.log", r), loggen.Options{Size: 16e6, Seed: uint64(r + 2), Realistic: true}))
	}
	bomb := filepath.Join(dir, "bomb.log.gz")
	f, err := os.Create(bomb)
	if err != nil {
		t.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	if _, err := io.Copy(zw, &repeatReader{pat: make([]byte, 4096), left: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, tt := range []struct {
		name  string
		args  []string
		stdin io.Reader
		exit  int
		out   string
	}{
		{"128 MB log", []string{job}, nil, 0, "watchdog-timeout"},
		{"128 MB init-heavy log", []string{initLog}, nil, 0, "watchdog-timeout"},
		{"8 rank files", ranks, nil, 0, "8 inputs"},
		{"2 GiB line on stdin", []string{"-"}, &repeatReader{pat: []byte("NCCL INFO x "), left: 2 << 30}, 1, "longer than"},
		{"gzip bomb", []string{bomb}, nil, 2, "not a text log"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rssFile := filepath.Join(dir, "rss")
			cmd := exec.Command(timeBin, append([]string{"-f", "%M", "-o", rssFile, bin, "explain", "--no-color"}, tt.args...)...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}
			cmd.Stdin = tt.stdin
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tt.exit || !strings.Contains(string(out), tt.out) {
				t.Fatalf("exit %d (%v), want %d and %q in:\n%s", code, err, tt.exit, tt.out, clip(string(out)))
			}
			b, err := os.ReadFile(rssFile)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Fields(string(b))
			if len(lines) == 0 {
				t.Fatalf("no RSS from time: %q", b)
			}
			rss, err := strconv.Atoi(lines[len(lines)-1]) // KiB
			if err != nil {
				t.Fatalf("RSS from time: %q", b)
			}
			t.Logf("peak RSS %d KiB", rss)
			if rss > maxRSSKiB {
				t.Errorf("peak RSS %d KiB, over %d KiB", rss, maxRSSKiB)
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}
