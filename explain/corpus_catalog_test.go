package explain

import (
	"strings"
	"testing"
)

// catalogCorpus: logs whose cause the message catalogue names (issue 24):
// messages no guide signature declares, a CUDA error that names a cause,
// a value that changes a message's meaning, launchers' per-rank deaths.
// Each checks the cause and the rank the root blames.
var catalogCorpus = map[string]corpusCase{
	// Real output of torch 1.13 (gloo): rank 1 never reached its
	// all_reduce; the others timed out and torchrun ended rank 1 itself.
	"realjob-torchrun-gloo-timeout.log": {conf: High, rank: -2, has: []string{"torchrun-child-failed"}, check: culprit(1)},
	// Real output, @record: torchrun's first observed failure is rank 0's
	// knock-on; rank 1's own traceback in the summary names the rank.
	"realjob-torchrun-record-raise.log": {conf: High, rank: -2, has: []string{"peer-closed"}, check: culprit(1)},
	// Real output, no prefixes and no @record: no rank may be named.
	"realjob-torchrun-unprefixed-raise.log": {conf: High, rank: -2, check: noCulprit("--tee 3")},
	"realjob-mpirun-sigsegv.log":            {conf: Medium, rank: -2, check: culprit(1)},
	"mpiexec-sigabrt.log":                   {conf: Medium, rank: 2, first: "signal", check: culprit(2)},
	"windows-nccl-not-built-clip.log":       {conf: High, rank: -2, not: []string{idPythonException}},
	"fairseq-no-gpus.log":                   {conf: High, rank: -2, not: []string{idPythonException}},
	"libuv-windows-torch25.log":             {conf: High, rank: -2, not: []string{idPythonException}},
	"ring-loopback-nccl219.log":             {conf: High, rank: -2},
	// EACCES is not a vanished segment: no RemoveIPC advice.
	"shm-attach-eacces-nccl223.log":      {conf: High, rank: -2, not: []string{"shm-attach-enoent"}, has: []string{"nccl-unhandled-system-error"}, notes: []string{"barrier-device-unknown"}},
	"p2p-import-pod-per-gpu.log":         {conf: High, rank: -2},
	"cuda-invalid-ordinal-localrank.log": {conf: High, rank: 4, not: []string{idPythonException}},
	"topo-xml-version.log":               {conf: High, rank: -2},
	"cumem-alloc-vm.log":                 {conf: High, rank: -2, has: []string{"nccl-unhandled-cuda-error"}},
	"mnnvl-imex-missing.log":             {conf: High, rank: -2},
	"network-ib-not-found.log":           {conf: High, rank: -2, has: []string{"nccl-invalid-usage"}},
	"nccl-warning-ib-open.log":           {conf: Low, rank: -2},
}

func TestCorpusCatalog(t *testing.T) { runCorpusCases(t, catalogCorpus) }

// culprit checks the rank the root blames.
func culprit(want int) func(t *testing.T, r *Report) {
	return func(t *testing.T, r *Report) {
		t.Helper()
		root := rootOf(r)
		if root == nil || root.Culprit == nil || *root.Culprit != want {
			t.Errorf("culprit of %+v, want rank %d", root, want)
		}
	}
}

// noCulprit checks that the root blames no rank and says how to learn it.
func noCulprit(advice string) func(t *testing.T, r *Report) {
	return func(t *testing.T, r *Report) {
		t.Helper()
		root := rootOf(r)
		if root == nil || root.Culprit != nil {
			t.Fatalf("root %+v blames a rank, want none", root)
		}
		for _, a := range root.Advice {
			if strings.Contains(a, advice) {
				return
			}
		}
		t.Errorf("no advice mentions %q: %q", advice, root.Advice)
	}
}
