package linetext

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// corpusLines is every line of explain's corpus of real logs.
func corpusLines(t *testing.T) [][]byte {
	t.Helper()
	var lines [][]byte
	err := filepath.WalkDir("../../testdata/corpus", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		lines = append(lines, bytes.Split(data, []byte("\n"))...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) < 500 {
		t.Fatalf("only %d corpus lines", len(lines))
	}
	return lines
}

func TestParseMeta(t *testing.T) {
	tests := []struct {
		line             string
		rank, local, pid int
		host, level, msg string
		launcher         string
		ts               string
		dev              int
	}{
		{line: "[rank3]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught",
			rank: 3, local: -1, level: "E", msg: "[Rank 3] Watchdog caught", launcher: "[rank3]:", ts: "12-18 20:27:21.426", dev: -1},
		{line: "[1,5]<stdout>:node2:4242:4300 [1] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>",
			rank: 5, local: -1, pid: 4242, host: "node2", level: "INFO", msg: "Bootstrap : Using eth0:10.0.0.2<0>", launcher: "[1,5]<stdout>:", dev: 1},
		{line: "(Worker_TP1 pid=2345, ip=10.0.0.7) gpu7:2345:2399 [1] NCCL INFO comm 0x1 rank 1",
			rank: -1, local: -1, pid: 2345, host: "10.0.0.7", level: "INFO", msg: "comm 0x1 rank 1", launcher: "(Worker_TP1 pid=2345, ip=10.0.0.7) ", dev: 1},
		{line: "[default2]:[rank2]: RuntimeError: boom",
			rank: 2, local: 2, msg: "RuntimeError: boom", launcher: "[default2]:[rank2]: ", dev: -1},
		{line: "3: node1:77:78 [3] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer x<1>",
			rank: 3, local: -1, pid: 77, host: "node1", level: "WARN", msg: "socketProgress: Connection closed by remote peer x<1>", launcher: "3: ", dev: 3},
		{line: "worker-1: [rank8]: ValueError: bad",
			rank: 8, local: -1, host: "worker-1", msg: "ValueError: bad", launcher: "worker-1: [rank8]: ", dev: -1},
		{line: "[2025-05-10 23:09:41] bm-h100-02:630335:630409 [2] transport/nvls.cc:254 NCCL WARN Cuda failure 1 'invalid argument'",
			rank: -1, local: -1, pid: 630335, host: "bm-h100-02", level: "WARN", msg: "Cuda failure 1 'invalid argument'", ts: "2025-05-10 23:09:41.000", dev: 2},
		{line: "2024-05-01T12:00:00.250Z [rank0]: hello",
			rank: 0, local: -1, msg: "hello", launcher: "[rank0]: ", ts: "2024-05-01 12:00:00.250", dev: -1},
		{line: "[PG ID 0 PG GUID 0(default_pg) Rank 1] ProcessGroupNCCL's watchdog got stuck",
			rank: 1, local: -1, msg: "[PG ID 0 PG GUID 0(default_pg) Rank 1] ProcessGroupNCCL's watchdog got stuck", dev: -1},
		// NCCL 2.0-2.2 levels without "NCCL" (horovod/horovod#134 layout) and NCCL 1.x WARN (v1.3.4-1 src/core.h).
		{line: "[1,0]<stdout>:dgx3:4308:4454 [0] INFO NET : Using interface ib0:10.0.30.14<0>",
			rank: 0, local: -1, pid: 4308, host: "dgx3", level: "INFO", msg: "NET : Using interface ib0:10.0.30.14<0>", launcher: "[1,0]<stdout>:", dev: 0},
		{line: "dgx3:4308:4454 [1] misc/ibvwrap.cu:61 WARN Failed to open libibverbs.so[.1]",
			rank: -1, local: -1, pid: 4308, host: "dgx3", level: "WARN", msg: "Failed to open libibverbs.so[.1]", dev: 1},
		{line: "WARN src/core.cu:47 ftruncate failed to allocate 1048576 bytes",
			rank: -1, local: -1, level: "WARN", msg: "ftruncate failed to allocate 1048576 bytes", dev: -1},
		// Ray's task prefix without an actor name, an actor's own repr with
		// its rank, a field after the ip (Ray's logging docs).
		{line: "(pid=48213) [rank1]: ValueError: bad", rank: 1, local: -1, pid: 48213, msg: "ValueError: bad", launcher: "(pid=48213) [rank1]: ", dev: -1},
		{line: "(TrainWorker(rank=3) pid=9127) loss 2.1", rank: 3, local: -1, pid: 9127, msg: "loss 2.1", launcher: "(TrainWorker(rank=3) pid=9127) ", dev: -1},
		{line: "(RayTrainWorker pid=77, ip=10.2.0.9, rank=5) boom", rank: 5, local: -1, pid: 77, host: "10.2.0.9", msg: "boom", launcher: "(RayTrainWorker pid=77, ip=10.2.0.9, rank=5) ", dev: -1},
		// docker compose's service column; Lightning's rank_prefixed_message.
		{line: "trainer-1  | RuntimeError: boom", rank: -1, local: -1, msg: "RuntimeError: boom", launcher: "trainer-1  | ", dev: -1},
		{line: "[rank: 2] Child process with PID 61207 terminated with code -9.", rank: 2, local: -1, msg: "[rank: 2] Child process with PID 61207 terminated with code -9.", dev: -1},
		// Not prefixes: an exception name, a log level, a bare word.
		{line: "INFO starting epoch 3", rank: -1, local: -1, msg: "INFO starting epoch 3", dev: -1},
		{line: "WARN disk almost full", rank: -1, local: -1, msg: "WARN disk almost full", dev: -1},
		{line: "RuntimeError: NCCL error", rank: -1, local: -1, msg: "RuntimeError: NCCL error", dev: -1},
		{line: "ERROR: something", rank: -1, local: -1, msg: "ERROR: something", dev: -1},
		{line: "torch.distributed.DistBackendError: NCCL error", rank: -1, local: -1, msg: "torch.distributed.DistBackendError: NCCL error", dev: -1},
	}
	for _, tt := range tests {
		m := Parse([]byte(tt.line))
		if m.Rank != tt.rank || m.LocalRank != tt.local || m.PID != tt.pid || m.Host != tt.host || m.Level != tt.level ||
			string(m.Msg) != tt.msg || m.Launcher != tt.launcher || m.TS.String() != tt.ts || m.Dev != tt.dev {
			t.Errorf("%q:\n got rank=%d local=%d pid=%d host=%q level=%q dev=%d ts=%q launcher=%q msg=%q\nwant rank=%d local=%d pid=%d host=%q level=%q dev=%d ts=%q launcher=%q msg=%q",
				tt.line, m.Rank, m.LocalRank, m.PID, m.Host, m.Level, m.Dev, m.TS.String(), m.Launcher, m.Msg,
				tt.rank, tt.local, tt.pid, tt.host, tt.level, tt.dev, tt.ts, tt.launcher, tt.msg)
		}
	}
}

func TestStampOrder(t *testing.T) {
	a := Parse([]byte("[rank0]:[E1218 20:27:21.4 File.cpp:1] x")).TS
	b := Parse([]byte("[2025-12-18 20:27:22] h:1:2 [0] f.cc:1 NCCL WARN y")).TS
	if !a.OK || !b.OK || !a.Before(b) || b.Before(a) {
		t.Errorf("a=%+v b=%+v", a, b)
	}
	if bad := mkStamp(0, 13, 1, 0, 0, 0); bad.OK {
		t.Error("month 13 accepted")
	}
}

func TestMessage(t *testing.T) {
	for in, want := range map[string]string{
		"[rank0]:[E1122 03:12:40.101223871 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout": "[Rank 0] Watchdog caught collective operation timeout",
		"node1:1234:1290 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Ab to 9637892 bytes":       "Error: failed to extend /dev/shm/nccl-Ab to 9637892 bytes",
		"plain text": "plain text",
		"[rank3]: ":  "[rank3]: ",
		"":           "",
	} {
		if got := Message(in); got != want {
			t.Errorf("Message(%q) = %q, want %q", in, got, want)
		}
	}
}

// A worker's packed parse of a line's prefixes gives the consumer the same
// meta as parsing the line there.
func TestPackedMetaIsParseMeta(t *testing.T) {
	lines := corpusLines(t)
	var c StrCache
	packed := 0
	for _, l := range lines {
		if len(l) == 0 {
			continue
		}
		r := ParseRaw(l)
		pm, ok := r.Pack(l)
		if !ok {
			continue
		}
		packed++
		if got, want := pm.Meta(l, &c), Parse(l); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: packed %+v, Parse %+v", l, got, want)
		}
	}
	if packed < len(lines)/2 {
		t.Errorf("only %d of %d lines packed", packed, len(lines))
	}
}

// reStreamIndex's hand check before the regexp is exact: on the corpus,
// edge cases and random splices of a stream tag's fragments it gives what
// reStream gives.
func TestStreamIndexAgreesWithRegexp(t *testing.T) {
	lines := append(corpusLines(t), []byte("cn-d004 [stderr] h:1:2 [0] NCCL WARN x"), []byte("cn-d004.x_y [stdout] "),
		[]byte("_cn [stdout] x"), []byte("cn:1 [stdout] x"), []byte("h:1:2 [0] NCCL INFO x"))
	frags := []string{"cn-d004", " [stderr] ", " [stdout]", "a.b-c_d", ":", " ", "[", "x", "_", "\xff"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		var b []byte
		for n := r.IntN(6); n >= 0; n-- {
			b = append(b, frags[r.IntN(len(frags))]...)
		}
		lines = append(lines, b)
	}
	matched := 0
	for _, l := range lines {
		got, want := reStreamIndex(l), reStream.Regexp.FindSubmatchIndex(l)
		if !slices.Equal(got, want) {
			t.Errorf("reStreamIndex(%q) = %v; regexp %v", l, got, want)
		} else if want != nil {
			matched++
		}
	}
	if matched < 20 {
		t.Errorf("only %d matching lines", matched)
	}
}
