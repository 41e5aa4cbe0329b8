package explain

import (
	"strings"
	"testing"
)

// TestNewUserFailures: the first failures of a new user (issue 24), each
// alone as a one- or two-line paste, in the forms PyTorch printed them
// across releases. Before the catalogue they read as a generic Python
// exception, or as an all-clear, and EACCES on a peer's segment read as a
// vanished segment (RemoveIPC advice).
func TestNewUserFailures(t *testing.T) {
	e := testExplainer(t)
	cases := []struct {
		name, log, root string
		says, never     []string
	}{
		{"cpu-only torch (old wording)", `RuntimeError: Distributed package doesn't have NCCL built in` + "\n",
			"nccl-not-built", []string{"gloo"}, nil},
		{"cpu-only torch (split literal in the traceback)", `    raise RuntimeError("Distributed package doesn't have NCCL " "built in")
RuntimeError: Distributed package doesn't have NCCL built in
`, "nccl-not-built", nil, nil},
		{"cpu-only torch (rank prefix)", `[rank0]: RuntimeError: Distributed package doesn't have NCCL built in` + "\n",
			"nccl-not-built", nil, nil},
		{"no GPUs", `RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!` + "\n",
			"no-gpu-visible", []string{"CUDA_VISIBLE_DEVICES"}, nil},
		{"no GPUs (torchrun prefix)", `[default0]:RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!` + "\n",
			"no-gpu-visible", nil, nil},
		{"shm attach EACCES", `node2:71203:71288 [1] misc/shmutils.cc:87 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-Qm41bz (size 9637888), error: Permission denied (13)` + "\n",
			"shm-permission-denied", nil, []string{"RemoveIPC"}},
		{"shm attach EACCES (older wording)", `node2:5120:5190 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied
node2:5120:5190 [0] include/shm.h:48 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-7Hq2Ab (size 9637888)
node2:5120:5190 [0] NCCL INFO transport/shm.cc:101 -> 2
`,
			"shm-permission-denied", nil, []string{"RemoveIPC"}},
		{"shm create EACCES", `node2:5120:5190 [0] misc/shmutils.cc:110 NCCL WARN Error: failed to create shared memory file /dev/shm/nccl-7Hq2Ab, error Permission denied (13)` + "\n",
			"shm-permission-denied", nil, []string{"RemoveIPC"}},
		{"shm open EACCES (2.23)", `node2:5120:5190 [0] misc/shmutils.cc:75 NCCL WARN Call to open failed: Permission denied` + "\n",
			"shm-permission-denied", nil, []string{"RemoveIPC"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := analyze(t, e, c.log)
			root := rootOf(r)
			if root == nil {
				t.Fatalf("all-clear; diagnoses %v", diagIDs(r))
			}
			if root.ID != c.root {
				t.Fatalf("root %s, want %s (diagnoses %v)", root.ID, c.root, diagIDs(r))
			}
			text := root.Title + "\n" + root.Explanation + "\n" + strings.Join(root.Advice, "\n") + "\n" + root.Guide
			for _, s := range c.says {
				if !strings.Contains(text, s) {
					t.Errorf("the diagnosis does not say %q:\n%s", s, text)
				}
			}
			for _, d := range r.Diagnoses {
				dt := d.ID + " " + d.Title + " " + d.Explanation + " " + strings.Join(d.Advice, " ") + " " + d.Guide
				for _, s := range c.never {
					if strings.Contains(dt, s) {
						t.Errorf("%s says %q:\n%s", d.ID, s, dt)
					}
				}
			}
		})
	}
}
