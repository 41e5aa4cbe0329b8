package explain

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// corpusCase is what one log (or one directory of rank logs) under
// testdata/corpus must produce with the real guides library, beyond its
// label (testdata/labels/NAME.yaml, scored by TestCorpusScore).
type corpusCase struct {
	conf    string   // root confidence
	rank    int      // rank of the root's first evidence line; -2 = not checked
	has     []string // other diagnosis ids that must be present
	also    []string // ids folded into the root (also_matched)
	not     []string // ids that must not be diagnosed
	notes   []string // note ids
	version string
	verdict string // watchdog verdict
	behind  []int  // watchdog stragglers
	first   string // first non-NCCL error kind
	binary  bool
	check   func(t *testing.T, r *Report)
}

var corpus = map[string]corpusCase{
	"shm-docker-nospace.log": {conf: High, rank: 2, also: []string{"shm-create-failed"},
		has: []string{"nccl-unhandled-system-error", "nccl-remote-error", "nccl-async-teardown", "torchrun-child-failed"}, version: "2.22.3+cuda12.2",
		check: func(t *testing.T, r *Report) {
			root := rootOf(r)
			if root.Fields["path"] != "/dev/shm/nccl-7Qm1sx" || root.Fields["bytes"] != "9637892" {
				t.Errorf("fields = %v", root.Fields)
			}
			if tr := r.TorchrunRootCause; tr == nil || tr.Rank != 2 || tr.ExitCode != "1" || tr.Host != "7f3c2a1b9e04" {
				t.Errorf("torchrun root cause = %+v", tr)
			}
			if d := r.Digest; d == nil || d.NRanks != 4 || d.Transports["SHM"] == 0 || d.ErrorOrigin != "transport/shm.cc:114 (ncclSystemError)" {
				t.Errorf("digest = %+v", d)
			}
			for _, d := range r.Diagnoses[1:] {
				if d.ConsequenceOf != "shm-create-nospace" {
					t.Errorf("%s is not marked as following the root", d.ID)
				}
			}
		}},
	"shm-create-cudahostregister.log": {conf: High, rank: -2, has: []string{"nccl-unhandled-cuda-error"}, not: []string{idUnrecognisedWarn}},
	"shm-sigbus-nccl214.log": {conf: High, rank: -2, has: []string{"torchrun-child-failed"}, version: "2.14.3+cuda11.7",
		check: func(t *testing.T, r *Report) {
			if tr := r.TorchrunRootCause; tr == nil || tr.Rank != 0 || tr.Signal != "SIGBUS" || tr.ExitCode != "-7" {
				t.Errorf("torchrun root cause = %+v", tr)
			}
		}},
	"shm-removeipc-slurm.log": {conf: High, rank: 1, also: []string{"shm-unlink-enoent"}, has: []string{"nccl-unhandled-system-error"}, version: "2.23.4+cuda12.6"},
	"cumem-size0-vllm.log": {conf: High, rank: -2, notes: []string{"cumem-host-alloc"}, not: []string{"shm-attach-enoent", "cumem-host-alloc"},
		check: func(t *testing.T, r *Report) {
			if d := r.Digest; d == nil || len(d.CuMemFallback) != 2 {
				t.Errorf("digest fallback = %+v", d)
			}
			if ev := rootOf(r).Evidence[0]; ev.Host != "d4fde3314201" || ev.PID != 13740 || ev.Time == "" {
				t.Errorf("evidence = %+v", ev)
			}
		}},
	"cumem-peer-access.log": {conf: High, rank: 0, has: []string{"nccl-unhandled-cuda-error"}, not: []string{"gpu-oom-init"}},
	"watchdog-hang-straggler.log": {conf: High, rank: 0, also: []string{"watchdog-seq-status"}, has: []string{"nccl-async-teardown"},
		verdict: "hang", behind: []int{3},
		check: func(t *testing.T, r *Report) {
			w := rootOf(r).Watchdog
			if w.SeqNum != 1201 || w.OpType != "ALLREDUCE" || w.NumelIn != 262144000 || w.TimeoutMS != 600000 || w.RanForMS != 600081 {
				t.Errorf("decoded %+v", w)
			}
			if !slices.Equal(w.TimedOutRanks, []int{0, 1, 2}) || w.SeqByRank["3"].LastEnqueued != 1200 {
				t.Errorf("ranks %v seq %v", w.TimedOutRanks, w.SeqByRank)
			}
		}},
	// Issue 15, class 8: rank 1 raised, rank 0 timed out waiting for it. The
	// exception is the root (not NCCL); the timeout, decoded, follows.
	"watchdog-rank-crashed": {conf: High, rank: 1, has: []string{"watchdog-timeout", "nccl-async-teardown"}, first: "python-exception",
		check: func(t *testing.T, r *Report) {
			if fe := r.FirstError; fe.Rank != 1 || !strings.Contains(fe.Text, "KeyError") || !strings.Contains(fe.Frame, "data.py") {
				t.Errorf("first error = %+v", fe)
			}
			root := rootOf(r)
			if !root.NotNCCL || root.Fields["exception"] != "KeyError" || root.Fields["frame"] != "data.py:58" {
				t.Errorf("root = %+v", root)
			}
			wd := findDiag(r, "watchdog-timeout")
			if wd == nil || wd.Watchdog == nil || wd.Watchdog.Verdict != "hang" || !slices.Equal(wd.Watchdog.Stragglers, []int{1}) ||
				wd.ConsequenceOf != "python-exception" || !slices.Equal(wd.AlsoMatched, []string{"watchdog-seq-status"}) {
				t.Errorf("watchdog = %+v", wd)
			}
		}},
	"watchdog-too-slow.log": {conf: High, rank: 0, verdict: "too-slow",
		check: func(t *testing.T, r *Report) {
			if d := r.Digest; d == nil || d.Transports["NET/Socket"] != 2 || d.NNodes != 2 || d.Comms != 1 {
				t.Errorf("digest = %+v", d)
			}
		}},
	"watchdog-old-torch.log":    {conf: High, rank: 2, also: []string{"watchdog-seq-status"}, has: []string{"nccl-async-teardown"}, verdict: "hang"},
	"heartbeat-stuck.log":       {conf: High, rank: 3},
	"gpu-xid-falloff":           {conf: High, rank: -2, has: []string{"watchdog-timeout", "nccl-async-teardown"}},
	"duplicate-gpu.log":         {conf: High, rank: 1, has: []string{"barrier-device-unknown", "nccl-invalid-usage"}},
	"duplicate-gpu-nccl230.log": {conf: High, rank: -2, has: []string{"nccl-invalid-usage"}, version: "2.30.3"},
	"wrong-ifname.log": {conf: High, rank: 0, has: []string{"nccl-internal-error"},
		check: func(t *testing.T, r *Report) {
			if d := r.Digest; d == nil || d.Env["NCCL_SOCKET_IFNAME"] != "eth0" {
				t.Errorf("digest = %+v", d)
			}
		}},
	"socket-virbr-multinode": {conf: High, rank: 0, has: []string{"proxy-failure", "peer-closed", "nccl-remote-error"},
		check: func(t *testing.T, r *Report) {
			if d := r.Digest; d == nil || !slices.Contains(d.RiskyIfs, "virbr0:192.168.122.1") {
				t.Errorf("digest = %+v", d)
			}
			if e := r.EarliestFailure; e == nil || e.Rank != 0 || e.Signature != "socket-connect-failed" {
				t.Errorf("earliest = %+v", e)
			}
			if f := rootOf(r).Fields; f["peer"] != "192.168.122.1<43211>" || f["attempts"] != "35" {
				t.Errorf("no fields: %v", f)
			}
		}},
	"socket-connect-224.log": {conf: High, rank: 3, has: []string{"nccl-remote-error"}, version: "2.25.1+cuda12.8"},
	"deepspeed-ansi-crlf.log": {conf: High, rank: -2, has: []string{"proxy-failure", "nccl-unhandled-system-error"},
		check: func(t *testing.T, r *Report) {
			ev := rootOf(r).Evidence[0]
			if ev.Host != "worker-1" || strings.ContainsAny(ev.Text, "\x1b\r") || ev.Line != 6 {
				t.Errorf("evidence = %+v", ev)
			}
		}},
	"socket-msg-truncated.log": {conf: High, rank: 1, has: []string{"proxy-failure"}},
	"ib-retry-exceeded": {conf: High, rank: 8, has: []string{"peer-closed", "nccl-remote-error"},
		check: func(t *testing.T, r *Report) {
			if d := r.Digest; d == nil || d.Network != "IB" || !slices.Contains(d.IBDevices, "mlx5_0:1/IB") || d.Transports["NET/IB"] == 0 {
				t.Errorf("digest = %+v", d)
			}
			if !r.Inputs[1].Gzip || r.Inputs[1].Lines != 7 {
				t.Errorf("gzip input = %+v", r.Inputs[1])
			}
		}},
	"ib-memlock-container.log": {conf: High, rank: 0, has: []string{"nccl-unhandled-system-error"}},
	"roce-gid.log":             {conf: High, rank: -2},
	"p2p-hang-acs.log": {conf: High, rank: 0, has: []string{"p2p-hang-acs-iommu"}, verdict: "hang",
		check: func(t *testing.T, r *Report) {
			if d := findDiag(r, "p2p-hang-acs-iommu"); d.Confidence != Low || !d.Inferred {
				t.Errorf("p2p inference = %+v", d)
			}
			if r.Digest.Transports["P2P/IPC"] != 4 {
				t.Errorf("transports = %v", r.Digest.Transports)
			}
		}},
	"p2p-disabled-nvlink.log":   {conf: High, rank: -2},
	"accelerate-rtx40.log":      {conf: High, rank: -2},
	"cuda-no-device.log":        {conf: High, rank: 0, has: []string{"nccl-unhandled-cuda-error"}},
	"fabric-manager-802.log":    {conf: High, rank: -2, not: []string{"cuda-init-failure"}},
	"nvls-invalid-argument.log": {conf: High, rank: 2, has: []string{"nccl-unhandled-cuda-error"}},
	"nvml-not-visible.log":      {conf: High, rank: 2},
	"version-mismatch":          {conf: High, rank: 0},
	"undefined-symbol.log":      {conf: High, rank: -2},
	"port-in-use.log":           {conf: High, rank: -2},
	"bootstrap-crosstalk.log":   {conf: High, rank: 0},
	"rendezvous-timeout.log":    {conf: High, rank: -2},
	"gpu-oom-nccl-init.log":     {conf: High, rank: 3, has: []string{"proxy-failure", "peer-closed"}},
	"fd-exhaustion.log":         {conf: High, rank: 97},
	"mixed-ranks-timestamps.log": {conf: High, rank: 2, has: []string{"peer-closed", "nccl-remote-error", "nccl-async-teardown"},
		check: func(t *testing.T, r *Report) {
			if e := r.EarliestFailure; e == nil || e.Rank != 2 || e.Signature != "gpu-oom-init" {
				t.Errorf("earliest = %+v", e)
			}
			if r.FirstSignature.ID != "peer-closed" {
				t.Errorf("first signature = %+v", r.FirstSignature)
			}
		}},
	// Once unrecognised; issue 15 maps CUDA errors (700 here).
	"unrecognised-warn.log": {conf: High, rank: 1, has: []string{"nccl-unhandled-cuda-error"},
		check: func(t *testing.T, r *Report) {
			if f := rootOf(r).Fields; f["cuda_code"] != "700" || f["cuda_name"] != "cudaErrorIllegalAddress" {
				t.Errorf("fields = %v", f)
			}
		}},
	"internal-error-wrapper.log": {conf: Medium, rank: 0, version: "2.20.5"},
	"invalid-argument.log":       {conf: Medium, rank: 0},
	// Nothing but the peer's going away: peer-closed is named root (the
	// peer's failure), medium, with the note that its rank's log is missing.
	"remote-error-only.log": {conf: Medium, rank: 4, has: []string{"nccl-remote-error"},
		check: func(t *testing.T, r *Report) {
			if root := rootOf(r); root == nil || !strings.Contains(strings.Join(root.Advice, " "), "not in these logs") {
				t.Errorf("root = %+v", root)
			}
		}},
	// Issue 15, class 1: CUDA errors NCCL surfaces, directly or through
	// PyTorch's "Last error:" payload.
	"cuda-700-enqueue-vllm.log":         {conf: High, rank: -2, has: []string{"nccl-unhandled-cuda-error"}, check: cudaFields("700", "cudaErrorIllegalAddress")},
	"cuda-launch-failure-lasterror.log": {conf: High, rank: 3, has: []string{"nccl-unhandled-cuda-error"}, check: cudaFields("719", "cudaErrorLaunchFailure")},
	"cuda-illegal-nccl-tests.log":       {conf: High, rank: -2, has: []string{"nccl-unhandled-cuda-error"}, version: "2.7.8+cuda10.2", check: cudaFields("700", "cudaErrorIllegalAddress")},
	"ray-watchdog-illegal-access.log":   {conf: High, rank: 1, has: []string{"nccl-async-teardown"}},
	// Issue 15, class 4: a WARN not in the catalogue is placed in the NCCL
	// subsystem its source file names, with that subsystem's guide.
	// The catalogue names CUDA error 217's cause: the GPUs cannot peer.
	"warn-p2p-peer-4090.log":  {conf: High, rank: -2, has: []string{"nccl-internal-error"}},
	"warn-ib-async-event.log": {conf: Low, rank: -2, has: []string{"nccl-remote-error"}, check: placed("ib-roce", "transport/net_ib.cc", "")},
	"warn-graph-xml-topo.log": {conf: Low, rank: -2, check: placed("p2p-acs-iommu", "graph/xml.cc", "")},
	// Issue 15, class 5: no WARN, only NCCL's return-code trail; its first
	// frame names the subsystem, the digest adds what it knows.
	"trail-socket-torch1.log": {conf: Medium, rank: -2, has: []string{"nccl-unhandled-system-error"}, version: "2.7.8+cuda10.2",
		check: func(t *testing.T, r *Report) {
			root := rootOf(r)
			if root.Guide != "socket-connect" || root.Fields["source"] != "misc/socket.cc" || root.Fields["risky_interfaces"] != "docker0:172.17.0.1" || !root.Inferred {
				t.Errorf("root = %+v", root)
			}
		}},
	"trail-shm-info-only.log": {conf: Low, rank: -2, has: []string{"nccl-unhandled-system-error"},
		check: func(t *testing.T, r *Report) {
			if root := rootOf(r); root.Guide != "container-shm" || root.Fields["nccl_result"] != "ncclSystemError" {
				t.Errorf("root = %+v", root)
			}
		}},
	// Issue 15, class 2: wrapped and cut pastes, matched as one message.
	"wrapped-shm-docker-paste.log": {conf: High, rank: -2, also: []string{"shm-create-failed"}, has: []string{"nccl-unhandled-system-error"},
		check: func(t *testing.T, r *Report) {
			if f := rootOf(r).Fields; f["size"] != "9637888" {
				t.Errorf("fields = %v", f)
			}
		}},
	"wrapped-kubectl-socket.log": {conf: High, rank: 0, has: []string{"nccl-unhandled-system-error"},
		check: func(t *testing.T, r *Report) {
			if f := rootOf(r).Fields; f["peer"] != "10.42.3.17<41235>" {
				t.Errorf("fields = %v", f)
			}
		}},
	// The WARN lost its head (file name); the trail still names NVLS.
	"cut-prefix-nvls.log": {conf: Low, rank: -2, has: []string{idUnrecognisedWarn},
		check: func(t *testing.T, r *Report) {
			if root := rootOf(r); root.Guide != "nvls" || root.Fields["cuda_name"] != "cudaErrorNotSupported" {
				t.Errorf("root = %+v", root)
			}
		}},
	"wrapped-ib-completion-paste.log": {conf: High, rank: -2,
		check: func(t *testing.T, r *Report) {
			if ev := rootOf(r).Evidence[0]; ev.Line != 6 || !strings.HasSuffix(ev.Text, "len 0, vendor err 129 (Recv)") {
				t.Errorf("evidence = %+v", ev)
			}
		}},
	"trail-nccl-tests-net.log": {conf: Low, rank: -2, has: []string{"nccl-unhandled-system-error"}, version: "2.10.3+cuda11.4",
		check: func(t *testing.T, r *Report) {
			if root := rootOf(r); root.Guide != "multi-node-basics" || root.Fields["source"] != "include/net.h" {
				t.Errorf("root = %+v", root)
			}
		}},
	// torch 0.4 wording, no payload: only the wrapper, at low confidence.
	"torch04-unhandled-cuda.log": {conf: Low, rank: -2},
	"srun-misaligned-lasterror.log": {conf: High, rank: 3, has: []string{"nccl-unhandled-cuda-error"},
		check: cudaFields("716", "cudaErrorMisalignedAddress")},
	"ansi-shmutils-map.log": {conf: Low, rank: -2, has: []string{"nccl-unhandled-system-error"},
		check: placed("container-shm", "misc/shmutils.cc", "")},
	// No NCCL failure.
	"healthy-info.log": {version: "2.21.5+cuda12.4",
		check: func(t *testing.T, r *Report) {
			d := r.Digest
			if d == nil || d.NRanks != 2 || d.NNodes != 1 || d.Comms != 2 || d.Transports["P2P/CUMEM"] != 2 || d.Network != "Socket" ||
				!slices.Equal(d.SocketIfs, []string{"eth0:10.0.0.1"}) || d.Env["NCCL_P2P_LEVEL"] != "NVL" || d.CUDADriver != "12040" {
				t.Errorf("digest = %+v", d)
			}
		}},
	"deprecated-env.log": {notes: []string{"deprecated-env-name"}},
	// Issue 15, class 8: causes that are not NCCL are the root, marked so.
	"python-exception.log": {conf: High, rank: 1, first: "python-exception", not: []string{"torchrun-child-failed"}},
	"cuda-oom-model.log":   {conf: High, rank: 0, first: "cuda-oom"},
	"oom-killed.log":       {conf: Medium, rank: -2, first: "killed"},
	// A rank SIGKILLed (host OOM); the survivor's socket trail is its
	// knock-on, not an NCCL diagnosis.
	"oomkill-peer-trail.log": {conf: Medium, rank: -2, first: "killed", not: []string{idReturnTrail},
		check: func(t *testing.T, r *Report) {
			if root := rootOf(r); !strings.Contains(root.Title, "rank 1") {
				t.Errorf("title %q does not name torchrun's failed rank", root.Title)
			}
		}},
	// Damaged input.
	"nul-holes.log": {conf: High, rank: -2,
		check: func(t *testing.T, r *Report) {
			if r.Inputs[0].NULBytes != 4096 || rootOf(r).Evidence[0].Line != 201 {
				t.Errorf("input %+v evidence %+v", r.Inputs[0], rootOf(r).Evidence[0])
			}
		}},
	"binary-junk.bin": {rank: -2, binary: true}, // strings in it are no diagnosis
}

// cudaFields checks the CUDA error the root names.
func cudaFields(code, name string) func(t *testing.T, r *Report) {
	return func(t *testing.T, r *Report) {
		if f := rootOf(r).Fields; f["cuda_code"] != code || f["cuda_name"] != name {
			t.Errorf("fields = %v, want cuda_code %s cuda_name %s", f, code, name)
		}
	}
}

// placed checks an unrecognised warning's subsystem guide, source file and
// CUDA error.
func placed(guide, source, cudaCode string) func(t *testing.T, r *Report) {
	return func(t *testing.T, r *Report) {
		root := rootOf(r)
		if root.Guide != guide || root.Fields["source"] != source || root.Fields["cuda_code"] != cudaCode || !strings.HasPrefix(root.Title, "NCCL warning from ") {
			t.Errorf("root = %s %q guide %s fields %v", root.ID, root.Title, root.Guide, root.Fields)
		}
	}
}

// corpusMaps are every map of detailed expectations (one per area of the
// corpus, each in its own file): the schema and signature-coverage tests run over all.
var corpusMaps = []map[string]corpusCase{corpus, causesCorpus, hostsCorpus, corpusWordings, catalogCorpus}

// TestCorpus runs the detailed expectations of the corpus map; every
// entry there must match its label's root exactly. (More maps, one per
// area of the corpus, call runCorpusCases from their own tests.)
func TestCorpus(t *testing.T) { runCorpusCases(t, corpus) }

// allCorpusCases joins corpusMaps.
func allCorpusCases() map[string]corpusCase {
	out := map[string]corpusCase{}
	for _, m := range corpusMaps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func runCorpusCases(t *testing.T, cases map[string]corpusCase) {
	t.Helper()
	e := testExplainer(t)
	dir := filepath.Join("testdata", "corpus")
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := readLabel(t, name)
			r := analyzeCorpus(t, e, filepath.Join(dir, name))
			checkCase(t, r, l, c)
		})
	}
}

// analyzeCorpus reads a file, or every file of a directory in name order
// (several ranks or nodes of one job).
func analyzeCorpus(t *testing.T, e *Explainer, path string) *Report {
	t.Helper()
	files := []string{path}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			t.Fatal(err)
		}
		files = nil
		for _, ent := range ents {
			files = append(files, filepath.Join(path, ent.Name()))
		}
		sort.Strings(files)
	}
	return analyzeFiles(t, e, files)
}

// analyzeFiles explains files as one job's logs.
func analyzeFiles(t *testing.T, e *Explainer, files []string) *Report {
	t.Helper()
	var in []Input
	for _, f := range files {
		in = append(in, FileInput(f))
	}
	r, err := e.Analyze(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func checkCase(t *testing.T, r *Report, l corpusLabel, c corpusCase) {
	t.Helper()
	root := rootOf(r)
	switch {
	case l.Root == "" && root != nil:
		t.Fatalf("root = %s, want none (diagnoses %v)", root.ID, diagIDs(r))
	case l.Root != "" && root == nil:
		t.Fatalf("no root, want %s (diagnoses %v)", l.Root, diagIDs(r))
	case l.Root != "" && root.ID != l.Root:
		t.Fatalf("root = %s, want %s (diagnoses %v)", root.ID, l.Root, diagIDs(r))
	}
	if l.Root == "" && len(c.has) == 0 && len(r.Diagnoses) != 0 {
		t.Errorf("diagnoses = %v, want none", diagIDs(r))
	}
	if root != nil {
		if root.Confidence != c.conf {
			t.Errorf("confidence = %s, want %s", root.Confidence, c.conf)
		}
		if c.rank != -2 && (len(root.Evidence) == 0 || root.Evidence[0].Rank != c.rank) {
			t.Errorf("root evidence %+v, want rank %d", root.Evidence, c.rank)
		}
		if root.Guide == "" || len(root.Evidence) == 0 {
			t.Errorf("root has no guide or evidence: %+v", root)
		}
		if !slices.Equal(root.AlsoMatched, c.also) && !(len(root.AlsoMatched) == 0 && len(c.also) == 0) {
			t.Errorf("also matched = %v, want %v", root.AlsoMatched, c.also)
		}
	}
	ids := diagIDs(r)
	for _, id := range c.has {
		if !slices.Contains(ids, id) {
			t.Errorf("missing diagnosis %s (have %v)", id, ids)
		}
	}
	for _, id := range c.not {
		if slices.Contains(ids, id) {
			t.Errorf("unexpected diagnosis %s", id)
		}
	}
	for _, d := range r.Diagnoses {
		if d.RootCause != (root != nil && d.ID == root.ID) {
			t.Errorf("%s: root_cause=%v", d.ID, d.RootCause)
		}
		if root != nil && !d.RootCause && (d.Role == RoleConsequence || d.Role == RoleWrapper) && d.ConsequenceOf != root.ID {
			t.Errorf("%s (%s) does not point at the root: %q", d.ID, d.Role, d.ConsequenceOf)
		}
	}
	if !slices.Equal(noteIDs(r), c.notes) && !(len(r.Notes) == 0 && len(c.notes) == 0) {
		t.Errorf("notes = %v, want %v", noteIDs(r), c.notes)
	}
	if c.version != "" && r.NCCLVersion != c.version {
		t.Errorf("nccl_version = %q, want %q", r.NCCLVersion, c.version)
	}
	if c.verdict != "" {
		if root == nil || root.Watchdog == nil || root.Watchdog.Verdict != c.verdict {
			t.Errorf("watchdog = %+v, want verdict %s", root.Watchdog, c.verdict)
		} else if !slices.Equal(root.Watchdog.Stragglers, c.behind) {
			t.Errorf("stragglers = %v, want %v", root.Watchdog.Stragglers, c.behind)
		}
	}
	if c.first != "" && (r.FirstError == nil || r.FirstError.Kind != c.first) {
		t.Errorf("first error = %+v, want kind %s", r.FirstError, c.first)
	}
	if c.first == "" && l.Root == "" && r.FirstError != nil {
		t.Errorf("unexpected first error %+v", r.FirstError)
	}
	binary := false
	for _, in := range r.Inputs {
		binary = binary || in.Binary
	}
	if binary != c.binary {
		t.Errorf("binary = %v, want %v", binary, c.binary)
	}
	if c.check != nil {
		c.check(t, r)
	}
}

// Together the corpus files exercise every signature of the library and
// every extra signature of the explainer.
func TestCorpusCoversEverySignature(t *testing.T) {
	e := testExplainer(t)
	dir := filepath.Join("testdata", "corpus")
	covered := map[string]bool{}
	for name := range allCorpusCases() {
		r := analyzeCorpus(t, e, filepath.Join(dir, name))
		for _, d := range r.Diagnoses {
			covered[d.ID] = true
			for _, a := range d.AlsoMatched {
				covered[a] = true
			}
		}
		for _, n := range r.Notes {
			covered[n.ID] = true
		}
	}
	for _, s := range e.sigs {
		if !covered[s.ID] {
			t.Errorf("no corpus log produces %s", s.ID)
		}
	}
	if n := len(realLibrary(t).Signatures()); n < 39 {
		t.Errorf("the library declares %d signatures, want the 39 of the reference", n)
	}
}
