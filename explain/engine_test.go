package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ncclwiz/ncclwiz/guides"
)

// miniGuide builds one guide file for a synthetic library.
func miniGuide(id string, checks, fixes []string, sigs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\nid: %s\ntitle: \"Guide %s\"\nsummary: \"Summary of %s.\"\nlang: en\nsignatures:\n", id, id, id)
	for _, s := range sigs {
		b.WriteString(s)
	}
	fmt.Fprintf(&b, "checks: [%s]\nfixes: [%s]\nsources:\n  - \"test\"\n---\n## Symptom\nbody\n", strings.Join(checks, ", "), strings.Join(fixes, ", "))
	return b.String()
}

func sig(id, pattern, role string, fields ...string) string {
	s := fmt.Sprintf("  - id: %s\n    pattern: '%s'\n    role: %s\n", id, strings.ReplaceAll(pattern, "'", "''"), role)
	if len(fields) > 0 {
		s += "    fields: [" + strings.Join(fields, ", ") + "]\n"
	}
	return s
}

// miniLibrary is a small library whose signatures exercise every role.
func miniLibrary(t testing.TB) *guides.Library {
	t.Helper()
	fs := fstest.MapFS{
		"c/en/disk.md": {Data: []byte(miniGuide("disk", []string{"shm.mount"}, []string{"shm.cleanup"},
			sig("disk-full", `disk full at (\S+)`, "cause", "path"),
			sig("disk-weird", `disk weird`, "cause")))},
		"c/en/gpu.md": {Data: []byte(miniGuide("gpu", []string{"gpu.inventory"}, nil,
			sig("gpu-xid", `NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)`, "cause", "pci", "xid")))},
		"c/en/watchdog-timeout.md": {Data: []byte(miniGuide("watchdog-timeout", nil, nil,
			sig("watchdog-timeout", `Watchdog caught collective operation timeout: WorkNCCL\((?:SeqNum=(\d+), )?OpType=(\w+)(?:, NumelIn=(\d+), NumelOut=(\d+))?, Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds before timing out`, "cause", "seq", "op", "numel_in", "numel_out", "timeout_ms", "ran_ms"),
			sig("watchdog-seq-status", `(?i)(?:Timeout at NCCL work: (-?\d+), )?last enqueued NCCL work: (-?\d+), last completed NCCL work: (-?\d+)`, "context", "timeout_seq", "last_enqueued", "last_completed")))},
		"c/en/consequence-errors.md": {Data: []byte(miniGuide("consequence-errors", nil, nil,
			sig("nccl-unhandled-system-error", `unhandled system error|ncclSystemError`, "wrapper"),
			sig("peer-closed", `Connection closed by remote peer (\S+)`, "consequence", "peer")))},
		"c/en/env-deprecated.md": {Data: []byte(miniGuide("env-deprecated", nil, nil,
			sig("deprecated-env-name", `Environment variable (NCCL_\w+) is deprecated; use (TORCH_NCCL_\w+) instead`, "cause", "old", "new")))},
	}
	lib, err := guides.LoadFS(fs, "c")
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

func miniExplainer(t testing.TB) *Explainer {
	t.Helper()
	e, err := New(Options{Library: miniLibrary(t)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestCauseBeatsWrapperAndConsequence(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e, strings.Join([]string{
		"[rank1]: starting",
		"[rank1]:node1:10:11 [1] misc/x.cc:1 NCCL WARN disk full at /dev/shm/nccl-abc",
		"[rank1]: torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
		"[rank0]:node0:20:21 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer node1<4444>",
	}, "\n"))
	if got := diagIDs(r); !slices.Equal(got, []string{"disk-full", "nccl-unhandled-system-error", "peer-closed"}) {
		t.Fatalf("diagnoses = %v", got)
	}
	root := rootOf(r)
	if root == nil || root.ID != "disk-full" || root.Confidence != High || root.Fields["path"] != "/dev/shm/nccl-abc" {
		t.Fatalf("root = %+v", root)
	}
	if root.Evidence[0].Line != 2 || root.Evidence[0].Rank != 1 || root.Evidence[0].Host != "node1" {
		t.Errorf("evidence = %+v", root.Evidence[0])
	}
	if root.Guide != "disk" || !slices.Equal(root.Checks, []string{"shm.mount"}) || !slices.Equal(root.Fixes, []string{"shm.cleanup"}) {
		t.Errorf("routing = %s %v %v", root.Guide, root.Checks, root.Fixes)
	}
	for _, d := range r.Diagnoses[1:] {
		if d.RootCause || d.ConsequenceOf != "disk-full" {
			t.Errorf("%s: root=%v consequence_of=%q", d.ID, d.RootCause, d.ConsequenceOf)
		}
	}
	if r.NCCLVersion != "2.21.5" {
		t.Errorf("version = %q", r.NCCLVersion)
	}
}

// PyTorch's "Last error:" payload is matched against the signatures: the
// real WARN text beats the wrapper, with high confidence.
func TestLastErrorPayload(t *testing.T) {
	e := miniExplainer(t)
	for _, layout := range []string{"next line", "same line", "interleaved"} {
		t.Run(layout, func(t *testing.T) {
			lines := []string{
				"[rank2]: torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
				"[rank2]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
			}
			switch layout {
			case "next line":
				lines = append(lines, "[rank2]: Last error:", "[rank2]: disk full at /x")
			case "same line":
				lines = append(lines, "[rank2]: Last error: disk full at /x")
			case "interleaved":
				lines = append(lines, "[rank2]: Last error:", "[rank5]: step 10 loss 0.1", "[rank2]: disk full at /x")
			}
			r := analyze(t, e, strings.Join(lines, "\n"))
			root := rootOf(r)
			if root == nil || root.ID != "disk-full" || root.Confidence != High {
				t.Fatalf("root = %+v (all %v)", root, diagIDs(r))
			}
			if ev := root.Evidence[0]; !ev.ViaLastError || ev.Rank != 2 {
				t.Errorf("evidence = %+v", ev)
			}
			w := findDiag(r, "nccl-unhandled-system-error")
			if w == nil || w.RootCause || w.Confidence != Medium {
				t.Errorf("wrapper = %+v", w)
			}
		})
	}
}

// A payload no signature knows stays with the wrapper: medium confidence.
func TestUnknownPayloadStaysWithWrapper(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e, "NCCL error in: x.cpp:1, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\nLast error:\nsomething nobody has seen\n")
	root := rootOf(r)
	if root == nil || root.ID != "nccl-unhandled-system-error" || root.Confidence != Medium || root.Fields["last_error"] != "something nobody has seen" {
		t.Fatalf("root = %+v", root)
	}
	// Without any payload the wrapper is low confidence and says how to get one.
	r = analyze(t, e, "NCCL error in: x.cpp:1, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n")
	root = rootOf(r)
	if root == nil || root.Confidence != Low || !strings.Contains(strings.Join(root.Advice, " "), "NCCL_DEBUG=WARN") {
		t.Fatalf("root = %+v", root)
	}
}

// Consequences only: a remote peer's going away is named root (medium,
// the peer's failure, whose log is missing); any other consequence alone
// stays a consequence.
func TestOnlyConsequences(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e, "node0:20:21 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer node1<4444>\n")
	root := rootOf(r)
	if root == nil || root.ID != "peer-closed" || root.Confidence != Medium || len(r.Diagnoses) != 1 {
		t.Fatalf("diagnoses = %+v", r.Diagnoses)
	}
	if !strings.Contains(strings.Join(root.Advice, " "), "node1<4444>") {
		t.Errorf("advice = %q", root.Advice)
	}
	r = analyze(t, e, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n")
	if rootOf(r) != nil {
		t.Fatalf("diagnoses = %+v", r.Diagnoses)
	}
}

// A hardware cause outranks a timeout that other ranks saw while waiting.
func TestTimeoutIsConsequenceOfCause(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e,
		"[rank0]:[E1218 20:27:21.4 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n"+
			"kernel: NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus\n")
	if got := diagIDs(r); !slices.Equal(got, []string{"gpu-xid", "watchdog-timeout"}) {
		t.Fatalf("diagnoses = %v", got)
	}
	if w := findDiag(r, "watchdog-timeout"); w.RootCause || w.ConsequenceOf != "gpu-xid" || w.Watchdog == nil {
		t.Errorf("watchdog = %+v", w)
	}
}

// With timestamps, the earliest cause is the root; without, the more
// specific one.
func TestCauseOrder(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e,
		"[2025-01-01 10:00:05] h:1:2 [0] f.cc:1 NCCL WARN disk weird\n",
		"[2025-01-01 10:00:01] h:3:4 [0] f.cc:1 NCCL WARN NVRM: Xid (PCI:0000:44:00): 79\n")
	if root := rootOf(r); root == nil || root.ID != "gpu-xid" {
		t.Fatalf("root = %v", diagIDs(r))
	}
	if r.EarliestFailure == nil || r.EarliestFailure.File != "rank1.log" || r.EarliestFailure.Signature != "gpu-xid" {
		t.Errorf("earliest = %+v", r.EarliestFailure)
	}
	if r.FirstSignature == nil || r.FirstSignature.ID != "disk-weird" {
		t.Errorf("first signature = %+v", r.FirstSignature)
	}
	// Same guide: the two causes fold into one diagnosis (neither is in
	// the precedence table, so the first seen leads).
	r = analyze(t, e, "disk weird\ndisk full at /y\n")
	if got := diagIDs(r); len(got) != 1 || got[0] != "disk-weird" || !slices.Equal(r.Diagnoses[0].AlsoMatched, []string{"disk-full"}) {
		t.Errorf("diagnoses = %v %+v", got, r.Diagnoses)
	}
}

func TestNonNCCLFailure(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e, strings.Join([]string{
		"[rank0]: epoch 1",
		"[rank1]: Traceback (most recent call last):",
		"[rank1]:   File \"/w/train.py\", line 42, in step",
		"[rank1]:     out = model(x)",
		"[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB",
		"[rank0]: ValueError: later",
	}, "\n"))
	// The cause is named, as not NCCL (issue 15, class 8).
	if got := diagIDs(r); len(got) != 1 || got[0] != "cuda-oom" || !r.Diagnoses[0].NotNCCL || !r.Diagnoses[0].RootCause {
		t.Fatalf("diagnoses = %v", got)
	}
	fe := r.FirstError
	if fe == nil || fe.Kind != "cuda-oom" || fe.Rank != 1 || fe.Line != 5 || !strings.Contains(fe.Frame, "train.py") {
		t.Fatalf("first error = %+v", fe)
	}
	if !strings.Contains(r.Summary, "not NCCL") || !strings.Contains(r.Summary, "No NCCL failure") || !strings.Contains(r.Summary, "rank 1") {
		t.Errorf("summary = %q", r.Summary)
	}
}

// The straggler of a watchdog timeout is the rank that crashed first.
func TestWatchdogStragglerCrashed(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e, strings.Join([]string{
		"[rank1]:[E1218 20:17:00.0 train.py:1] boom",
		"[rank1]: KeyError: 'labels'",
		"[rank0]:[E1218 20:27:21.4 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.",
	}, "\n"))
	// The crash is the root (not NCCL); the timeout follows from it.
	if root := rootOf(r); root == nil || root.ID != "python-exception" || !root.NotNCCL {
		t.Fatalf("root = %+v", root)
	}
	wd := findDiag(r, "watchdog-timeout")
	if wd == nil || wd.Watchdog == nil || wd.ConsequenceOf != "python-exception" {
		t.Fatalf("watchdog diagnosis = %+v", wd)
	}
	if w := wd.Watchdog; w.Verdict != "hang" || !slices.Equal(w.Stragglers, []int{1}) {
		t.Errorf("watchdog = %+v", w)
	}
}

// Notes are not diagnoses; exit status depends on diagnoses only.
func TestWarningsAreNotes(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e, "[W Utils.hpp:135] Warning: Environment variable NCCL_BLOCKING_WAIT is deprecated; use TORCH_NCCL_BLOCKING_WAIT instead (function getCvarInt)\n")
	if len(r.Diagnoses) != 0 || !slices.Equal(noteIDs(r), []string{"deprecated-env-name"}) {
		t.Fatalf("diagnoses %v notes %v", diagIDs(r), noteIDs(r))
	}
	if !strings.Contains(r.Notes[0].Text, "NCCL_BLOCKING_WAIT") {
		t.Errorf("note = %+v", r.Notes[0])
	}
}

// Log text is sanitised and secrets are redacted in every output.
func TestReportIsSanitised(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e, "disk full at /x\x1b]0;pwned\x07 HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 \u202e\n"+
		"Traceback (most recent call last):\nValueError: \x1b[2Jclear token=s3cr3tvalue\n")
	var buf bytes.Buffer
	if err := writeJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, bad := range []string{"\x1b]0", "\x07", "\u202e", "hf_abcdefghij", "s3cr3tvalue", "\x1b[2J"} {
		if strings.Contains(out, bad) {
			t.Errorf("output contains %q", bad)
		}
	}
	if !strings.Contains(out, "[redacted]") {
		t.Error("no redaction marker")
	}
}

func TestJSONSchemaShape(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e, "[rank1]:n:1:2 [1] x.cc:1 NCCL WARN disk full at /p\n")
	var buf bytes.Buffer
	if err := writeJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "diagnoses", "nccl_version", "summary", "inputs"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	d := m["diagnoses"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "title", "confidence", "root_cause", "evidence", "fields", "guide", "checks", "fixes"} {
		if _, ok := d[k]; !ok {
			t.Errorf("diagnosis lacks %q", k)
		}
	}
	ev := d["evidence"].([]any)[0].(map[string]any)
	for _, k := range []string{"file", "line", "text"} {
		if _, ok := ev[k]; !ok {
			t.Errorf("evidence lacks %q", k)
		}
	}
	// No failure: diagnoses is an empty list, not null.
	r = analyze(t, e, "all good\n")
	buf.Reset()
	writeJSON(&buf, r)
	if !strings.Contains(buf.String(), `"diagnoses": []`) {
		t.Errorf("empty diagnoses: %s", buf.String())
	}
}

// Several inputs: file order, per-file line numbers, rank from file name.
func TestMultipleInputs(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e, "a\nb\n", "x\nnode1:9:9 [0] f.cc:2 NCCL WARN disk full at /q\n")
	root := rootOf(r)
	if root == nil || root.Evidence[0].File != "rank1.log" || root.Evidence[0].Line != 2 || root.Evidence[0].Rank != 1 {
		t.Fatalf("root = %+v", root)
	}
	if len(r.Inputs) != 2 || r.Inputs[0].Lines != 2 || r.Inputs[1].Lines != 2 {
		t.Errorf("inputs = %+v", r.Inputs)
	}
}

func TestBadInputs(t *testing.T) {
	e := miniExplainer(t)
	r := analyze(t, e, "")
	if !r.Inputs[0].Empty || !strings.Contains(r.Summary, "empty") {
		t.Errorf("empty: %+v %q", r.Inputs[0], r.Summary)
	}
	bin := bytes.Repeat([]byte{0, 1, 2, 0xff, 0xfe, 0}, 4000)
	r = analyze(t, e, string(bin))
	if !r.Inputs[0].Binary {
		t.Errorf("binary not detected: %+v", r.Inputs[0])
	}
	// A line inside binary data is a string of an executable or a core
	// file, not a log: no diagnosis (issue 15). A text log beside it is
	// still read (NUL holes in a text log: testdata/corpus/nul-holes.log).
	line := "\nnode:1:1 [0] f.cc:1 NCCL WARN disk full at /z\n"
	r = analyze(t, e, string(bin)+line+string(bin))
	if !r.Inputs[0].Binary || len(r.Diagnoses) != 0 || !strings.Contains(r.Summary, "not a text log") {
		t.Errorf("binary input: diagnoses = %v, summary %q", diagIDs(r), r.Summary)
	}
	r = analyze(t, e, string(bin)+line, "text"+line)
	if root := rootOf(r); root == nil || root.ID != "disk-full" {
		t.Errorf("binary beside text: diagnoses = %v", diagIDs(r))
	}
	// An input that cannot be opened is an error.
	_, err := e.Analyze(context.Background(), []Input{{Name: "x", Open: func() (io.ReadCloser, error) { return nil, io.ErrClosedPipe }}})
	if err == nil {
		t.Error("no error for an unopenable input")
	}
	// A corrupt gzip stream: what was read is kept, the error is a warning.
	var gz bytes.Buffer
	gz.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	gz.WriteString("not deflate data at all")
	r = analyze(t, e, gz.String())
	if len(r.Warnings) == 0 {
		t.Errorf("no warning for corrupt gzip: %+v", r.Inputs)
	}
}

func TestEscapesAndProgressBars(t *testing.T) {
	e := miniExplainer(t)
	// A colour code in the middle of the literal, and a \r-redrawn bar.
	r := analyze(t, e, "\x1b[31mdisk \x1b[1mfull\x1b[0m at /c\n 10%|#   |\r 50%|##  |\rdisk weird\r\n")
	d := rootOf(r)
	if d == nil || d.ID != "disk-full" || d.Count != 2 {
		t.Fatalf("diagnoses = %+v", r.Diagnoses)
	}
	if d.Evidence[1].Line != 2 || d.Evidence[1].Text != "disk weird" {
		t.Errorf("evidence = %+v", d.Evidence)
	}
}

// Lines longer than the cap are cut, never fatal; a signature in the kept
// part still matches.
func TestHugeLines(t *testing.T) {
	e, err := New(Options{Library: miniLibrary(t), MaxLineBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	huge := "disk full at /big " + strings.Repeat("A", 5<<20)
	r := analyze(t, e, "first\n"+huge+"\nlast disk weird\n")
	d := rootOf(r)
	if d == nil || d.Count != 2 || !d.Evidence[0].Truncated || d.Evidence[0].Line != 2 || d.Evidence[1].Line != 3 {
		t.Fatalf("diagnoses = %+v", r.Diagnoses)
	}
	if r.Inputs[0].TruncatedLines != 1 || r.Inputs[0].Lines != 3 {
		t.Errorf("inputs = %+v", r.Inputs[0])
	}
	if len(d.Evidence[0].Text) > maxEvidenceText+16 {
		t.Errorf("evidence text is %d bytes", len(d.Evidence[0].Text))
	}
}
