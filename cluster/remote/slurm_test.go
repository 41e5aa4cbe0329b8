package remote

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/cluster"
)

// A stand-in for srun (this test binary, see TestMain): it runs the step's
// program once per node of NCCLWIZ_FAKE_SRUN_NODES on this machine with
// SLURMD_NODENAME set, labels output lines with the task number as
// `srun --label` does, honours --bcast=DEST by copying the program there,
// and reports a failing task the way srun does. The engine's side of the
// Slurm path (the steps, the demultiplexing, shared path vs broadcast, the
// removal of broadcast copies) runs for real; the scheduler does not.
const (
	envFakeSrunNodes = "NCCLWIZ_FAKE_SRUN_NODES"
	envFakeSrunFail  = "NCCLWIZ_FAKE_SRUN_FAIL" // node whose check exits 2
	envFakeSrunLog   = "NCCLWIZ_FAKE_SRUN_LOG"
)

func fakeSrun(args []string) int {
	bcast := ""
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "--"); i++ {
		if v, ok := strings.CutPrefix(args[i], "--bcast="); ok {
			bcast = v
		}
	}
	if f, err := os.OpenFile(os.Getenv(envFakeSrunLog), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
		fmt.Fprintln(f, strings.ReplaceAll(strings.Join(args, " "), "\n", `\n`))
		f.Close()
	}
	prog := args[i:]
	if bcast != "" {
		b, err := os.ReadFile(prog[0])
		if err != nil || os.WriteFile(bcast, b, 0o700) != nil {
			fmt.Fprintln(os.Stderr, "srun: error: bcast failed")
			return 1
		}
		prog[0] = bcast
	}
	code := 0
	for task, node := range strings.Split(os.Getenv(envFakeSrunNodes), ",") {
		cmd := exec.Command(prog[0], prog[1:]...)
		cmd.Env = append(os.Environ(), "SLURMD_NODENAME="+node)
		if node == os.Getenv(envFakeSrunFail) && strings.Contains(strings.Join(prog, " "), "check") {
			cmd = exec.Command("sh", "-c", "echo 'ncclwiz: boom' >&2; exit 2")
		}
		out, err := cmd.Output()
		for _, l := range strings.FieldsFunc(string(out), func(r rune) bool { return r == '\n' }) {
			fmt.Printf("%d: %s\n", task, l)
		}
		if ee, ok := err.(*exec.ExitError); ok {
			fmt.Fprintf(os.Stderr, "srun: error: %s: task %d: Exited with exit code %d\n", node, task, ee.ExitCode())
			code = 1
		}
	}
	return code
}

func TestSlurmEngine(t *testing.T) {
	self, _ := os.Executable()
	dir := t.TempDir()
	bin := filepath.Join(dir, "ncclwiz")
	if err := os.WriteFile(bin, []byte(fakeNcclwiz), 0o700); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"gpu01", "gpu02", "gpu03"}
	tests := []struct {
		name, remote, fail string
		wantDelivery       string
		wantFailed         string
	}{
		{name: "shared path", remote: bin, wantDelivery: "shared"},
		{name: "broadcast copy", remote: "/nonexistent/ncclwiz", wantDelivery: "copied"},
		{name: "one task fails", remote: bin, fail: "gpu02", wantDelivery: "shared", wantFailed: "gpu02"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "srun.log")
			t.Setenv(envFakeSrunNodes, strings.Join(nodes, ","))
			t.Setenv(envFakeSrunFail, tt.fail)
			t.Setenv(envFakeSrunLog, log)
			eng, err := NewSlurm(Options{LocalBinary: bin, RemotePath: tt.remote, NodeTimeout: time.Minute, CheckArgs: []string{"--only", "shm.mount"}},
				SlurmSpec{JobID: "42", NodeList: "gpu[01-03]", Nodes: nodes}, self)
			if err != nil {
				t.Fatal(err)
			}
			out, err := eng.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range out.Nodes {
				want := cluster.StatusOK
				if n.Name == tt.wantFailed {
					want = cluster.StatusFailed
				}
				if n.Status != want || n.Delivery != tt.wantDelivery {
					t.Errorf("%s: %s/%s %q delivery %q", n.Name, n.Status, n.Reason, n.Error, n.Delivery)
				}
				if n.Name == tt.wantFailed && !strings.Contains(n.Error, "exit code 2") {
					t.Errorf("%s: error %q does not carry srun's words", n.Name, n.Error)
				}
			}
			steps, _ := os.ReadFile(log)
			if tt.wantDelivery == "copied" {
				var dest string
				for _, l := range strings.Split(string(steps), "\n") {
					if i := strings.Index(l, "--bcast="); i >= 0 {
						dest = strings.Fields(l[i+len("--bcast="):])[0]
					}
				}
				if dest == "" || !strings.HasPrefix(dest, "/tmp/ncclwiz-bcast-") {
					t.Fatalf("no broadcast step: %s", steps)
				}
				if _, err := os.Stat(dest); !os.IsNotExist(err) {
					t.Errorf("broadcast copy %s not removed (%v)", dest, err)
				}
				if !strings.Contains(strings.Join(out.Notes, " "), "removed afterwards") {
					t.Errorf("notes %q", out.Notes)
				}
			}
			for _, l := range strings.Split(strings.TrimSpace(string(steps)), "\n") {
				if !strings.Contains(l, "--ntasks-per-node=1 --label --kill-on-bad-exit=0 --overlap") || !strings.Contains(l, "--jobid=42") {
					t.Errorf("srun step %q", l)
				}
			}
		})
	}
}
