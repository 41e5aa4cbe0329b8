package explain

import (
	"fmt"
	"github.com/ncclwiz/ncclwiz/explain/internal/phrase"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
)

// Causes outside NCCL. A job whose rank raised a Python exception, was
// killed by the host's OOM killer or hit a device-side assert leaves NCCL
// lines behind on the other ranks (watchdog timeouts, teardown, "remote
// process exited", torchrun's ChildFailedError): those are the knock-on,
// and the report names the cause that is not NCCL's as its root.

// Ids of the causes that are not NCCL. They are stable like signature ids.
const (
	idPythonException = "python-exception"
	idHostOOMKill     = "host-oom-kill"
	idDeviceAssert    = "cuda-device-assert"
	idDataLoaderDied  = "dataloader-worker-died"
	idImportError     = "import-error"
	idDiskFull        = "disk-full"
	idCudaOOM         = "cuda-oom"
	idSegfault        = "segfault"
	idKilledBySignal  = "killed-by-signal"
	// guideNotNCCL explains every one of them.
	guideNotNCCL = "not-nccl-cause"
)

// knockOnExceptions are raised because something else failed: PyTorch's
// distributed errors (an NCCL or store failure re-raised), launcher
// wrappers around a worker's own exception, and a launcher's signal.
var knockOnExceptions = map[string]bool{
	"DistBackendError": true, "DistError": true, "DistStoreError": true, "DistNetworkError": true,
	"ChildFailedError": true, "SignalException": true, "ProcessRaisedException": true,
	"CalledProcessError": true, "KeyboardInterrupt": true, "BrokenPipeError": true,
	"ConnectionResetError": true, "ConnectionRefusedError": true, "ConnectionAbortedError": true,
	"TimeoutError": true, "RendezvousError": true, "RendezvousTimeoutError": true,
	"RendezvousClosedError": true, "RendezvousConnectionError": true, "RendezvousStateError": true,
	"RendezvousGracefulExitError": true, "RayTaskError": true, "RayActorError": true,
}

// reKnockOnMsg finds an exception message that speaks of NCCL, the
// process group, the store or a peer connection: a re-raise of a
// distributed failure, not a cause of its own. CUDA errors other than a
// device-side assert are left to the CUDA signatures (a kernel fault NCCL
// reports is diagnosed there).
var reKnockOnMsg = regexp.MustCompile(`(?i)nccl|c10d|ProcessGroup|watchdog|gloo|TCPStore|store->|collective|monitoredBarrier|^(?:\[Errno \d+\] )?(?:Connection reset by peer|Connection refused|Broken pipe)\.?$|Connection closed by peer|Socket Timeout|Stop_waiting response|CUDA error: (?:an illegal|unspecified launch|misaligned|an illegal instruction|uncorrectable|unknown error|initialization error)`)

var (
	reDataLoader  = regexp.MustCompile(`DataLoader worker \(pid(?:\(s\))? [\d, ]+\) (is killed by signal: ([^.]+)\.?|exited unexpectedly(?: with exit code (-?\d+))?)`)
	reDiskFull    = regexp.MustCompile(`No space left on device|\[Errno 28\]|PytorchStreamWriter failed writing file|file write failed|inline_container\.cc:\d+\] \. unexpected pos`)
	reShmPath     = regexp.MustCompile(`</torch_\d+_\d+(?:_\d+)?>|/dev/shm/`)
	reImport      = regexp.MustCompile(`undefined symbol: (\S+)|cannot open shared object file|Failed to import|No module named '([^']+)'`)
	reSharedObj   = regexp.MustCompile(`([\w.\-+]+\.so(?:\.[\d.]+)?)\b`)
	reHostOOM     = regexp.MustCompile(`Out of memory: Killed process (\d+) \(([^)]*)\)|invoked oom-killer|oom-kill:|Memory cgroup out of memory|oom[-_]kill event|tasks? [\d\-,]+: Out Of Memory`)
	reSpawnSignal = regexp.MustCompile(`terminated with signal (SIG\w+)`)
	reDiedSignal  = regexp.MustCompile(`died with <Signals\.(SIG\w+): \d+>`)
	// The DataLoader re-raises a worker's exception in the main process
	// ("Caught KeyError in DataLoader worker process 3."); the worker's
	// own traceback follows with the real exception.
	reWorkerReraise = regexp.MustCompile(`^Caught \w+ in DataLoader worker process \d+`)
	reSlurmTask     = regexp.MustCompile(`: task (\d+): Out Of Memory`)
	reDataLoaderBus = regexp.MustCompile(`DataLoader worker \(pid|bus error encountered in worker`)
)

// causeHit is one line that names a cause outside NCCL.
type causeHit struct {
	id     string
	hit    *errorHit
	exc    string // exception class (last component), for Python exceptions
	msg    string // exception message
	strong bool   // the line itself proves the cause (dmesg OOM line, a traceback)
}

// classifyCause says which cause outside NCCL an error line names; false
// when the line is a knock-on of another failure (an NCCL or store error
// re-raised, a launcher's wrapper).
func classifyCause(e *errorHit) (causeHit, bool) {
	text := e.line.Text
	ch := causeHit{hit: e}
	switch e.line.Kind {
	case "cuda-oom":
		ch.id, ch.strong = idCudaOOM, true
		// Ray's memory monitor kills a task when the host runs low:
		// "ray.exceptions.OutOfMemoryError: Task was killed due to the node
		// running low on memory."
		if strings.Contains(text, "running low on memory") {
			ch.id = idHostOOMKill
		}
		if sm := linetext.PyException.FindStringSubmatch(string(stripLogLevel(linetext.Parse([]byte(text)).Msg))); sm != nil {
			ch.exc, ch.msg = lastName(sm[1]), strings.TrimSpace(sm[2])
		}
		return ch, true
	case "cuda-assert":
		ch.id, ch.strong = idDeviceAssert, true
		return ch, true
	case "killed":
		ch.id, ch.strong = idHostOOMKill, reHostOOM.MatchString(text)
		return ch, true
	case "segfault":
		ch.id = idSegfault
		return ch, true
	case "signal":
		ch.id = idKilledBySignal
		return ch, true
	case "python-exception":
	default:
		return ch, false
	}
	sm := linetext.PyException.FindStringSubmatch(string(stripLogLevel(linetext.Parse([]byte(text)).Msg)))
	if sm == nil {
		return ch, false
	}
	cls := lastName(sm[1])
	ch.exc, ch.msg = cls, strings.TrimSpace(sm[2])
	ch.strong = e.line.Frame != ""
	switch {
	case strings.Contains(ch.msg, "device-side assert triggered"):
		ch.id, ch.strong = idDeviceAssert, true
	case strings.Contains(ch.msg, "CUDA error: out of memory"):
		ch.id, ch.strong = idCudaOOM, true
	case reDataLoader.MatchString(ch.msg):
		ch.id, ch.strong = idDataLoaderDied, true
	case reDiedSignal.MatchString(ch.msg):
		// torch.distributed.launch: "CalledProcessError: Command '[…]' died
		// with <Signals.SIGKILL: 9>."
		switch reDiedSignal.FindStringSubmatch(ch.msg)[1] {
		case "SIGKILL":
			ch.id, ch.strong = idHostOOMKill, false
			return ch, true
		case "SIGSEGV":
			ch.id, ch.strong = idSegfault, false
			return ch, true
		}
		return ch, false
	case cls == "ProcessExitedException" || reSpawnSignal.MatchString(ch.msg):
		// torch.multiprocessing.spawn: "process 1 terminated with signal
		// SIGKILL" (older torch raises a bare Exception); an exit code is
		// only the wrapper of the child's own error.
		switch s := reSpawnSignal.FindStringSubmatch(ch.msg); {
		case s != nil && s[1] == "SIGKILL":
			ch.id, ch.strong = idHostOOMKill, false
			return ch, true
		case s != nil && s[1] == "SIGSEGV":
			ch.id, ch.strong = idSegfault, false
			return ch, true
		}
		return ch, false
	case knockOnExceptions[cls] || reKnockOnMsg.MatchString(ch.msg) || reWorkerReraise.MatchString(ch.msg):
		return ch, false
	case cls == "ImportError" || cls == "ModuleNotFoundError" || reImport.MatchString(ch.msg):
		ch.id, ch.strong = idImportError, true
	case reDiskFull.MatchString(ch.msg):
		ch.id, ch.strong = idDiskFull, true
	default:
		ch.id = idPythonException
	}
	return ch, true
}

// nonNCCLCause picks the earliest cause outside NCCL, by timestamp when
// every candidate has one, else the first in input order, followed by the
// other lines of the same cause. A generic Python exception raised after
// its own rank failed, or by a rank that later timed out itself, is no
// cause; nor is a kill after a collective timed out.
func (s *scan) nonNCCLCause() []causeHit {
	var hits []causeHit
	for i := range s.errs {
		e := &s.errs[i]
		ch, ok := classifyCause(e)
		if !ok || s.killedByLauncher(ch) {
			continue
		}
		// SIGABRT is how PyTorch takes a process down after an NCCL
		// failure or timeout ("To avoid data inconsistency, we are taking
		// the entire process down"): with such lines it is their knock-on.
		if ch.id == idKilledBySignal && e.line.Frame == "signal 6" && s.ncclTornDown() {
			continue
		}
		if ch.id == idPythonException && (s.raisedAfterFailure(e) || s.timedOutItself(e)) {
			continue
		}
		// An allocation after the rank's own collective timed out sized
		// itself from what that collective left (a garbage size: "Tried
		// to allocate more than 1EB"): the timeout is the root.
		if ch.id == idCudaOOM && s.afterOwnTimeout(e) {
			continue
		}
		// A kill stamped after a collective already timed out is the
		// teardown of a hung job (a scheduler or the user), not its cause.
		if (ch.id == idHostOOMKill || ch.id == idSegfault || ch.id == idKilledBySignal) && e.ts.OK {
			if w := s.firstTimeoutTS(); w.OK && w.Before(e.ts) {
				continue
			}
		}
		hits = append(hits, ch)
	}
	if len(hits) == 0 {
		return nil
	}
	allTS := true
	for _, h := range hits {
		allTS = allTS && h.hit.ts.OK
	}
	best := 0
	for i, h := range hits {
		if allTS && h.hit.ts.Before(hits[best].hit.ts) {
			best = i
		}
	}
	// A generic exception chained to a specific one a few lines on (a
	// wrapper raised "from" it, or the other way round) stands for it.
	if b := hits[best]; b.id == idPythonException {
		for i, h := range hits {
			l := h.hit.line
			if h.id != idPythonException && l.File == b.hit.line.File && l.Rank == b.hit.line.Rank &&
				l.Line > b.hit.line.Line && l.Line-b.hit.line.Line <= 25 {
				best = i
				break
			}
		}
	}
	// The chosen cause first, then the other lines of the same cause.
	out := []causeHit{hits[best]}
	for i, h := range hits {
		if i != best && h.id == hits[best].id {
			out = append(out, h)
		}
	}
	return out
}

// raisedAfterFailure tells whether a Python exception came after an
// NCCL or distributed failure of its own rank (by timestamp when both
// have one, else later in the same input): then it is a knock-on.
func (s *scan) raisedAfterFailure(e *errorHit) bool {
	if e.ts.OK && s.earliest != nil && s.earliestTS.OK {
		return s.earliestTS.Before(e.ts)
	}
	if r := e.line.Rank; r >= 0 {
		at, ok := s.failAt[[2]int{e.file, r}]
		return ok && at < e.seq
	}
	for k, at := range s.failAt {
		if k[0] == e.file && at < e.seq {
			return true
		}
	}
	return false
}

// afterOwnTimeout tells whether an error line came after a collective
// timeout of its own rank: by timestamp when both have one, else later in
// the same input (on the same rank, or on any when the line names none).
func (s *scan) afterOwnTimeout(e *errorHit) bool {
	if e.ts.OK {
		if w := s.firstTimeoutTS(); w.OK {
			return w.Before(e.ts)
		}
	}
	for k, at := range s.timeoutAt {
		if k[0] == e.file && (e.line.Rank < 0 || k[1] == e.line.Rank) && at < e.seq {
			return true
		}
	}
	return false
}

// timedOutItself tells whether the rank of an exception later reported a
// collective timeout of its own: a rank that died of its exception never
// does, so the exception was caught (or raised in a helper thread) and is
// not what stopped the job.
func (s *scan) timedOutItself(e *errorHit) bool {
	if e.line.Rank < 0 {
		return false
	}
	_, ok := s.wd[e.line.Rank]
	return ok
}

// firstTimeoutTS is the earliest timestamp of a waiting rank's timeout.
func (s *scan) firstTimeoutTS() linetext.Stamp {
	var first linetext.Stamp
	for _, a := range s.aggs {
		if a.def.waiter && a.earliestTS.OK && (!first.OK || a.earliestTS.Before(first)) {
			first = a.earliestTS
		}
	}
	return first
}

// nonNCCLWins decides whether a cause outside NCCL is the root: when no
// NCCL cause stands on its own (only timeouts, teardown, wrappers and
// consequences remain), or when the timestamps show it came first.
func nonNCCLWins(c causeHit, direct []*merged) bool {
	if len(direct) == 0 {
		return true
	}
	if !c.hit.ts.OK {
		return false
	}
	for _, m := range direct {
		if !m.primary.earliestTS.OK || !c.hit.ts.Before(m.primary.earliestTS) {
			return false
		}
	}
	return true
}

// causeDiagnosis renders the cause outside NCCL as the root diagnosis.
func (s *scan) causeDiagnosis(hits []causeHit) Diagnosis {
	c := hits[0]
	ev := c.hit.line.Evidence
	rank, guessed := ev.Rank, false
	if rank < 0 && c.id == idPythonException && s.cat.mpiFirst >= 0 {
		rank = s.cat.mpiFirst // Open MPI's first process to exit non-zero
	}
	if rank < 0 {
		// The same exception in one rank's own words: a line with its
		// prefix, or its entry's @record traceback in torchrun's summary.
		rank = sameCauseRank(hits)
	}
	if rank < 0 && terminatePayload(linetext.Parse([]byte(ev.Text)).Msg) != nil {
		// std::terminate ends the process with SIGABRT: the one death by
		// signal 6 a launcher reported is this process's.
		rank = s.abortedRank()
	}
	if rank < 0 && ev.LocalRank != nil && s.oneNode() {
		rank = *ev.LocalRank // torchrun --tee's [defaultN]: on one node
	}
	if rank < 0 && s.root != nil && s.root.Rank >= 0 && rootMatches(c, s.root) {
		// torchrun's "first observed failure" is the lowest rank among
		// those it saw fail in one poll: only a rank when no other
		// entry failed the same way.
		if s.sameExitEntries(s.root.ExitCode) <= 1 {
			rank = s.root.Rank
		} else {
			guessed = true
		}
	}
	d := Diagnosis{ID: c.id, Role: RoleCause, RootCause: true, NotNCCL: true, Guide: guideNotNCCL,
		Confidence: High, Fields: map[string]string{}, Checks: []string{}, Fixes: []string{}}
	if _, ok := s.e.lib.Get(guideNotNCCL, s.e.opts.Lang); !ok {
		d.Guide = ""
	}
	ranks, hosts := map[int]bool{}, map[string]bool{}
	strong := false
	for _, h := range hits {
		d.Count++
		strong = strong || h.strong
		if len(d.Evidence) < s.e.opts.MaxEvidence {
			d.Evidence = append(d.Evidence, h.hit.line.Evidence)
		}
		if r := h.hit.line.Rank; r >= 0 {
			ranks[r] = true
		}
		// Python logging's "name: [LEVEL]" looks like a pdsh host prefix.
		if h := h.hit.line.Host; h != "" && !strings.HasPrefix(h, "torch.") {
			hosts[h] = true
		}
	}
	if rank < 0 {
		// srun: "srun: error: node: task 1: Out Of Memory".
		for _, h := range hits {
			if sm := reSlurmTask.FindStringSubmatch(h.hit.line.Text); sm != nil {
				rank = linetext.Atoi([]byte(sm[1]))
				break
			}
		}
	}
	if rank >= 0 {
		ranks[rank] = true
		r := rank
		d.Culprit = &r
	}
	d.Ranks = phrase.SortedKeys(ranks)
	if guessed {
		d.Advice = append(d.Advice, "The log does not say which rank raised it: torchrun's \"first observed failure\" (rank "+strconv.Itoa(s.root.Rank)+") is only the lowest rank it saw fail, and several ranks failed the same way. Rerun with torchrun --tee 3 (every line prefixed with its rank) or decorate main with torch.distributed.elastic.multiprocessing.errors.record.")
	}
	for h := range hosts {
		d.Hosts = append(d.Hosts, h)
	}
	sort.Strings(d.Hosts)
	if !strong {
		d.Confidence = Medium
	}
	if c.exc != "" {
		d.Fields["exception"] = c.exc
		if c.msg != "" {
			d.Fields["message"] = textwrap.Clip(c.msg, 160)
		}
	}
	frame := frameWhere(c.hit.line.Frame)
	if frame != "" {
		d.Fields["frame"] = frame
	}
	on := ""
	if rank >= 0 {
		on = fmt.Sprintf(" on rank %d", rank)
	} else if ev.Host != "" {
		on = " on " + ev.Host
	}
	what := c.exc
	if frame != "" {
		what += " in " + frame
	}
	const notNCCL = "Not an NCCL problem: "
	switch c.id {
	case idPythonException:
		d.Title = fmt.Sprintf("A Python exception%s (%s)", on, what)
		d.Explanation = notNCCL + "a rank raised " + c.exc + " in the training code and exited; the other ranks then waited for it in their next collective, so their NCCL timeouts and teardown lines are the knock-on."
		d.Advice = append(d.Advice, "Fix the exception: read its traceback (the frame above it is where it was raised). NCCL settings will not help.")
	case idHostOOMKill:
		who := "a rank"
		if rank >= 0 {
			who = fmt.Sprintf("rank %d", rank)
		} else if ev.Host != "" {
			who = "a rank on " + ev.Host
		}
		if strong {
			d.Title = fmt.Sprintf("The out-of-memory killer killed %s (the host ran out of memory)", who)
		} else {
			d.Title = fmt.Sprintf("SIGKILL ended %s (exit code -9), most often the host's out-of-memory killer", who)
		}
		for _, h := range hits {
			if sm := reHostOOM.FindStringSubmatch(h.hit.line.Text); sm != nil && sm[1] != "" {
				d.Fields["pid"], d.Fields["process"] = sm[1], sm[2]
				break
			}
		}
		d.Explanation = notNCCL + "SIGKILL cannot be caught, so the rank vanished without a Python traceback; its peers lost their connections or timed out. The kernel's OOM killer is the usual sender when host RAM runs out (large datasets in memory, many DataLoader workers, CPU offload)."
		d.Advice = append(d.Advice, "Confirm in the kernel log: dmesg -T | grep -i -E 'out of memory|oom-kill' (or journalctl -k); a cluster scheduler may also kill a job over its memory limit.",
			"Reduce host memory per rank: fewer DataLoader workers, memory-mapped datasets, less CPU offload, or fewer ranks per node.")
	case idDeviceAssert:
		if sm := reKernelAssert.FindStringSubmatch(ev.Text); sm != nil {
			d.Fields["assertion"] = sm[1]
			d.Title = fmt.Sprintf("A CUDA device-side assert%s (`%s`)", on, textwrap.Clip(sm[1], 60))
		} else {
			d.Title = fmt.Sprintf("A CUDA device-side assert%s (a kernel of the model checked its input and failed)", on)
		}
		d.Explanation = notNCCL + "a CUDA kernel of the model asserted on bad input (an index out of range, a label outside the classes); the CUDA context is lost, so the next CUDA call of that rank — often in NCCL's watchdog — fails with the same error."
		d.Advice = append(d.Advice, "Rerun with CUDA_LAUNCH_BLOCKING=1 so the traceback points at the kernel that asserted; check indices and labels against the tensor sizes (e.g. labels < num_classes, token ids < vocab size).")
	case idDataLoaderDied:
		if sm := reDataLoader.FindStringSubmatch(c.msg); sm != nil {
			d.Fields["worker"] = strings.TrimPrefix(strings.TrimSuffix(sm[1], "."), "is ")
			if sm[2] != "" {
				d.Fields["signal"] = sm[2]
			}
		}
		what := phrase.Or(d.Fields["worker"], "exited unexpectedly")
		if strings.Contains(strings.ToLower(c.msg), "bus error") {
			d.Fields["signal"] = "Bus error"
			what = "Bus error: its batches did not fit in /dev/shm"
		}
		d.Title = fmt.Sprintf("A DataLoader worker died%s (%s)", on, what)
		d.Explanation = notNCCL + "a DataLoader worker process of this rank died, so the rank raised and stopped feeding its collectives. \"Killed\" means SIGKILL, usually the host's OOM killer; \"Bus error\" a /dev/shm too small for the batches."
		d.Advice = append(d.Advice, "Lower num_workers (or prefetch_factor) and check host memory (dmesg for the OOM killer); in a container give /dev/shm room (--shm-size or --ipc=host).")
	case idImportError:
		d.Title = fmt.Sprintf("An import failed%s (%s)", on, importWhat(c))
		if sm := reImport.FindStringSubmatch(c.msg); sm != nil && sm[1] != "" {
			d.Fields["symbol"] = sm[1]
		}
		if so := reSharedObj.FindStringSubmatch(c.msg); so != nil {
			d.Fields["library"] = path.Base(so[1])
		}
		d.Explanation = notNCCL + "a Python module or a compiled extension could not be loaded. \"undefined symbol\" in an extension (flash-attn, apex, a custom op) means it was built against another PyTorch or CUDA version than the one installed."
		d.Advice = append(d.Advice, "Reinstall the extension built for this exact PyTorch and CUDA version (python -c 'import torch; print(torch.__version__, torch.version.cuda)'), or rebuild it from source in this environment.")
	case idDiskFull:
		if reShmPath.MatchString(c.msg) {
			d.Fields["device"] = "/dev/shm"
			d.Title = fmt.Sprintf("Shared memory (/dev/shm) is full%s", on)
			d.Explanation = notNCCL + "a DataLoader worker could not write its batch to /dev/shm; the rank raised and the others waited."
			d.Advice = append(d.Advice, "Give the container a larger /dev/shm (docker --shm-size=16g or --ipc=host; Kubernetes: an emptyDir with medium: Memory), or lower num_workers.")
		} else {
			d.Title = fmt.Sprintf("The disk filled up while writing%s (%s)", on, textwrap.Clip(c.exc+": "+c.msg, 70))
			d.Explanation = notNCCL + "writing a file (usually a checkpoint) failed because the file system is full; the writing rank raised, and the others waited for it in their next barrier or collective until NCCL's timeout."
			d.Advice = append(d.Advice, "Free space or write checkpoints elsewhere (df -h on the checkpoint directory); keep fewer checkpoints (e.g. save_total_limit).")
		}
	case idCudaOOM:
		d.Title = fmt.Sprintf("CUDA ran out of memory in the model%s", on)
		d.Explanation = notNCCL + "the model's own allocations did not fit in GPU memory; the rank raised torch.OutOfMemoryError and its peers then waited for it."
		d.Advice = append(d.Advice, "Lower the batch size or sequence length, enable activation checkpointing, or shard more (FSDP/ZeRO).")
	case idSegfault:
		d.Title = fmt.Sprintf("A process crashed with a segmentation fault%s", on)
		d.Explanation = "A rank crashed with SIGSEGV; its peers then lost it. The log does not show NCCL causing it: a compiled extension, a library version mismatch or a DataLoader worker are common sources."
		d.Advice = append(d.Advice, "Get a native stack: rerun with python -X faulthandler, or run the rank under gdb; the faulting library names the culprit.")
	}
	if d.Title == "" {
		d.Title = c.id
	}
	return d
}

// abortedRank is the rank of the only process a launcher reported dead of
// SIGABRT; -1 when none or several were.
func (s *scan) abortedRank() int {
	rank := -1
	for _, e := range s.errs {
		if e.line.Frame != "signal 6" || e.line.Rank < 0 {
			continue
		}
		if rank >= 0 && e.line.Rank != rank {
			return -1
		}
		rank = e.line.Rank
	}
	return rank
}

// rootMatches tells whether torchrun's first observed failure is the same
// event as c (same kind of exit), so its rank can stand for c's.
func rootMatches(c causeHit, t *TorchrunFailure) bool {
	switch c.id {
	case idHostOOMKill:
		return t.ExitCode == "-9"
	case idSegfault:
		return t.ExitCode == "-11"
	}
	return t.ExitCode == "1"
}

// lastName is the last component of a dotted class name.
func lastName(cls string) string {
	if i := strings.LastIndexByte(cls, '.'); i >= 0 {
		return cls[i+1:]
	}
	return cls
}

// frameWhere turns a traceback frame ('File "/a/b/data.py", line 58, in
// f') into "data.py:58".
func frameWhere(frame string) string {
	sm := linetext.PyFrame.FindStringSubmatch(frame)
	if sm == nil {
		return ""
	}
	return path.Base(sm[1]) + ":" + sm[2]
}

// importWhat names what failed to import, briefly.
func importWhat(c causeHit) string {
	if sm := reImport.FindStringSubmatch(c.msg); sm != nil {
		switch {
		case sm[1] != "":
			if so := reSharedObj.FindStringSubmatch(c.msg); so != nil {
				return c.exc + ": undefined symbol in " + path.Base(so[1])
			}
			return c.exc + ": undefined symbol"
		case sm[2] != "":
			return c.exc + ": no module named " + sm[2]
		}
	}
	return textwrap.Clip(c.exc+": "+c.msg, 70)
}

// assertFromCUDA finds CUDA error 710 (cudaErrorAssert) in an NCCL
// diagnosis: NCCL only met the sticky error of a kernel of the model that
// asserted, so the cause is the assert even when its own lines are not in
// the log.
func (s *scan) assertFromCUDA(out []Diagnosis) []causeHit {
	for _, d := range out {
		if d.Fields["cuda_code"] != "710" || len(d.Evidence) == 0 {
			continue
		}
		ev := d.Evidence[0]
		for _, e := range d.Evidence {
			if strings.Contains(e.Text, "device-side assert") {
				ev = e
				break
			}
		}
		h := &errorHit{line: ErrorLine{Kind: "cuda-assert", Evidence: ev}, seq: -1}
		return []causeHit{{id: idDeviceAssert, hit: h, strong: true}}
	}
	return nil
}

// splitDataLoaderBus takes shm-sigbus out of the direct causes when every
// line of it is a DataLoader worker's ("DataLoader worker (pid N) is
// killed by signal: Bus error", "Unexpected bus error encountered in
// worker"): the worker's batches did not fit in /dev/shm, which is no
// NCCL failure. The group joins the others (it becomes a knock-on) and
// its first line is returned as the cause.
func splitDataLoaderBus(direct, others []*merged) ([]*merged, []*merged, *causeHit) {
	var hit *causeHit
	kept := direct[:0]
	for _, m := range direct {
		if hit == nil && m.primary.def.ID == "shm-sigbus" && allDataLoader(m) {
			others = append(others, m)
			ev := m.primary.first
			h := &errorHit{line: ErrorLine{Kind: "python-exception", Evidence: ev}, seq: m.primary.firstSeq, ts: m.primary.earliestTS}
			ch := causeHit{id: idDataLoaderDied, hit: h, strong: true, msg: string(stripLogLevel(linetext.Parse([]byte(ev.Text)).Msg))}
			if sm := linetext.PyException.FindStringSubmatch(ch.msg); sm != nil {
				ch.exc, ch.msg = lastName(sm[1]), strings.TrimSpace(sm[2])
			}
			hit = &ch
			continue
		}
		kept = append(kept, m)
	}
	return kept, others, hit
}

func allDataLoader(m *merged) bool {
	for _, a := range m.all {
		for _, ev := range a.evidence {
			if !reDataLoaderBus.MatchString(ev.Text) {
				return false
			}
		}
	}
	return true
}

// rePIDField reads the PID of a torchrun summary's exit line
// ("exitcode  : -9 (pid: 29576)").
var rePIDField = regexp.MustCompile(`\(pid: (\d+)\)|received by PID (\d+)`)

// killedByLauncher tells a death torchrun caused itself: after the first
// failure it sends SIGTERM to the workers still running ("Sending process
// N closing signal SIGTERM") and SIGKILL to those that outlive the grace
// period. The death of such a PID is teardown, whatever the summary's root
// names; a segmentation fault is never the launcher's.
func (s *scan) killedByLauncher(ch causeHit) bool {
	if ch.id != idHostOOMKill && ch.id != idKilledBySignal {
		return false
	}
	pid := ch.hit.line.PID
	if sm := rePIDField.FindStringSubmatch(ch.hit.line.Text); sm != nil {
		pid = linetext.Atoi([]byte(sm[1] + sm[2]))
	}
	// The only failure torchrun reports is no teardown, whatever it sent.
	return pid > 0 && s.cat.ended[pid] && len(s.failures) != 1
}

// ncclTornDown tells that NCCL or PyTorch's watchdog failed or timed out:
// a SIGABRT after that is PyTorch taking the process down.
func (s *scan) ncclTornDown() bool {
	for id, a := range s.aggs {
		if a.def.waiter || id == "nccl-async-teardown" || id == "heartbeat-monitor" || a.def.Role == RoleWrapper {
			return true
		}
	}
	return false
}

// sameCauseRank is the one rank among the lines of a cause that carry the
// first line's exception and message; -1 when none or several do.
func sameCauseRank(hits []causeHit) int {
	rank := -1
	for _, h := range hits {
		r := h.hit.line.Rank
		if r < 0 || h.exc != hits[0].exc || h.msg != hits[0].msg {
			continue
		}
		if rank >= 0 && r != rank {
			return -1
		}
		rank = r
	}
	return rank
}

// sameExitEntries counts torchrun's failure-summary entries with this
// exit code.
func (s *scan) sameExitEntries(code string) int {
	n := 0
	for _, e := range s.failures {
		if e.ExitCode == code {
			n++
		}
	}
	return n
}
