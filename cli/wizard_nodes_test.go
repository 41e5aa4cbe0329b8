package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Which environments make Findings offer "Check all nodes", and the node
// list it pre-fills: the layouts users launch multi-node jobs from.
func TestMultiNode(t *testing.T) {
	hostfile := filepath.Join(t.TempDir(), "hostfile")
	if err := os.WriteFile(hostfile, []byte("# nodes\ngpu01 slots=8\ngpu02 slots=8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		env      []string
		why      string // substring; "" means not offered
		prefill  string
		hostname string
	}{
		{"nothing", nil, "", "", "node7"},
		{"slurm allocation", []string{"SLURM_JOB_ID=42", "SLURM_JOB_NODELIST=gpu[01-04]"}, "Slurm node list gpu[01-04]", "gpu[01-04]", "gpu01"},
		{"older slurm name", []string{"SLURM_NODELIST=a,b"}, "Slurm node list a,b", "a,b", "a"},
		{"pbs hostfile", []string{"PBS_NODEFILE=" + hostfile}, "hostfile", "gpu01,gpu02", "gpu01"},
		{"unreadable hostfile", []string{"PBS_NODEFILE=/nonexistent/x"}, "hostfile", "", "gpu01"},
		{"master elsewhere by IP", []string{"MASTER_ADDR=10.255.254.7"}, "MASTER_ADDR=10.255.254.7 is another machine", "", "node7"},
		{"master elsewhere by name", []string{"MASTER_ADDR=gpu-head"}, "another machine", "", "node7"},
		{"master loopback", []string{"MASTER_ADDR=127.0.0.1"}, "", "", "node7"},
		{"master localhost", []string{"MASTER_ADDR=localhost"}, "", "", "node7"},
		{"master is this host", []string{"MASTER_ADDR=node7.cluster.local"}, "", "", "node7"},
		{"master hostile", []string{"MASTER_ADDR=\x1b[2Jevil"}, "another machine", "", "node7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, list := multiNode(tc.env, tc.hostname)
			if (why == "") != (tc.why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("why = %q, want %q", why, tc.why)
			}
			if strings.ContainsRune(why, 0x1b) {
				t.Errorf("escape in %q", why)
			}
			if list != tc.prefill {
				t.Errorf("list = %q, want %q", list, tc.prefill)
			}
		})
	}
}
