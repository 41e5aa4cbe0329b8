package explain

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// The tail keeps the last lines whatever the chunking: compared with
// splitting the whole text.
func TestTailKeeperAcrossChunks(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 300; trial++ {
		nlines := rng.Intn(200)
		var lines []string
		for i := 0; i < nlines; i++ {
			switch rng.Intn(6) {
			case 0:
				lines = append(lines, "")
			case 1:
				lines = append(lines, strings.Repeat("x", tailLineSize+rng.Intn(40)))
			default:
				lines = append(lines, fmt.Sprintf("line %d of trial %d", i, trial))
			}
		}
		text := strings.Join(lines, "\n")
		if rng.Intn(2) == 0 && text != "" {
			text += "\n"
		}
		// Chunks end after a newline (as the chunk reader's do), except
		// the last.
		var tk tailKeeper
		for off := 0; off < len(text); {
			end := off + 1 + rng.Intn(400)
			if end >= len(text) {
				end = len(text)
			} else if j := strings.IndexByte(text[end:], '\n'); j >= 0 {
				end += j + 1
			} else {
				end = len(text)
			}
			tk.add([]byte(text[off:end]))
			off = end
		}
		want := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if text == "" {
			want = nil
		}
		if len(want) > tailLines {
			want = want[len(want)-tailLines:]
		}
		var got []string
		for _, l := range tk.lines {
			got = append(got, string(l))
		}
		for i := range want {
			if len(want[i]) > tailLineSize {
				want[i] = want[i][:tailLineSize]
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) != len(want) {
			t.Fatalf("trial %d: got %d lines, want %d\ngot  %q\nwant %q", trial, len(got), len(want), got, want)
		}
	}
}

func TestProcOfLine(t *testing.T) {
	for _, c := range []struct {
		line, host string
		pid        int
	}{
		{"gpu1:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "gpu1", 123},
		{"[1,5]<stdout>:ip-172-31-12-129:1760:1771 [1] NCCL INFO Channel 01 : 5[1c0] -> 3[1e0] [send] via NET/Socket/0", "ip-172-31-12-129", 1760},
		{"node1: gpu-a:3001:3060 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "gpu-a", 3001},
		{"[rank0]:ws:140301:140377 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM", "ws", 140301},
		{"[2025-01-02 03:04:05] h:1:2 [3] NCCL INFO x", "h", 1},
		{"NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC", "", 0},
		{":1:2 [0] NCCL INFO x", "", 0},
		{"host:abc:2 [0] NCCL INFO x", "", 0},
		{"", "", 0},
	} {
		h, pid := procOfLine([]byte(c.line))
		if string(h) != c.host || pid != c.pid {
			t.Errorf("%q: got %q %d, want %q %d", c.line, h, pid, c.host, c.pid)
		}
	}
}

func TestClassifyEnd(t *testing.T) {
	info := "gpu1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"
	for _, c := range []struct {
		name        string
		lines       []string
		kind        string
		interrupted bool
		frame       string
	}{
		{"nccl last", []string{"hello", info, ""}, endNCCL, false, ""},
		{"progress last", []string{info, "epoch 1 loss 2.3"}, endProgress, false, ""},
		{"noise after nccl", []string{info, "[W1109 22:19:24.16 Foo.cpp:1] some warning", "#  size count"}, endNCCL, false, ""},
		{"ctrl-c traceback", []string{info, "^C", "Traceback (most recent call last):", `  File "t.py", line 3, in <module>`, "    dist.all_reduce(t)", "KeyboardInterrupt"}, endNCCL, true, "all_reduce"},
		{"slurm cancel", []string{info, "slurmstepd: error: *** STEP 1.0 ON n1 CANCELLED AT 2025-01-20T14:32:11 DUE TO TIME LIMIT ***"}, endNCCL, true, ""},
		{"error last", []string{info, "RuntimeError: boom"}, endError, false, ""},
		{"warn last", []string{info, "gpu1:1:2 [0] misc/socket.cc:1 NCCL WARN socketProgress: Connection closed by remote peer"}, endError, false, ""},
		{"destroyed", []string{info, "gpu1:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Destroy COMPLETE"}, endProgress, false, ""},
		{"exit warning", []string{info, "[rank0]:[W1212 16:02:55.77 ProcessGroupNCCL.cpp:1168] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL."}, endProgress, false, ""},
		{"empty", nil, endNone, false, ""},
		{"reporter note", []string{info, "...", "<hangs here forever>"}, endNCCL, false, ""},
		{"elision then progress", []string{info, "...", "epoch 3 step 10"}, endProgress, false, ""},
	} {
		var ls [][]byte
		for _, l := range c.lines {
			ls = append(ls, []byte(l))
		}
		e := classifyEnd("f", ls, 1, nil)
		if e.kind != c.kind || e.interrupted != c.interrupted || e.frame != c.frame {
			t.Errorf("%s: got kind %q interrupted %v frame %q, want %q %v %q", c.name, e.kind, e.interrupted, e.frame, c.kind, c.interrupted, c.frame)
		}
	}
}

// Init lines as NCCL 2.4 … 2.27 print them (src/init.cc at each tag).
func TestParseInitLine(t *testing.T) {
	for _, c := range []struct {
		line         string
		ok, complete bool
		rank, nranks int
	}{
		{"h:1:2 [0] NCCL INFO comm 0x7f3a58000e00 rank 0 nranks 2 cudaDev 0 nvmlDev 0 - Init COMPLETE", true, true, 0, 2},
		{"h:1:2 [1] NCCL INFO comm 0x7f5334002fb0 rank 3 nranks 8 cudaDev 1 busId 51000 - Init COMPLETE", true, true, 3, 8},
		{"h:1:2 [0] NCCL INFO ncclCommInitRank comm 0x5581c3a0 rank 12 nranks 16 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x6d1e2a4f90b1c733 - Init START", true, false, 12, 16},
		{"h:1:2 [1] NCCL INFO ncclCommSplit comm 0x7fe5126331e0 rank 1 nranks 16 cudaDev 1 nvmlDev 1 busId 3b000 parent 0x55cd375 splitCount 1 color 0 key 1- Init START", true, false, 1, 16},
		{"h:1:2 [0] NCCL INFO ncclCommInitRankConfig comm 0x382ac700 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 80 commId 0x99de3aa2a03ab5f7 - Init COMPLETE", true, true, 0, 2},
		{"h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Destroy COMPLETE", false, false, 0, 0},
		{"h:1:2 [0] NCCL INFO comm 0x5633e1a0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0", false, false, 0, 0},
		{"h:1:2 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 0 nranks 2 total 0.51", false, false, 0, 0},
		{"Init COMPLETE", false, false, 0, 0},
		{"comm 0x rank 1 nranks 2 cudaDev 0 - Init START", false, false, 0, 0},
	} {
		il, ok := parseInitLine([]byte(c.line))
		if ok != c.ok || (ok && (il.complete != c.complete || il.rank != c.rank || il.nranks != c.nranks)) {
			t.Errorf("%q: got %+v %v", c.line, il, ok)
		}
	}
}

// Values copied into stop, suspects and disagreements are sanitised like
// the rest of the report.
func TestCrossDiagnosesAreSanitised(t *testing.T) {
	a := "evil\x1b]0;x\x07:10:10 [0] NCCL INFO Bootstrap : Using eth\x1b[31m0:10.0.0.1<0>\n" +
		"evil\x1b]0;x\x07:10:10 [0] NCCL INFO Using network IB\n" +
		"evil\x1b]0;x\x07:10:11 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x2 - Init START\n"
	b := "good:20:20 [0] NCCL INFO Bootstrap : Using eth0:192.168.0.2<0>\n" +
		"good:20:20 [0] NCCL INFO Using network Socket\n" +
		"good:20:21 [0] NCCL INFO comm 0x3 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x2 - Init START\n"
	e := testExplainer(t)
	r, err := e.Analyze(context.Background(), []Input{ReaderInput("a.log", strings.NewReader(a)), ReaderInput("b.log", strings.NewReader(b))})
	if err != nil {
		t.Fatal(err)
	}
	root := rootOf(r)
	if root == nil || root.ID != idHostsDisagree || hangDiag(r) == nil {
		t.Fatalf("diagnoses %v", diagIDs(r))
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(buf.Bytes(), "\x1b\x07") || strings.Contains(buf.String(), `\u001b`) || strings.Contains(buf.String(), `\u0007`) {
		t.Errorf("raw escapes in the report:\n%s", buf.String())
	}
}
