package explain

import (
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// Each error line is a cause outside NCCL (its id) or a knock-on of
// another failure (""). Wordings from PyTorch, the DataLoader, torchrun,
// DeepSpeed's launcher, Slurm and the kernel.
func TestClassifyCause(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string
	}{
		{"[rank3]: KeyError: 'input_ids'", idPythonException},
		{"AssertionError", idPythonException},
		{"ERROR 07-08 11:03:52 worker_base.py:145] ValueError: bad shape", idPythonException},
		{"RuntimeError: CUDA error: device-side assert triggered", idDeviceAssert},
		{"/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.", idDeviceAssert},
		{"RuntimeError: DataLoader worker (pid 29001) is killed by signal: Killed.", idDataLoaderDied},
		{"RuntimeError: DataLoader worker (pid(s) 17734, 17735) exited unexpectedly", idDataLoaderDied},
		{"ImportError: /x/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi", idImportError},
		{"ModuleNotFoundError: No module named 'apex'", idImportError},
		{"OSError: [Errno 28] No space left on device: '/ckpt/a.pt'", idDiskFull},
		{"RuntimeError: [enforce fail at inline_container.cc:445] . PytorchStreamWriter failed writing file data/176: file write failed", idDiskFull},
		{"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB.", idCudaOOM},
		{"Out of memory: Killed process 61402 (python3) total-vm:412339120kB", idHostOOMKill},
		{"E0930 12:00:01.300000 777 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 0 (pid: 8800) of binary: /usr/bin/python3", idHostOOMKill},
		{"[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['python', 'main.py'] exits with return code = -9", idHostOOMKill},
		{"slurmstepd: error: Detected 1 oom_kill event in StepId=883201.0. Some of the step tasks have been OOM Killed.", idHostOOMKill},
		{"torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL", idHostOOMKill},
		{"subprocess.CalledProcessError: Command '['/usr/bin/python', '-u', 'train.py']' died with <Signals.SIGKILL: 9>.", idHostOOMKill},
		{"/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed                  python3 main.py", idHostOOMKill},
		{"Fatal Python error: Segmentation fault", idSegfault},
		{"ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.", idHostOOMKill},
		// Network errors of the job's own code (a model download) are causes.
		{"urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)", idPythonException},
		{"requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded (Caused by NewConnectionError('Failed to establish a new connection: [Errno 111] Connection refused'))", idPythonException},
		{"RuntimeError: Connection reset by peer", ""},
		// Knock-ons: distributed errors re-raised, launcher wrappers.
		{"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error", ""},
		{"RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:51771", ""},
		{"RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout", ""},
		{"subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 1.", ""},
		{"torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 1", ""},
		{"torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: 15", ""},
		{"KeyboardInterrupt", ""},
		{"RuntimeError: Caught KeyError in DataLoader worker process 3.", ""},
		{"RuntimeError: CUDA error: an illegal memory access was encountered", ""},
		{"RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=1275)", ""},
	} {
		m := linetext.Parse([]byte(tc.line))
		kind := classifyError(m.Msg)
		if kind == "" {
			t.Errorf("%q: not classified as an error line", tc.line)
			continue
		}
		e := &errorHit{line: ErrorLine{Kind: kind, Evidence: Evidence{Text: tc.line, Rank: m.Rank}}}
		got := ""
		if ch, ok := classifyCause(e); ok {
			got = ch.id
		}
		if got != tc.want {
			t.Errorf("%q: cause %q, want %q", tc.line, got, tc.want)
		}
	}
}

// Which comes first decides the root: a cause outside NCCL wins over
// timeouts and teardown, NCCL's own cause wins unless the timestamps show
// the other came first, and an exception raised after its rank failed is a
// knock-on.
func TestNonNCCLOrdering(t *testing.T) {
	wd := "[rank0]:[E0312 14:13:07.550271870 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=62, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, Timeout(ms)=600000) ran for 600047 milliseconds before timing out."
	ib := "[2025-03-12 14:03:00] gpu7:4411:4502 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.8<58802> with status=12 opcode=0 len=0 vendor err 129 (Recv)"
	for _, tc := range []struct {
		name  string
		texts []string
		root  string
	}{
		{"exception then timeout", []string{"[rank1]: KeyError: 'x'\n" + wd}, idPythonException},
		{"timeout then its own exception", []string{wd + "\n[rank0]: AttributeError: 'NoneType' object has no attribute 'close'"}, "watchdog-timeout"},
		{"a rank that raised and later timed out itself", []string{"[rank0]: FileNotFoundError: [Errno 2] No such file or directory: 'wandb.yaml'\n" + wd}, "watchdog-timeout"},
		{"another rank's exception later in the file", []string{wd + "\n[rank1]: KeyError: 'x'"}, idPythonException},
		{"other rank's file", []string{wd, "[rank1]: ValueError: bad batch"}, idPythonException},
		{"NCCL cause wins without timestamps", []string{ib + "\n[rank1]: KeyError: 'x'"}, "ib-completion-error"},
		{"timestamped kill before the NCCL cause", []string{"[2025-03-12 14:02:00,001] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 1 (pid: 9) of binary: python\n" + ib}, idHostOOMKill},
		{"a hung job killed after its timeout", []string{"[2025-03-12 14:02:00] " + wd[9:] + "\n[2025-03-12 14:30:00,001] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 1 (pid: 9) of binary: python"}, "watchdog-timeout"},
		{"timestamped kill after the NCCL cause", []string{ib + "\n[2025-03-12 14:04:00,001] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 1 (pid: 9) of binary: python"}, "ib-completion-error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := analyze(t, testExplainer(t), tc.texts...)
			root := rootOf(r)
			if root == nil || root.ID != tc.root {
				t.Fatalf("root = %v, want %s (diagnoses %v)", root, tc.root, diagIDs(r))
			}
			if root.NotNCCL != (tc.root == idPythonException || tc.root == idHostOOMKill) {
				t.Errorf("not_nccl = %v", root.NotNCCL)
			}
		})
	}
}

// The summary names a cause outside NCCL as such (explain/render checks
// the plain output).
func TestNotNCCLSummary(t *testing.T) {
	r := analyze(t, testExplainer(t), notNCCLSample)
	if !strings.HasPrefix(r.Summary, "Root cause, not NCCL: A Python exception on rank 1") || !strings.Contains(r.Summary, "knock-on") {
		t.Errorf("summary = %q", r.Summary)
	}
}

// notNCCLSample: rank 1 raised KeyError, rank 0's watchdog timed out.
const notNCCLSample = "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"/w/data.py\", line 58, in get\n[rank1]:     x = s[\"labels\"]\n[rank1]: KeyError: 'labels'\n" +
	"[rank0]:[E0312 14:13:07.55 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=62, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, Timeout(ms)=600000) ran for 600047 milliseconds before timing out."
