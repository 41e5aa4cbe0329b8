package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/internal/tmuxtest"
)

// Issue 25 item 8 with real Pythons: a python3 first on PATH that cannot
// import torch (the pyenv shim) and Debian's /usr/bin/python3 with
// its CPU-only torch 1.13. nccl.stack and `ncclwiz test` pick the job's
// Python by one rule and name it: without a job, the PATH one (both say
// so); with a rank of a job running from /usr/bin/python3, that one (both
// say so), and its CPU-only torch is an error for an NCCL job. In a
// private PID namespace, so other jobs on the machine are not "the job".
func TestJobPythonOneRule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, runs torch")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private PID namespace (CI runs as root)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not installed")
	}
	if exec.Command("/usr/bin/python3", "-c", "import torch").Run() != nil {
		t.Skip("Debian's python3-torch is not installed (CI installs it)")
	}
	bin := tmuxtest.Build(t, "..")
	dir := t.TempDir()
	fake := filepath.Join(dir, "bin")
	if err := os.MkdirAll(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	// A python3 that has no torch: -S leaves out site-packages.
	if err := os.WriteFile(filepath.Join(fake, "python3"), []byte("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `
set -u
run() { "$NCCLWIZ" check --only nccl.stack --json > "$OUT/$1.json"; "$NCCLWIZ" test > "$OUT/$1.txt" 2>&1; true; }
run nojob
RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 /usr/bin/python3 -c 'import time; time.sleep(120)' &
rank=$!
echo $rank > "$OUT/rank.pid"
sleep 0.3
run job
kill $rank
`
	cmd := exec.Command("unshare", "-fp", "--mount-proc", "sh", "-c", script)
	cmd.Env = []string{"PATH=" + fake + ":" + os.Getenv("PATH"), "NCCLWIZ=" + bin, "OUT=" + dir, "HOME=" + dir, "NO_COLOR=1", "LANG=C.UTF-8"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	stack := func(name string) (title string, ev map[string]any) {
		var rep struct {
			Findings []struct {
				Check    string         `json:"check"`
				Severity string         `json:"severity"`
				Title    string         `json:"title"`
				Evidence map[string]any `json:"evidence"`
			} `json:"findings"`
		}
		if err := json.Unmarshal([]byte(read(name)), &rep); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, f := range rep.Findings {
			if f.Check == "nccl.stack" {
				return f.Severity + ": " + f.Title, f.Evidence
			}
		}
		t.Fatalf("%s: no nccl.stack finding:\n%s", name, read(name))
		return "", nil
	}
	pathPy := filepath.Join(fake, "python3")
	title, ev := stack("nojob.json")
	if ev["python"] != pathPy || !strings.Contains(title, pathPy+" (PATH)") {
		t.Errorf("no job: nccl.stack read %v: %s", ev["python"], title)
	}
	if txt := read("nojob.txt"); !strings.Contains(txt, pathPy+" (") || !strings.Contains(txt, "PATH") || !strings.Contains(txt, "cannot import torch") {
		t.Errorf("no job: ncclwiz test does not name the same Python:\n%s", txt)
	}
	rank := strings.TrimSpace(read("rank.pid"))
	from := "the job's rank pid " + rank
	title, ev = stack("job.json")
	if !strings.HasPrefix(title, "error: torch 1.13") || !strings.Contains(title, "/usr/bin/python3 ("+from+")") || !strings.Contains(title, "CPU-only") {
		t.Errorf("job: nccl.stack: %s (%v)", title, ev["python"])
	}
	if txt := read("job.txt"); !strings.Contains(txt, "/usr/bin/python3 ("+from+")") || !strings.Contains(txt, "CPU-only") {
		t.Errorf("job: ncclwiz test does not name the job's Python:\n%s", txt)
	}
}

// noTorchPython writes a python3 that cannot import torch (no
// site-packages) and returns its path: tests about /dev/shm and ranks
// pass it with --python, so the CI machine's CPU-only torch (an error for
// an NCCL job, nccl.stack's finding) is not the finding they look at.
func noTorchPython(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
