package explain

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// causesCorpus is issue 15, class 8: logs whose cause is not NCCL (the
// NCCL lines are its knock-on, so the root must say so), rendezvous and
// store wordings of torch 1.x-2.x, and two logs where NCCL's own cause
// must still win over a Python traceback. Labels name the thread each is
// modelled on.
var causesCorpus = map[string]corpusCase{
	"exc-keyerror-torchrun-watchdog.log": {conf: High, rank: 3, first: "python-exception",
		has: []string{"watchdog-timeout", "nccl-async-teardown", "torchrun-child-failed"},
		check: all(notNCCL("exception", "KeyError", "frame", "collate.py:73"), titleHas("rank 3", "KeyError"), followsRoot,
			func(t *testing.T, r *Report) {
				w := findDiag(r, "watchdog-timeout").Watchdog
				if w == nil || !slices.Equal(w.Stragglers, []int{3}) || !slices.ContainsFunc(w.Reasons, func(s string) bool { return strings.Contains(s, "failed first (KeyError)") }) {
					t.Errorf("watchdog = %+v, want rank 3 as the straggler, failed with KeyError", w)
				}
			})},
	"dataloader-killed-multinode": {conf: High, rank: -2, first: "python-exception",
		has:   []string{"nccl-unhandled-system-error"},
		not:   []string{idReturnTrail},
		check: all(notNCCL("signal", "Killed"), titleHas("DataLoader worker died", "killed by signal: Killed"), followsRoot)},
	"dataloader-exited-megatron.log": {conf: High, rank: 0, first: "python-exception", has: []string{"watchdog-timeout"},
		check: all(notNCCL("worker", "killed by signal: Killed"), followsRoot)},
	"device-assert-watchdog-swift.log": {conf: High, rank: -2, first: "cuda-assert",
		has:   []string{"watchdog-timeout", "nccl-async-teardown"},
		not:   []string{"cuda-kernel-fault"},
		check: all(notNCCL("assertion", "totalElements <= srcSize"), followsRoot, adviceHas("CUDA_LAUNCH_BLOCKING=1"))},
	// No line of the model's own: NCCL met CUDA error 710, which is the
	// model's assert (cudaErrorAssert), not NCCL's.
	"device-assert-nccl-710.log": {conf: High, rank: -2, has: []string{"nccl-unhandled-cuda-error"},
		check: all(notNCCL(), followsRoot, func(t *testing.T, r *Report) {
			if r.FirstError != nil {
				t.Errorf("first error = %+v, want none (the assert is known only through NCCL's CUDA error)", r.FirstError)
			}
		})},
	"host-oom-dmesg": {conf: High, rank: -2, first: "killed", has: []string{"peer-closed", "nccl-remote-error"},
		check: all(notNCCL("pid", "61402", "process", "python3"), titleHas("out-of-memory killer"), followsRoot,
			func(t *testing.T, r *Report) {
				if ev := rootOf(r).Evidence[0]; !strings.HasSuffix(ev.File, "dmesg.txt") {
					t.Errorf("root evidence %+v, want the kernel's line", ev)
				}
			})},
	"slurm-oom-kill-srun.log": {conf: High, rank: -2, first: "killed", has: []string{"watchdog-timeout"},
		check: all(notNCCL(), titleHas("rank 1"), followsRoot)},
	"import-flash-attn-all-ranks.log": {conf: High, rank: 1, first: "python-exception", not: []string{"torchrun-child-failed"},
		check: all(notNCCL("symbol", "_ZN3c104cuda9SetDeviceEi", "library", "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"),
			func(t *testing.T, r *Report) {
				if root := rootOf(r); !slices.Equal(root.Ranks, []int{0, 1}) || root.Count != 2 {
					t.Errorf("ranks %v count %d, want both ranks", root.Ranks, root.Count)
				}
			})},
	"import-apex-abi-deepspeed.log": {conf: High, rank: -2, first: "python-exception", has: []string{"watchdog-timeout"},
		check: all(notNCCL("exception", "ImportError", "frame", "fused_adam.py:3"), titleHas("worker-1", "amp_C"), followsRoot)},
	"import-transformers-failed.log": {conf: High, rank: -2, first: "python-exception",
		check: all(notNCCL("exception", "ImportError"), titleHas("flash_attn_2_cuda"))},
	"disk-full-checkpoint-barrier.log": {conf: High, rank: 0, first: "python-exception", has: []string{"watchdog-timeout"},
		check: all(notNCCL(), titleHas("disk filled up"), followsRoot, func(t *testing.T, r *Report) {
			if w := findDiag(r, "watchdog-timeout").Watchdog; w == nil || !slices.Equal(w.Stragglers, []int{0}) {
				t.Errorf("watchdog = %+v, want rank 0 (writing the checkpoint) as the straggler", w)
			}
		})},
	"disk-full-errno28-deepspeed.log": {conf: High, rank: -2, first: "python-exception", has: []string{"watchdog-timeout"},
		check: all(notNCCL("exception", "OSError"), followsRoot)},
	"shm-full-dataloader.log": {conf: High, rank: -2, first: "python-exception", has: []string{"watchdog-timeout"},
		check: all(notNCCL("device", "/dev/shm"), titleHas("/dev/shm"), adviceHas("--shm-size"))},
	"cuda-oom-fsdp-watchdog.log": {conf: High, rank: 2, first: "cuda-oom", has: []string{"watchdog-timeout"},
		not:   []string{"gpu-oom-init"},
		check: all(notNCCL("exception", "OutOfMemoryError"), followsRoot)},
	"segfault-extension.log": {conf: Medium, rank: -2, first: "segfault", check: notNCCL()},
	"ray-worker-exception.log": {conf: High, rank: -2, first: "python-exception", has: []string{"watchdog-timeout"},
		check: all(notNCCL("exception", "ValueError", "frame", "awq.py:88"), followsRoot)},
	"accelerate-exception-ansi.log": {conf: High, rank: 1, first: "python-exception", has: []string{"watchdog-timeout"},
		check: all(notNCCL("exception", "IndexError", "frame", "dataset.py:212"), followsRoot)},
	"pdsh-deepspeed-killed.log": {conf: Medium, rank: -2, first: "killed", has: []string{"peer-closed"},
		check: all(notNCCL(), titleHas("worker-1", "SIGKILL"), followsRoot)},
	// A worker's bus error (shm-sigbus matches it) is the DataLoader's,
	// not NCCL's shared memory.
	"dataloader-bus-error-shm.log": {conf: High, rank: -2, has: []string{"shm-sigbus", "watchdog-timeout"},
		check: all(notNCCL("signal", "Bus error"), titleHas("/dev/shm"), followsRoot)},
	"mp-spawn-sigkill.log": {conf: Medium, rank: 1, first: "killed", check: notNCCL()},
	// torch.distributed.launch (torch 1.x) reports a killed worker only
	// through its CalledProcessError.
	"legacy-launch-sigkill.log": {conf: Medium, rank: -2, first: "python-exception", check: all(notNCCL(), titleHas("SIGKILL"))},
	// torch 1.10 wordings on both sides.
	"torch110-cuda-oom-watchdog.log": {conf: High, rank: -2, first: "cuda-oom", has: []string{"watchdog-timeout", "nccl-async-teardown"},
		check: all(notNCCL("frame", "decoder.py:88"), followsRoot)},
	"wrapped-paste-assertion.log": {conf: High, rank: 9, first: "python-exception",
		check: all(notNCCL("exception", "AssertionError", "frame", "masking.py:61"), followsRoot, func(t *testing.T, r *Report) {
			if h := rootOf(r).Hosts; !slices.Equal(h, []string{"cn-d004"}) {
				t.Errorf("hosts = %v", h)
			}
		})},
	// The waiting rank's gloo error is a knock-on, never the cause.
	"gloo-knockon-assert": {conf: High, rank: 1, first: "python-exception",
		check: notNCCL("exception", "AssertionError", "frame", "lora_finetune_distributed.py:731")},
	"rdzv-rank-crashed-before-join": {conf: High, rank: 1, first: "python-exception", has: []string{"store-rendezvous-timeout"},
		check: all(notNCCL("exception", "ModuleNotFoundError"), titleHas("no module named deepspeed"), followsRoot)},

	// Rendezvous and store wordings, torch 1.8 to 2.8.
	"rdzv-c10d-connect-torch112.log": {conf: High, rank: -2, check: storeFields("host", "192.168.50.4", "port", "2222", "client_timeout", "60")},
	"rdzv-c10d-connect-torch20.log":  {conf: High, rank: -2, check: all(storeFields("host", "10.20.1.7", "port", "29400"), titleHas("could not reach"))},
	"rdzv-store-barrier-torch19.log": {conf: High, rank: -2,
		check: all(storeFields("barrier_rank", "0", "world_size", "2", "worker_count", "1"), adviceHas("Only 1 of 2 ranks"))},
	"rdzv-store-barrier-crosstalk.log": {conf: High, rank: -2,
		check: all(storeFields("world_size", "2", "worker_count", "4"), adviceHas("another job"), titleHas("4 processes joined a store for 2 ranks"))},
	"rdzv-diststore-wait-timeout.log": {conf: High, rank: -2, check: all(storeFields("wait_ms", "600000", "keys", "/default_pg//0//cuda//0"), titleHas("store key"))},
	"rdzv-timeout-elastic-json.log":   {conf: High, rank: -2, check: storeFields()},
	"rdzv-socket-timeout-torch18.log": {conf: High, rank: -2, check: storeFields()},
	"rdzv-tcpstore-client-torch28.log": {conf: High, rank: -2,
		check: all(storeFields("host", "5f1e0c2a9b7d", "port", "41331", "client_unit", "ms"), titleHas("could not reach"))},

	// NCCL's own cause wins over the traceback that re-raises it, and an
	// exception printed while a hung job tears down is not its cause.
	"shm-nospace-reraise-traceback.log": {conf: High, rank: -2, also: []string{"shm-create-failed"}, has: []string{"nccl-unhandled-system-error"},
		check: nccLRoot},
	// torchrun SIGKILLed rank 2 while tearing down after rank 1's abort.
	"torchrun-abort-failures-sigkill.log": {conf: High, rank: 1, also: []string{"watchdog-seq-status"}, has: []string{"nccl-async-teardown", "torchrun-child-failed"}, first: "signal",
		not: []string{idHostOOMKill}, check: nccLRoot},
	"watchdog-hang-teardown-exception.log": {conf: High, rank: 0, first: "python-exception", has: []string{"nccl-async-teardown"},
		check: nccLRoot},
}

func TestCorpusCauses(t *testing.T) { runCorpusCases(t, causesCorpus) }

// The advice of every report of this corpus names only variables ncclwiz
// may suggest, and a cause outside NCCL says so in the summary (explain/
// render checks the plain output of the whole corpus). (The
// JSON Schema is checked for the whole corpus by TestJSONMatchesSchema.)
func TestCorpusCausesAdvice(t *testing.T) {
	e := testExplainer(t)
	for name := range causesCorpus {
		r := analyzeCorpus(t, e, filepath.Join("testdata", "corpus", name))
		for _, d := range r.Diagnoses {
			checkVarsSuggestible(t, append(append([]string{}, d.Advice...), d.Explanation))
		}
		if root := rootOf(r); root != nil && root.NotNCCL && !strings.Contains(r.Summary, "not NCCL") {
			t.Errorf("%s: the summary does not say the cause is not NCCL: %s", name, r.Summary)
		}
	}
}

func all(checks ...func(*testing.T, *Report)) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		for _, c := range checks {
			c(t, r)
		}
	}
}

// notNCCL checks that the root is marked outside NCCL, routes to the
// not-nccl-cause guide, and has the given fields (name, value pairs).
func notNCCL(kv ...string) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		root := rootOf(r)
		if !root.NotNCCL || root.Guide != guideNotNCCL || root.Role != RoleCause {
			t.Errorf("root %s: not_nccl=%v guide=%q role=%s", root.ID, root.NotNCCL, root.Guide, root.Role)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if got := root.Fields[kv[i]]; got != kv[i+1] {
				t.Errorf("field %s = %q, want %q (fields %v)", kv[i], got, kv[i+1], root.Fields)
			}
		}
		for _, d := range r.Diagnoses[1:] {
			if d.NotNCCL {
				t.Errorf("%s is marked not NCCL too", d.ID)
			}
		}
	}
}

// followsRoot checks that every other diagnosis is marked as the root's
// knock-on.
func followsRoot(t *testing.T, r *Report) {
	root := rootOf(r)
	for _, d := range r.Diagnoses {
		if d.ID != root.ID && d.ConsequenceOf != root.ID {
			t.Errorf("%s: consequence_of %q, want %s", d.ID, d.ConsequenceOf, root.ID)
		}
	}
}

func titleHas(parts ...string) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		title := rootOf(r).Title
		for _, p := range parts {
			if !strings.Contains(title, p) {
				t.Errorf("title %q lacks %q", title, p)
			}
		}
	}
}

func adviceHas(s string) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		if !slices.ContainsFunc(rootOf(r).Advice, func(a string) bool { return strings.Contains(a, s) }) {
			t.Errorf("advice %q lacks %q", rootOf(r).Advice, s)
		}
	}
}

// storeFields checks a store-rendezvous-timeout root and its fields.
func storeFields(kv ...string) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		root := rootOf(r)
		if root.NotNCCL || root.Guide != "rendezvous-timeout" {
			t.Errorf("root = %s not_nccl=%v guide=%s", root.ID, root.NotNCCL, root.Guide)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if got := root.Fields[kv[i]]; got != kv[i+1] {
				t.Errorf("field %s = %q, want %q (fields %v)", kv[i], got, kv[i+1], root.Fields)
			}
		}
	}
}

// nccLRoot checks that an NCCL root stays one.
func nccLRoot(t *testing.T, r *Report) {
	for _, d := range r.Diagnoses {
		if d.NotNCCL {
			t.Errorf("%s is named a cause outside NCCL", d.ID)
		}
	}
}
