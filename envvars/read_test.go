package envvars

import (
	"strings"
	"testing"
)

// TestIssueNamesAreReal (issue 22 item 14): real NCCL variables that the
// hand-written table called invented (and the snippets unset). Each is
// read by some NCCL release, so it is known and never "invented".
func TestIssueNamesAreReal(t *testing.T) {
	for _, n := range []string{"NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_CROSS_NIC", "NCCL_TOPO_FILE",
		"NCCL_GRAPH_FILE", "NCCL_IGNORE_CPU_AFFINITY", "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_NVB_DISABLE", "NCCL_P2P_NET_CHUNKSIZE",
		"NCCL_WORK_FIFO_DEPTH", "NCCL_IB_SPLIT_DATA_ON_QPS"} {
		v, ok := Lookup(n)
		if !ok || !v.Exists() || v.Status == Nonexistent {
			t.Errorf("%s: %+v, %v", n, v, ok)
		}
		if r, ok := ReadBySource(n); !ok || r.Owner != "nccl" || !strings.Contains(r.Source, "src/") {
			t.Errorf("%s: not in the generated table with a source file: %+v", n, r)
		}
	}
}

// TestHandTableAgreesWithSources: the hand-written entries say what the
// generated table (every release's sources) says: an invented name is
// read by no release, a removed one by some release but not the newest,
// a current or deprecated one by the newest (a renamed one may be read or
// not); and every PyTorch name the hand table knows is in the PyTorch list.
func TestHandTableAgreesWithSources(t *testing.T) {
	for _, v := range table {
		r, read := ReadBySource(v.Name)
		switch {
		case !Governed(v.Name):
			continue
		case v.Status == Nonexistent && read:
			t.Errorf("%s is called invented, yet %s reads it", v.Name, r.Source)
		case v.Status == Nonexistent:
		case !read:
			t.Errorf("%s (%s) is read by no NCCL release %s-%s and is not in envvars/gen/torch.txt", v.Name, v.Status, ncclFirstScanned, ncclLastScanned)
		case v.Owner == "nccl" && v.Status == Removed && r.Current:
			t.Errorf("%s is called removed, yet NCCL %s still reads it (%s)", v.Name, ncclLastScanned, r.Source)
		case v.Owner == "nccl" && v.Status == Deprecated && v.ReplacedBy != "":
			// Renamed: the old name may or may not still be read; either
			// way the advice is the new name.
		case v.Owner == "nccl" && v.Status != Removed && !r.Current:
			t.Errorf("%s is %s, yet only NCCL %s to %s read it", v.Name, v.Status, r.First, r.Last)
		}
	}
}

// Only a name no release reads is unknown.
func TestLookupFallsBackToSources(t *testing.T) {
	if _, ok := Lookup("NCCL_TOTALLY_MADE_UP_42"); ok {
		t.Error("a made-up name is known")
	}
	v, ok := Lookup("NCCL_WORK_FIFO_DEPTH")
	if !ok || v.Status != Removed || !v.Generated || !strings.Contains(v.Advice, "2.21.5") {
		t.Errorf("NCCL_WORK_FIFO_DEPTH: %+v", v)
	}
	if v, _ := Lookup("NCCL_TOPO_FILE"); v.Status != Undocumented || v.Suggestible() != true {
		t.Errorf("NCCL_TOPO_FILE: %+v", v)
	}
}
