package cli

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/cluster"
	"github.com/ncclwiz/ncclwiz/internal/slurmtest"
)

// TestClusterCheckSlurm runs the Slurm engine against a real single-host
// Slurm (Debian's slurm-wlm and munge): a new step on a node list, inside
// an allocation (salloc … --slurm), beside a running batch job
// (--slurm-job, srun --overlap), and the --bcast copy path.
func TestClusterCheckSlurm(t *testing.T) {
	s := slurmtest.Start(t)
	bin := ncclwizBinary(t)
	common := []string{"--only", clusterTestOnly, "--timeout", "60s", "--json"}
	check := func(t *testing.T, doc cluster.JSONDoc, raw string, code int, delivery string) {
		t.Helper()
		if code != 0 && code != 1 {
			t.Fatalf("exit %d\n%s", code, raw)
		}
		if doc.Engine != "slurm" || len(doc.Nodes) != 1 {
			t.Fatalf("engine %q nodes %d\n%s", doc.Engine, len(doc.Nodes), raw)
		}
		n := doc.Nodes[0]
		if n.Name != s.Node || n.Status != cluster.StatusOK || n.Delivery != delivery || n.Facts["shm_size"] == "" || n.ClockMS == nil {
			t.Errorf("node %+v, want %s ok by %s with facts and a clock\n%s", n, s.Node, delivery, raw)
		}
	}
	run := func(t *testing.T, name string, args ...string) (cluster.JSONDoc, string, int) {
		cmd := exec.Command(name, args...)
		cmd.Env = s.Env()
		return runClusterCmd(t, cmd, args)
	}

	t.Run("nodelist", func(t *testing.T) {
		doc, raw, code := run(t, bin, append([]string{"cluster", "check", "--nodelist", s.Node}, common...)...)
		check(t, doc, raw, code, "shared")
	})
	t.Run("inside an allocation", func(t *testing.T) {
		doc, raw, code := run(t, "salloc", append([]string{"-N1", "--immediate=60", bin, "cluster", "check", "--slurm"}, common...)...)
		check(t, doc, raw, code, "shared")
	})
	t.Run("beside a running job", func(t *testing.T) {
		cmd := exec.Command("sbatch", "--parsable", "--output=/dev/null", "--wrap", "sleep 300")
		cmd.Env = s.Env()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sbatch: %v", err)
		}
		job := strings.TrimSpace(strings.Split(string(out), ";")[0])
		t.Cleanup(func() {
			c := exec.Command("scancel", job)
			c.Env = s.Env()
			_ = c.Run()
		})
		for range 100 {
			c := exec.Command("squeue", "-h", "-j", job, "-o", "%T")
			c.Env = s.Env()
			if st, _ := c.Output(); strings.TrimSpace(string(st)) == "RUNNING" {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		doc, raw, code := run(t, bin, append([]string{"cluster", "check", "--slurm-job", job}, common...)...)
		check(t, doc, raw, code, "shared")
	})
	t.Run("broadcast copy", func(t *testing.T) {
		before, _ := filepath.Glob("/tmp/ncclwiz-bcast-*")
		doc, raw, code := run(t, bin, append([]string{"cluster", "check", "--nodelist", s.Node, "--copy", "always"}, common...)...)
		check(t, doc, raw, code, "copied")
		after, _ := filepath.Glob("/tmp/ncclwiz-bcast-*")
		if len(after) > len(before) {
			t.Errorf("broadcast copies left: %v", after)
		}
		if !strings.Contains(strings.Join(doc.Notes, " "), "removed afterwards") {
			t.Errorf("notes %q", doc.Notes)
		}
	})
}
