package explain

import (
	"strings"
	"testing"
)

// A paste that goes on past the job with the user's next command at a
// shell prompt: the prompt line is never the continuation of a wrapped
// message, and the job's output ends before it — unless the prompt
// launched the job (its output follows). Modelled on pastes whose
// reporters ran `cat`, `free` or `nvidia-smi` after the failure (the
// shapes of chaoyi-wu/RadFM#30 and many others); values are ours.
func TestShellPromptEndsTheJob(t *testing.T) {
	e := testExplainer(t)
	spawnKill := "torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with signal SIGKILL"
	initHang := strings.Join([]string{
		"gpu-a12:5511:5511 [0] NCCL INFO Bootstrap : Using eth0:10.8.1.12<0>",
		"gpu-a12:5511:5511 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)",
		"NCCL version 2.21.5+cuda12.4",
		"gpu-a12:5511:5530 [0] NCCL INFO NET/Socket : Using [0]eth0:10.8.1.12<0>",
		"gpu-a12:5511:5530 [0] NCCL INFO Using network Socket",
	}, "\n")
	for _, tc := range []struct {
		name, log, root string
	}{
		{"spawn SIGKILL, then a prompt", spawnKill + "\n$ cat /sys/fs/cgroup/memory.events\noom_kill 2\n", idHostOOMKill},
		{"spawn SIGKILL, then a user@host prompt", spawnKill + "\n(base) dan@node3:~/exp$ free -g\nMem: 251 249 2\n", idHostOOMKill},
		{"init hang, then a prompt and its output", initHang + "\n[dan@node3 exp]$ nvidia-smi -L\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n", "init-hang"},
		{"init hang under a launch prompt", "$ NCCL_DEBUG=INFO torchrun --nproc-per-node 2 train.py\n" + initHang + "\n", "init-hang"},
		{"the launch prompt, then the program's own progress", "$ python train.py\n" + initHang + "\nepoch 1 step 10 loss 2.31\nepoch 1 step 20 loss 2.07\n", ""},
		// The prompt's command shows the job's log, or launches it in a
		// way no list foresees: NCCL's own lines after the prompt are the
		// job's output, whatever the command (a false all-clear before).
		{"a command's output, then the job's log shown by cat", "(base) dan@node3:~/exp$ nvidia-smi -L\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n(base) dan@node3:~/exp$ cat logs/train-0.log\n" + initHang + "\n", "init-hang"},
		{"a command's output, then tail -f of the job's log", "$ squeue -u dan\n  JOBID PARTITION NAME USER ST TIME NODES\n  4411 gpu train dan R 12:01 2\n$ tail -f slurm-4411.out\n" + initHang + "\n", "init-hang"},
		{"cd && torchrun after another command", "$ nvidia-smi -L\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n$ cd ~/exp && torchrun --nproc-per-node 2 train.py\n" + initHang + "\n", "init-hang"},
		{"sudo -E torchrun after another command", "$ free -g\nMem: 251 249 2\n$ sudo -E torchrun --nproc-per-node 2 train.py\n" + initHang + "\n", "init-hang"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := analyze(t, e, tc.log)
			got := ""
			if root := rootOf(r); root != nil {
				got = root.ID
			}
			if got != tc.root {
				t.Errorf("root %q, want %q (diagnoses %v)", got, tc.root, diagIDs(r))
			}
		})
	}
}

// A signal field keeps its signal when the line it ends was joined with
// the next (held as possibly wrapped: long, "signal" in it, no full stop).
func TestSignalFieldSurvivesAJoin(t *testing.T) {
	for v, want := range map[string]int{"SIGKILL": 9, "SIGKILL 41": 9, "SIGKILLdone": 9, " 11": 11, "9 hello": 9,
		"Segmentation fault (core dumped)": 11, "Killed": 9, "SIGSEGV$ ls": 11, "nonsense": 0} {
		if got := signalOf(v); got != want {
			t.Errorf("signalOf(%q) = %d, want %d", v, got, want)
		}
	}
	e := testExplainer(t)
	r := analyze(t, e, "torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with signal SIGKILL\n41\n")
	if root := rootOf(r); root == nil || root.ID != idHostOOMKill {
		t.Errorf("diagnoses %v, want %s first", diagIDs(r), idHostOOMKill)
	}
}

// A launcher's tag is no host: PyTorch's error quoting the NCCL version
// ("…, NCCL version 2.27.7") under TorchX-style tags ("[trainer0|0]:")
// made "trainer0" a host that had NCCL_SOCKET_IFNAME "(not set)", and the
// root a hosts-disagree. Modelled on the tags of NVIDIA/nccl#1837; values
// are ours.
func TestErrorQuotingVersionIsNoHostReport(t *testing.T) {
	e := testExplainer(t)
	log := strings.Join([]string{
		"[trainer0]:gpu-q3:4410:4410 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib7",
		"[trainer1]:gpu-q3:4411:4411 [1] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib7",
		"[trainer0]:gpu-q3:4410:4410 [0] NCCL INFO cudaDriverVersion 12090",
		"[trainer0]:NCCL version 2.26.5+cuda12.9",
		"[trainer0|0]:[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.5",
		"[trainer0|0]:ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
	}, "\n") + "\n"
	r := analyze(t, e, log)
	for _, d := range r.Diagnoses {
		if d.ID == "hosts-disagree" {
			t.Errorf("hosts-disagree from a launcher tag: %v", diagIDs(r))
		}
	}
}
