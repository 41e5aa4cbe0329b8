package explain

import (
	"slices"
	"strings"
	"testing"
)

// Every positive sample line of every signature (guides/testdata) is
// explained by that signature — or, where the reference says a more
// specific signature wins on the same line (fabric-manager-not-ready over
// cuda-init-failure), by that one; negatives never produce it.
func TestGuideSamples(t *testing.T) {
	e := testExplainer(t)
	for _, s := range e.sigs {
		if s.Re == nil {
			continue // a catalogue cause: the catalogue finds its lines
		}
		pos, neg := signatureSamples(t, s.ID)
		if len(pos) == 0 {
			t.Errorf("%s: no sample lines in guides/testdata/signatures", s.ID)
		}
		for _, line := range pos {
			in := line + "\n"
			if launcherOnly[s.ID] {
				// Alone it is no NCCL diagnosis by design; it must show up
				// next to one.
				in = "node1:1:2 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Ab12Cd to 9637892 bytes\n" + in
			}
			r := analyze(t, e, in)
			if explained(e, r, s, line) {
				continue
			}
			t.Errorf("%s: sample not explained: %q\n  diagnoses %v notes %v digest %+v", s.ID, line, diagIDs(r), noteIDs(r), r.Digest)
		}
		for _, line := range neg {
			r := analyze(t, e, line+"\n")
			if slices.Contains(diagIDs(r), s.ID) {
				t.Errorf("%s: negative sample diagnosed: %q", s.ID, line)
			}
		}
	}
}

func explained(e *Explainer, r *Report, s *sigDef, line string) bool {
	if slices.Contains(diagIDs(r), s.ID) || slices.Contains(noteIDs(r), s.ID) {
		return true
	}
	for _, d := range r.Diagnoses {
		for _, also := range d.AlsoMatched {
			if also == s.ID {
				return true
			}
		}
	}
	switch {
	case s == e.transportSig:
		// Context: a transport line feeds the digest.
		return r.Digest != nil && len(r.Digest.Transports) > 0
	case isBenign(line):
		// A benign line must not be a diagnosis; it may be a note.
		return len(r.Diagnoses) == 0
	}
	// A more specific signature (or a catalogue cause: a one-line input)
	// matching the same line took it.
	for _, d := range r.Diagnoses {
		if o := e.byID[d.ID]; o != nil && o.Prec < s.Prec && (o.Re == nil || o.Re.MatchString(line)) {
			return true
		}
	}
	return false
}

func isBenign(line string) bool {
	for _, b := range benign {
		if b.Re.MatchString(line) {
			return true
		}
	}
	return false
}

// The benign lines of reference §1.3 never become diagnoses, alone or in a
// realistic start-up log.
func TestBenignLinesAreNotFailures(t *testing.T) {
	e := testExplainer(t)
	var all []string
	for _, b := range benign {
		if !b.Re.MatchString(b.Sample) {
			t.Errorf("%s: sample does not match its own pattern", b.Name)
		}
		r := analyze(t, e, b.Sample+"\n")
		if len(r.Diagnoses) != 0 {
			t.Errorf("%s: %q diagnosed as %v", b.Name, b.Sample, diagIDs(r))
		}
		all = append(all, b.Sample)
	}
	extra := []string{
		"gpu1:2234:2234 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
		"gpu1:2234:2234 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-net.so",
		"gpu1:2234:2234 [0] NCCL INFO Failed to open libibverbs.so[.1]",
		"[rank0]:[W ProcessGroupNCCL.cpp:1569] Rank 0 using best-guess GPU 0 to perform barrier as devices used by this process are currently unknown.",
		"UserWarning: barrier(): using the device under current context. You can specify `device_id` in `init_process_group` to mute this warning.",
		"node0:1211:1290 [0] NCCL INFO NVLS multicast support is not available on dev 0",
	}
	r := analyze(t, e, strings.Join(append(all, extra...), "\n")+"\n")
	if len(r.Diagnoses) != 0 {
		t.Errorf("benign log diagnosed as %v", diagIDs(r))
	}
	if !strings.Contains(r.Summary, "No NCCL failure") {
		t.Errorf("summary = %q", r.Summary)
	}
}

// A barrier guess becomes a (low-confidence) diagnosis only when the job
// hung or two ranks shared a GPU.
func TestBarrierGuessPromotedOnHang(t *testing.T) {
	e := testExplainer(t)
	barrier := "[rank1]:[W1109 22:19:24.164824990 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 1]  using GPU 1 to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect."
	timeout := "[rank1]:[E1109 22:29:25.000000000 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BARRIER, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600083 milliseconds before timing out."
	r := analyze(t, e, barrier+"\n"+timeout+"\n")
	d := findDiag(r, "barrier-device-unknown")
	if d == nil || d.Confidence != Low || !d.Inferred || d.RootCause {
		t.Fatalf("diagnoses %v, barrier %+v", diagIDs(r), d)
	}
	if root := rootOf(r); root == nil || root.ID != "watchdog-timeout" || root.Watchdog.Verdict != "hang" {
		t.Errorf("root = %+v", root)
	}
}

// Fixed advice and note texts only name variables ncclwiz may suggest.
func TestReportTextsNameSuggestibleVariables(t *testing.T) {
	e := testExplainer(t)
	r := analyze(t, e, strings.Join([]string{
		"NCCL error in: x.cpp:1, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
		"[rank1]:[E1109 22:29:25.0 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, Timeout(ms)=600000) ran for 600083 milliseconds before timing out.",
		"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
		"h:1:1 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct",
		"h:1:1 [0] NCCL INFO NET/Socket : Using [0]virbr0:192.168.122.1<0>",
		"h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
		"h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] [send] via NET/Socket/0",
	}, "\n"))
	var texts []string
	for _, d := range r.Diagnoses {
		texts = append(texts, d.Advice...)
	}
	for _, n := range r.Notes {
		texts = append(texts, n.Text)
	}
	if r.Digest != nil {
		texts = append(texts, r.Digest.Readings...)
	}
	if len(texts) < 5 {
		t.Fatalf("too few texts to check: %q", texts)
	}
	checkVarsSuggestible(t, texts)
}
