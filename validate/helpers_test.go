package validate

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// fakeMachine is a real host (real /proc, real processes) whose PATH leads
// to the fake launchers in testdata/fake and whose shared-memory directory
// is a private temporary directory.
type fakeMachine struct {
	h      *host.Host
	rec    string // where the fakes record their arguments and environment
	shm    string
	bin    string
	python string
}

// realPython is the interpreter the fakes run probe.py and collective.py
// with (through the fake torch package).
func realPython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the torchrun fakes run the real scripts with it")
	}
	return py
}

func newFakeMachine(t *testing.T, env ...string) *fakeMachine {
	t.Helper()
	bin, err := filepath.Abs("testdata/fake")
	if err != nil {
		t.Fatal(err)
	}
	return newFakeMachineBin(t, bin, env...)
}

func newFakeMachineBin(t *testing.T, bin string, env ...string) *fakeMachine {
	t.Helper()
	f := &fakeMachine{rec: t.TempDir(), shm: t.TempDir(), bin: bin, python: realPython(t)}
	base := []string{
		"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + t.TempDir(),
		"LANG=C.UTF-8",
		"FAKE_REAL_PYTHON=" + f.python,
		"FAKE_RECORD=" + f.rec,
		"FAKE_SHM_DIR=" + f.shm,
	}
	f.h = &host.Host{Kind: "local", Name: "test", Root: "/", ShmDir: f.shm, Env: append(base, env...), UID: os.Getuid(), EUID: os.Geteuid()}
	// The fake python3 is named as --python would: by the job's-Python rule
	// (gpu.JobPython) a rank of another job running on this real machine
	// (CI runs real torch jobs side by side) would come before PATH.
	if py := filepath.Join(bin, "python3"); fileExists(py) {
		f.h.Python = py
	}
	return f
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// records returns the contents of the fake's record files whose names
// match pattern (e.g. "torchrun.*.env"), oldest first.
func (f *fakeMachine) records(t *testing.T, pattern string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(f.rec, pattern))
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(paths, func(i, j int) bool {
		a, _ := os.Stat(paths[i])
		b, _ := os.Stat(paths[j])
		return a.ModTime().Before(b.ModTime())
	})
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// events collects Options.OnEvent calls (from the reader goroutine).
type events struct {
	mu  sync.Mutex
	all []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) kinds() map[EventKind]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[EventKind]int{}
	for _, ev := range e.all {
		m[ev.Kind]++
	}
	return m
}

// liveProcs lists the machine's processes that have not exited, other
// than this test's own.
func liveProcs(h *host.Host) ([]proctab.Process, error) {
	tab, err := proctab.Read(context.Background(), h, proctab.Options{StatOnly: true})
	if err != nil {
		return nil, err
	}
	var out []proctab.Process
	for _, p := range tab.All() {
		if !p.Zombie() && p.PID != os.Getpid() {
			out = append(out, p)
		}
	}
	return out, nil
}

// assertNoSurvivors proves with /proc that no process of the run is alive:
// none carries the run's marker in its environment.
func assertNoSurvivors(t *testing.T, runID string) {
	t.Helper()
	if runID == "" {
		t.Fatal("no run ID")
	}
	h := host.Local(host.LocalOptions{NoNVML: true})
	deadline := time.Now().Add(3 * time.Second)
	for {
		var alive []string
		procs, err := liveProcs(h)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if env, _ := proctab.Environ(context.Background(), h, p.PID, MarkerVar); env[MarkerVar] == runID {
				alive = append(alive, strconv.Itoa(p.PID)+" "+p.Comm)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the run survived: %s", strings.Join(alive, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func rung(t *testing.T, res *Result, id string) RungResult {
	t.Helper()
	for _, r := range res.Rungs {
		if r.Rung.ID == id {
			return r
		}
	}
	t.Fatalf("no rung %q in %+v", id, res.Rungs)
	return RungResult{}
}

func hasReason(r RungResult, sub string) bool {
	for _, s := range r.Reasons {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func hasNote(notes []string, sub string) bool {
	for _, s := range notes {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Snapshots of the machines the expected-range logic must know.

func nvSnapshot(n int, name, cc string, links, version int) *Snapshot {
	s := &Snapshot{State: "ok", Driver: "550.54.15", CUDA: "12.4"}
	for i := 0; i < n; i++ {
		s.Devices = append(s.Devices, Device{Index: i, Name: name, UUID: "GPU-" + strconv.Itoa(1000+i) + "-aaaa",
			CC: cc, NVLinkActive: links, NVLinkVersion: version, PCIeGen: 5, PCIeWidth: 16})
	}
	s.Topology = topo(n, "NV"+strconv.Itoa(links))
	return s
}

func pcieSnapshot(n int, name string, gen, width int, link string) *Snapshot {
	s := &Snapshot{State: "ok", Driver: "550.54.15", CUDA: "12.4"}
	for i := 0; i < n; i++ {
		s.Devices = append(s.Devices, Device{Index: i, Name: name, UUID: "GPU-" + strconv.Itoa(2000+i) + "-bbbb",
			CC: "8.9", PCIeGen: gen, PCIeWidth: width})
	}
	s.Topology = topo(n, link)
	return s
}

func topo(n int, link string) [][]string {
	m := make([][]string, n)
	for i := range m {
		m[i] = make([]string, n)
		for j := range m[i] {
			m[i][j] = link
			if i == j {
				m[i][j] = "X"
			}
		}
	}
	return m
}

func h100(n int) *Snapshot { return nvSnapshot(n, "NVIDIA H100 80GB HBM3", "9.0", 18, 4) }
func a100(n int) *Snapshot { return nvSnapshot(n, "NVIDIA A100-SXM4-80GB", "8.0", 12, 3) }
