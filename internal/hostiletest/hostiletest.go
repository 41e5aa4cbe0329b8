// Package hostiletest keeps the "hostile inputs × readers" attack family
// in CI: every reader of a file someone else may control (flight-recorder
// dumps, --from-json reports, NCCL config and startup files, hostfiles)
// is run against the same planted inputs — a FIFO, a FIFO fed forever, a
// symlink to /dev/zero, a character device, a sparse 8 GiB file, a
// directory, and a valid file that a loop swaps for a FIFO or a symlink
// with renameat2(RENAME_EXCHANGE) while it is read. The reader runs in a
// child (the test binary re-executed), which is killed and the test failed
// if it hangs or its memory passes a limit, so a regression cannot take
// the CI machine down with it.
package hostiletest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/internal/grouptest"
)

const (
	envReader  = "NCCLWIZ_HOSTILE_READER"
	envPath    = "NCCLWIZ_HOSTILE_PATH"
	envRepeats = "NCCLWIZ_HOSTILE_REPEATS"
	envSwap    = "NCCLWIZ_HOSTILE_SWAP"
	envFeed    = "NCCLWIZ_HOSTILE_FEED"
)

// Reader reads what is at path the way one ncclwiz reader does and says
// what it made of it: an error (or a skip reason) for a hostile input.
type Reader func(ctx context.Context, path string) error

// ReadTimeout is the context each read gets in the child: a reader that
// waits on a pipe must give up when it ends.
const ReadTimeout = 2 * time.Second

// Main must come first in TestMain. In a child started by Attack it runs
// the named reader and exits; in a swapper or feeder child it does that
// job forever.
func Main(readers map[string]Reader) {
	if spec := os.Getenv(envSwap); spec != "" {
		a, b, _ := strings.Cut(spec, "\n")
		swap(a, b)
	}
	if p := os.Getenv(envFeed); p != "" {
		feed(p)
	}
	name := os.Getenv(envReader)
	if name == "" {
		return
	}
	r, ok := readers[name]
	if !ok {
		fmt.Println(`{"error":"unknown reader"}`)
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Getenv(envRepeats))
	res := Result{}
	seen := map[string]bool{}
	for range max(n, 1) {
		ctx, cancel := context.WithTimeout(context.Background(), ReadTimeout)
		err := r(ctx, os.Getenv(envPath))
		cancel()
		if err == nil {
			res.OK++
			continue
		}
		res.Failed++
		if msg := err.Error(); !seen[msg] && len(res.Errors) < 8 {
			seen[msg] = true
			res.Errors = append(res.Errors, msg)
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
}

// swap exchanges the names a and b forever (a process that owns both).
func swap(a, b string) {
	fmt.Println("ready")
	for {
		_ = unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	}
}

// feed opens the FIFO p for writing and writes a byte every 50 ms,
// forever: a reader that waits for the end never gets one.
func feed(p string) {
	fmt.Println("ready")
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		os.Exit(1)
	}
	for {
		if _, err := f.Write([]byte("n")); err != nil {
			os.Exit(0)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Result is what the child says about its reads.
type Result struct {
	OK     int      `json:"ok"`
	Failed int      `json:"failed"`
	Errors []string `json:"errors"`
}

// Input is one hostile thing planted where a reader looks.
type Input struct {
	Name string
	// Root: planting it needs root (mknod).
	Root bool
	// Race: a swap loop; the reader runs many times.
	Race bool
	// Plant puts it at path; valid is what a good file there holds.
	Plant func(t *testing.T, path string, valid []byte)
	// Why is what the reader's message must say (any of them), for a
	// static input; a race may also read the valid file.
	Why []string
}

// Inputs is the family. Readers that must accept pipes (a hostfile given
// as <(…)) see FIFOs as data and must still end by their deadline.
func Inputs() []Input {
	return []Input{
		{Name: "fifo", Plant: func(t *testing.T, p string, _ []byte) { mkfifo(t, p) }, Why: []string{"FIFO", "no hosts", "empty"}},
		{Name: "fifo fed forever", Plant: func(t *testing.T, p string, _ []byte) {
			mkfifo(t, p)
			child(t, envFeed+"="+p)
		}, Why: []string{"FIFO", "deadline", "canceled"}},
		{Name: "symlink to /dev/zero", Plant: func(t *testing.T, p string, _ []byte) { symlink(t, "/dev/zero", p) },
			Why: []string{"symbolic link", "character device"}},
		{Name: "symlink to a FIFO", Plant: func(t *testing.T, p string, _ []byte) {
			f := filepath.Join(t.TempDir(), "fifo")
			mkfifo(t, f)
			symlink(t, f, p)
		}, Why: []string{"symbolic link", "FIFO", "no hosts", "empty"}},
		{Name: "character device", Root: true, Plant: func(t *testing.T, p string, _ []byte) {
			if err := unix.Mknod(p, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
				t.Skipf("mknod: %v", err)
			}
		}, Why: []string{"character device", "not a regular file"}},
		{Name: "sparse 8 GiB file", Plant: func(t *testing.T, p string, _ []byte) {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, 8<<30); err != nil {
				t.Skipf("truncate: %v", err)
			}
		}, Why: []string{"more than", "larger than", "too large"}},
		{Name: "directory", Plant: func(t *testing.T, p string, _ []byte) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, Why: []string{"directory", "not a regular file"}},
		{Name: "swapped for a FIFO", Race: true, Plant: func(t *testing.T, p string, valid []byte) {
			other := p + ".swap"
			mkfifo(t, other)
			plantSwap(t, p, other, valid)
		}, Why: []string{"FIFO", "not a regular file"}},
		{Name: "swapped for a symlink to /dev/zero", Race: true, Plant: func(t *testing.T, p string, valid []byte) {
			other := p + ".swap"
			symlink(t, "/dev/zero", other)
			plantSwap(t, p, other, valid)
		}, Why: []string{"symbolic link", "character device", "not a regular file"}},
	}
}

func plantSwap(t *testing.T, p, other string, valid []byte) {
	t.Helper()
	if err := os.WriteFile(p, valid, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, p, unix.AT_FDCWD, other, unix.RENAME_EXCHANGE); err != nil {
		t.Skipf("renameat2(RENAME_EXCHANGE): %v", err)
	}
	_ = unix.Renameat2(unix.AT_FDCWD, p, unix.AT_FDCWD, other, unix.RENAME_EXCHANGE)
	child(t, envSwap+"="+p+"\n"+other)
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := unix.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// child starts the test binary as a swapper or feeder for the test.
func child(t *testing.T, env string) {
	t.Helper()
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), env)
	grouptest.StartReady(t, c)
}

// Limits of a reader child.
const (
	Deadline = 20 * time.Second
	MaxRSS   = 512 << 20
)

// Attack runs the reader in a child against path repeats times and
// returns what it said. The test fails if the child outlives Deadline or
// its resident memory passes MaxRSS (it is killed then).
func Attack(t *testing.T, reader, path string, repeats int) Result {
	t.Helper()
	SkipUnderRace(t)
	return attack(t, reader, path, repeats, false)
}

// attack is Attack; widen runs the child under strace with every openat
// of path delayed 3 ms on entry, so that a name swapped between a check and the
// open is opened swapped (the race window of a check-then-open reader,
// microseconds wide, becomes milliseconds).
func attack(t *testing.T, reader, path string, repeats int, widen bool) Result {
	t.Helper()
	argv := []string{os.Args[0], "-test.run=^$"}
	if widen {
		if st, err := exec.LookPath("strace"); err == nil {
			argv = append([]string{st, "-f", "-qq", "-o", "/dev/null", "-P", path, "-e", "trace=openat", "-e", "inject=openat:delay_enter=3000"}, argv...)
		}
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), envReader+"="+reader, envPath+"="+path, envRepeats+"="+strconv.Itoa(repeats))
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		b := bufio.NewReader(out)
		line, _ := b.ReadString('\n')
		done <- line
	}()
	deadline := time.After(Deadline)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	kill := func(why string) {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		_ = c.Wait()
		t.Fatalf("reader %s on %s: %s", reader, path, why)
	}
	for {
		select {
		case line := <-done:
			_ = c.Wait()
			var r Result
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("reader %s said %q: %v", reader, line, err)
			}
			return r
		case <-deadline:
			kill(fmt.Sprintf("still reading after %s (hung)", Deadline))
		case <-tick.C:
			if rss := rssOf(c.Process.Pid); rss > MaxRSS {
				kill(fmt.Sprintf("resident memory %d MiB, over %d MiB (an unbounded read)", rss>>20, MaxRSS>>20))
			}
		}
	}
}

func rssOf(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// Suite plants every input in a fresh directory (the file named name
// there) and attacks reader, checking that it ended in time, within
// memory, and said why for every static input; valid is a good file's
// content for the swap races, whose reads must each either read it or
// refuse with a reason. dir returns the directory to use (a reader may
// need a layout around the file). mustSay is false for a reader that may
// pass over a bad file in silence (startup files searched for a setting):
// it must still end in time and within memory.
func Suite(t *testing.T, reader string, dir func(t *testing.T) string, name string, valid []byte, mustSay bool) {
	t.Helper()
	SkipUnderRace(t)
	for _, in := range Inputs() {
		t.Run(in.Name, func(t *testing.T) {
			if in.Root && os.Geteuid() != 0 {
				t.Skip("needs root")
			}
			d := dir(t)
			p := filepath.Join(d, name)
			in.Plant(t, p, valid)
			n := 1
			if in.Race {
				n = 200
			}
			r := attack(t, reader, p, n, in.Race)
			if in.Race {
				for _, e := range r.Errors {
					if mustSay && !mentions(e, in.Why) {
						t.Errorf("%s: a read during the swap failed without saying why: %q", in.Name, e)
					}
				}
				t.Logf("%s: %d reads of the valid file, %d refused (%v)", in.Name, r.OK, r.Failed, r.Errors)
				return
			}
			if !mustSay {
				return
			}
			if r.Failed != 1 || !mentions(strings.Join(r.Errors, "; "), in.Why) {
				t.Errorf("%s: %+v; want an error saying one of %q", in.Name, r, in.Why)
			}
		})
	}
}

func mentions(s string, any []string) bool {
	for _, w := range any {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// SkipUnderRace skips an attack suite in a -race build (see Race).
func SkipUnderRace(t testing.TB) {
	t.Helper()
	if Race {
		t.Skip("an attack suite: it runs in the plain test pass (it tests syscalls and processes, not goroutines)")
	}
}
