package explain

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Issue 15, classes 7 and 4: logs that just stop (init-hang,
// collective-hang) and facts that hosts or ranks print differently
// (hosts-disagree, nccl-version-mismatch, collective-desync). Formats are
// NCCL's and PyTorch's at the versions each log names; hosts, numbers and
// surroundings are ours (labels name the thread each is modelled on).
var hostsCorpus = map[string]corpusCase{
	"hang-init-bootstrap-nccl24.log": {conf: Medium, rank: -2, version: "2.4.8+cuda10.1",
		check: hangStop("bootstrap", true, nil, nil)},
	"hang-init-p2p-pending-nccl27.log": {conf: Medium, rank: -2, version: "2.7.8+cuda11.0",
		check: all(hangStop("connecting", false, []int{1}, nil), suspects("rank-behind", "p2p-acs-iommu"),
			advises("NCCL_P2P_DISABLE=1", "--only host.pcie"))},
	"hang-init-connecting-ranks": {conf: Medium, rank: -2, version: "2.18.5+cuda12.2",
		check: all(hangStop("connecting", false, []int{0, 2}, nil), suspects("ib", "p2p-acs-iommu"), notSuspects("socket-interface"))},
	"hang-after-init-ctrlc-torch.log": {conf: Medium, rank: -2, first: "python-exception",
		check: all(hangStop("after-init", true, nil, nil), field("interrupted_in", "all_reduce"), suspects("p2p-acs-iommu"))},
	"hang-nccl-tests-header.log": {conf: Low, rank: -2,
		check: all(hangStop("after-init", false, nil, nil), suspects("ib"), notSuspects("p2p-acs-iommu"))},
	"hang-first-collective-opcount.log": {conf: Low, rank: -2,
		check: all(hangStop("collective", false, nil, nil), evidenceHas("AllReduce: opCount 0"))},
	"hang-socket-docker0-srun.log": {conf: Medium, rank: -2,
		check: all(hangStop("connecting", true, []int{0, 1}, nil), suspects("socket-interface"), advises("NCCL_SOCKET_IFNAME", "--only net.interfaces"))},
	"hang-missing-rank-pdsh.log": {conf: Medium, rank: -2,
		check: all(hangStop("topology", false, []int{0, 1, 2}, []int{3}), suspects("rank-missing", "ib"))},
	"hang-nvls-connect.log": {conf: Medium, rank: -2,
		check: all(hangStop("connecting", true, []int{0, 3}, nil), suspects("nvls", "p2p-acs-iommu"), notSuspects("collnet"), advises("NCCL_NVLS_ENABLE=0"))},
	"hang-shm-container.log": {conf: Medium, rank: -2,
		check: all(hangStop("connecting", true, []int{0, 1}, nil), suspects("shm"), notSuspects("p2p-acs-iommu"), advises("NCCL_SHM_DISABLE=1"))},
	"hang-ib-nogdr-nccl229.log": {conf: Low, rank: -2, version: "2.29.2+cuda12.9",
		check: all(hangStop("connecting", false, []int{0, 1}, nil), suspects("ib"), advises("without GPU Direct RDMA", "NCCL_IB_DISABLE=1"))},

	"hosts-network-ib-vs-socket": {conf: Medium, rank: -2, has: []string{idInitHang},
		check: disagree("network", "IBext_v8", "h100-04", "Socket", "h100-11")},
	"hosts-version-mixed-truncated.log": {conf: Medium, rank: -2, has: []string{"socket-msg-truncated"},
		check: disagree("nccl-version", "2.18.3+cuda12.1", "node-a", "2.21.5+cuda12.4", "node-b")},
	"hosts-subnet-peer-closed": {conf: Medium, rank: -2, has: []string{"peer-closed"},
		check: disagree("interface-subnet", "192.168.0.0/16 (enp1s0)", "w0", "10.8.0.0/16 (eno2)", "w1")},
	"hosts-nranks-differ.log": {conf: Medium, rank: -2, has: []string{idInitHang},
		check: disagree("nranks", "4", "node1", "8", "node2")},
	"hosts-env-one-host-watchdog": {conf: Medium, rank: -2, has: []string{"watchdog-timeout"},
		check: disagree("env:NCCL_PROTO", "Simple", "sx-a", "(not set)", "sx-b")},
	"hosts-version-stops.log": {conf: Medium, rank: -2, has: []string{idInitHang},
		check: all(disagree("nccl-version", "2.14.3+cuda11.7", "node-x", "2.19.3+cuda12.3", "node-y"), hangSuspect("mixed-versions"))},

	// Init stops; one host's GPUs use SHM where the other's use P2P: a
	// hint next to the hang, not its root.
	"hosts-transport-p2p-vs-shm": {conf: Medium, rank: -2, has: []string{idHostsDisagree},
		check: all(hangStop("connecting", false, []int{0, 1, 2, 3}, nil), func(t *testing.T, r *Report) {
			for _, d := range r.Diagnoses {
				if d.ID == idHostsDisagree && (d.Confidence != Low || len(d.Disagreements) != 1 || d.Disagreements[0].Fact != "transport") {
					t.Errorf("hosts-disagree = %s %+v", d.Confidence, d.Disagreements)
				}
			}
		})},
	"desync-optype-watchdog.log": {conf: Medium, rank: -2, has: []string{"watchdog-timeout", "nccl-async-teardown"},
		check: disagree("collective", "ALLREDUCE NumelIn=8388608 NumelOut=8388608", "rank 0", "BROADCAST NumelIn=1 NumelOut=1", "rank 2")},
	"desync-numel-pg": {conf: Medium, rank: -2, has: []string{"watchdog-timeout", "barrier-device-unknown"},
		check: all(disagree("collective", "ALLREDUCE NumelIn=195812480 NumelOut=195812480", "rank 0", "ALLREDUCE NumelIn=51123456 NumelOut=51123456", "rank 1"), field("pg", "0"))},
	"desync-detail-mismatch.log": {conf: High, rank: 1,
		check: all(field("op", "ALLREDUCE"), field("seq", "812"))},

	// Must not be called a hang or a disagreement.
	"healthy-cut-mid-training.log":    {rank: -2},
	"hosts-identical-healthy":         {rank: -2},
	"healthy-nccl-tests-complete.log": {rank: -2},
	"healthy-exit-no-destroy.log":     {rank: -2},
	// An excerpt (no version or bootstrap line) that ends after init on
	// NCCL 2.4–2.8's "Launch mode": the first collective was launched.
	"hang-launch-mode-excerpt.log": {conf: Low, rank: -2, check: hangStop("collective", false, nil, nil)},
}

func TestCorpusHangsHosts(t *testing.T) { runCorpusCases(t, hostsCorpus) }

// hangDiag is the init-hang or collective-hang diagnosis, root or not.
func hangDiag(r *Report) *Diagnosis {
	for i := range r.Diagnoses {
		if id := r.Diagnoses[i].ID; id == idInitHang || id == idCollectiveHang {
			return &r.Diagnoses[i]
		}
	}
	return nil
}

func hangStop(stage string, interrupted bool, pending, missing []int) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		t.Helper()
		d := hangDiag(r)
		if d == nil || d.Stop == nil {
			t.Fatalf("no hang diagnosis with a stop: %v", diagIDs(r))
		}
		s := d.Stop
		if s.Stage != stage || s.Interrupted != interrupted || !slices.Equal(s.PendingRanks, pending) || !slices.Equal(s.MissingRanks, missing) {
			t.Errorf("stop = %+v, want stage %s interrupted %v pending %v missing %v", *s, stage, interrupted, pending, missing)
		}
		if !d.Inferred || d.Confidence == High || len(d.Evidence) == 0 || len(s.LastLines) == 0 {
			t.Errorf("hang diagnosis: inferred %v confidence %s evidence %d", d.Inferred, d.Confidence, len(d.Evidence))
		}
		for _, sp := range d.Suspects {
			if sp.Command == "" || sp.Why == "" {
				t.Errorf("suspect without command or reason: %+v", sp)
			}
		}
	}
}

func suspectIDs(r *Report) []string {
	var ids []string
	if d := hangDiag(r); d != nil {
		for _, s := range d.Suspects {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

func suspects(ids ...string) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		t.Helper()
		got := suspectIDs(r)
		for _, id := range ids {
			if !slices.Contains(got, id) {
				t.Errorf("suspect %s missing (have %v)", id, got)
			}
		}
	}
}

func hangSuspect(id string) func(*testing.T, *Report) { return suspects(id) }

func notSuspects(ids ...string) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		t.Helper()
		got := suspectIDs(r)
		for _, id := range ids {
			if slices.Contains(got, id) {
				t.Errorf("unexpected suspect %s (have %v)", id, got)
			}
		}
	}
}

// advises: the hang diagnosis's suspects name these commands.
func advises(subs ...string) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		t.Helper()
		d := hangDiag(r)
		if d == nil {
			t.Fatal("no hang diagnosis")
		}
		var text strings.Builder
		for _, s := range d.Suspects {
			text.WriteString(s.Why + " " + s.Command + "\n")
		}
		for _, sub := range subs {
			if !strings.Contains(text.String(), sub) {
				t.Errorf("suspects do not mention %q:\n%s", sub, text.String())
			}
		}
	}
}

func field(k, v string) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		t.Helper()
		for _, d := range r.Diagnoses {
			if d.Fields[k] == v {
				return
			}
		}
		t.Errorf("no diagnosis has %s=%s", k, v)
	}
}

func evidenceHas(sub string) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		t.Helper()
		for _, ev := range rootOf(r).Evidence {
			if strings.Contains(ev.Text, sub) {
				return
			}
		}
		t.Errorf("root evidence lacks %q", sub)
	}
}

// disagree: the root carries the disagreement on fact with both sides
// (value a seen on where a, value b on where b) and evidence lines.
func disagree(fact, a, whereA, b, whereB string) func(*testing.T, *Report) {
	return func(t *testing.T, r *Report) {
		t.Helper()
		root := rootOf(r)
		if root == nil {
			t.Fatal("no root")
		}
		for _, d := range root.Disagreements {
			if d.Fact != fact {
				continue
			}
			has := func(v, w string) bool {
				for _, x := range d.Values {
					if x.Value == v && slices.Contains(x.Where, w) {
						return true
					}
				}
				return false
			}
			if !has(a, whereA) || !has(b, whereB) {
				t.Errorf("%s values = %+v, want %s on %s and %s on %s", fact, d.Values, a, whereA, b, whereB)
			}
			return
		}
		t.Errorf("root %s has no %s disagreement: %+v", root.ID, fact, root.Disagreements)
	}
}

// Every variable the new diagnoses tell users to set is a real, current
// one (envvars), and every check they name exists in the guides' checks.
func TestHangsHostsAdviceNamesRealVariables(t *testing.T) {
	e := testExplainer(t)
	for name := range hostsCorpus {
		r := analyzeCorpus(t, e, filepath.Join("testdata", "corpus", name))
		var texts []string
		for _, d := range r.Diagnoses {
			texts = append(texts, d.Explanation)
			texts = append(texts, d.Advice...)
			for _, s := range d.Suspects {
				texts = append(texts, s.Why, s.Command)
				if s.Guide != "" {
					if _, ok := e.Library().Get(s.Guide, ""); !ok {
						t.Errorf("%s: suspect %s names guide %s, which does not exist", name, s.ID, s.Guide)
					}
				}
			}
		}
		checkVarsSuggestible(t, texts)
		for _, s := range texts {
			for _, m := range reOnlyCheck.FindAllStringSubmatch(s, -1) {
				for _, id := range strings.Split(m[1], ",") {
					if !knownCheckIDs[id] {
						t.Errorf("%s: advice names check %s: %q", name, id, s)
					}
				}
			}
		}
	}
}

var reOnlyCheck = regexp.MustCompile("--only ([a-z0-9.,-]+)")

// knownCheckIDs are the ids `ncclwiz check --list-checks` prints (the
// explain package cannot import checks/all; the guides tests hold the
// registry to the same list).
var knownCheckIDs = map[string]bool{"shm.mount": true, "shm.segments": true, "host.container": true, "host.ipc": true,
	"env.nccl": true, "proc.ranks": true, "gpu.inventory": true, "gpu.processes": true, "gpu.topology": true,
	"gpu.visible": true, "gpu.fabric": true, "nccl.stack": true, "net.interfaces": true, "net.rendezvous": true,
	"net.rdma": true, "host.pcie": true}
