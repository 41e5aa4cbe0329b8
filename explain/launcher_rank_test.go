package explain

import (
	"fmt"
	"testing"
)

// Launchers' own lines name the rank that died; the explainer reads it only
// where the line means it (DeepSpeed's launcher prints the command of the
// last subprocess it spawned, which is the failed one's only when it ran
// one). Formats from deepspeed/launcher/launch.py (sigkill_handler),
// lightning/fabric/strategies/launchers/subprocess_script.py and Ray's
// worker prefixes; values ours.
func TestLauncherRanks(t *testing.T) {
	e := testExplainer(t)
	const dsKill = "[2024-05-02 08:11:40,101] [INFO] [launch.py:319:sigkill_handler] Killing subprocess %s\n"
	const dsExit = "[2024-05-02 08:11:41,220] [ERROR] [launch.py:325:sigkill_handler] ['/opt/env/bin/python', '-u', 'sft.py', '--local_rank=%s', '--deepspeed', 'z3.json'] exits with return code = -9\n"
	tests := []struct {
		name, log, root string
		rank            int // -1: the root names no rank
	}{
		{"deepspeed one subprocess", fmt.Sprintf(dsKill, "5120") + fmt.Sprintf(dsExit, "0"), idHostOOMKill, 0},
		{"deepspeed one subprocess, local rank 3 on one node", fmt.Sprintf(dsKill, "5120") + fmt.Sprintf(dsExit, "3"), idHostOOMKill, 3},
		// Two subprocesses: the command list is the last one spawned, not
		// necessarily the one that died.
		{"deepspeed two subprocesses", fmt.Sprintf(dsKill, "5120") + fmt.Sprintf(dsKill, "5121") + fmt.Sprintf(dsExit, "1"), idHostOOMKill, -1},
		{"lightning child observer", "Epoch 0:  12%|█▏        | 96/800\n[rank: 3] Child process with PID 7781 terminated with code -9. Forcefully terminating all other processes to avoid zombies 🧟\nKilled\n", idHostOOMKill, 3},
		{"ray actor repr with its rank", "(TrainWorker(rank=2) pid=8812) Traceback (most recent call last):\n(TrainWorker(rank=2) pid=8812)   File \"/srv/t.py\", line 40, in step\n(TrainWorker(rank=2) pid=8812)     out = model(batch)\n(TrainWorker(rank=2) pid=8812) ZeroDivisionError: division by zero\n", idPythonException, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := analyze(t, e, tt.log)
			root := rootOf(r)
			if root == nil || root.ID != tt.root {
				t.Fatalf("root = %v, want %s (diagnoses %v)", idOf(root), tt.root, diagIDs(r))
			}
			if got := namedRank(root); got != tt.rank {
				t.Errorf("rank = %d, want %d", got, tt.rank)
			}
		})
	}
}
