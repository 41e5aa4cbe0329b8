package validate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Transport lines verbatim from the reports cited in reference §5, plus
// the older and newer forms it lists.
func TestTransportLines(t *testing.T) {
	cases := []struct{ line, class, via string }{
		{"user:16905:16951 [6] NCCL INFO Channel 00/0 : 6[6] -> 5[5] via P2P/IPC/read", "P2P", "P2P/IPC/read"},
		{"ubuntu:39964:40049 [5] NCCL INFO Channel 20 : 5[5] -> 4[4] via SHM/direct/direct", "SHM", "SHM/direct/direct"},
		{"g148:14937:69361 [0] NCCL INFO Channel 01/1 : 0[0] -> 8[0] [send] via NET/IB/9/GDRDMA/Shared", "NET/IB", "NET/IB/9/GDRDMA/Shared"},
		{"[0] node0:13571:13571 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0", "NET/Socket", "NET/Socket/0"},
		{"[rank3]:gpu1:77:90 [3] NCCL INFO Channel 02/0 : 3[3] -> 0[0] via P2P/CUMEM/read", "P2P", "P2P/CUMEM/read"},
		{"host:1:2 [0] NCCL INFO Ring 00 : 0[21000] -> 1[22000] via direct shared memory", "SHM", "direct shared memory"},
		{"host:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct", "SHM", "SHM/direct"},
		{"host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer/read", "P2P", "P2P/direct pointer/read"},
		{"host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] [receive] via NET/AWS Libfabric/0/GDRDMA\r", "NET", "NET/AWS Libfabric/0/GDRDMA"},
	}
	for _, c := range cases {
		p := newParser(2)
		evs := p.line(c.line)
		ts := p.transportsOut()
		if len(ts) != 1 || ts[0].Class != c.class || ts[0].Via != c.via {
			t.Errorf("%q: got %+v, want %s %q", c.line, ts, c.class, c.via)
		}
		if len(evs) != 1 || evs[0].Kind != EventTransport {
			t.Errorf("%q: first line of a class must emit one transport event, got %+v", c.line, evs)
		}
		if evs := p.line(c.line); len(evs) != 0 {
			t.Errorf("a repeated class must not emit again: %+v", evs)
		}
	}
	for _, neg := range []string{
		"host:1:2 [0] NCCL INFO Connected all rings",
		"host:1:2 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0",
		"Channel 00/0 : 6[6] -> 5[5] via",
	} {
		p := newParser(2)
		p.line(neg)
		if len(p.transportsOut()) != 0 {
			t.Errorf("%q must not count as a transport line", neg)
		}
	}
}

func TestTransportsOrderedByConnections(t *testing.T) {
	p := newParser(2)
	p.line("h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct")
	for i := 0; i < 3; i++ {
		p.line("h:1:2 [0] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/IPC")
	}
	p.line("h:1:2 [0] NCCL INFO Channel 02/0 : 1[1] -> 0[0] via P2P/IPC/read")
	ts := p.transportsOut()
	if len(ts) != 2 || ts[0].Class != "P2P" || ts[0].Connections != 4 || ts[0].Via != "P2P/IPC" || ts[1].Class != "SHM" {
		t.Fatalf("%+v", ts)
	}
	if got := effectiveTransport(ts); got != "SHM" {
		t.Errorf("the slowest class bounds a ring: got %s", got)
	}
}

// nccl-tests table rows and footers (reference §6.1): v2.19 rows, "N/A"
// when validation is off, the very old float "error" column, %e numbers.
func TestNCCLTestsTable(t *testing.T) {
	p := newParser(8)
	lines := []string{
		"# nccl-tests version 2.19.6 nccl-headers=22105 nccl-library=22105",
		"# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0",
		"#  Rank  0 Group  0 Pid  65234 on      gpu49 device  0 [0000:0a:00] NVIDIA H200",
		"#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
		"           8             2     float     sum      -1    17.48    0.00    0.00      0    17.20    0.00    0.00      0",
		"gpu49:65234:65240 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM/read",
		"  1073741824     268435456     float     sum      -1   9306.7  115.37  115.37      0   9291.5  115.56  115.56      0",
		"  2147483648     536870912     float     sum      -1  1.8e+04  116.00  117.25      2  1.8e+04  116.00  117.00      1",
		"# Out of bounds values : 3 FAILED",
		"# Avg bus bandwidth    : 115.8 ",
		"#",
		"# Collective test concluded: all_reduce_perf",
	}
	var measures int
	for _, l := range lines {
		for _, e := range p.line(l) {
			if e.Kind == EventMeasure {
				measures++
			}
		}
	}
	sizes := p.sizesOut()
	if len(sizes) != 3 || measures != 3 {
		t.Fatalf("sizes %+v, events %d", sizes, measures)
	}
	big := sizes[1]
	if big.Bytes != 1073741824 || big.BusBW != 115.56 || !big.OK || !big.Checked || big.Wrong != 0 {
		t.Errorf("row: %+v", big)
	}
	if s := sizes[2]; s.Wrong != 3 || s.OK || s.BusBW != 117.25 || s.TimeUS != 1.8e4 {
		t.Errorf("row with wrong values: %+v", s)
	}
	if p.oob == nil || *p.oob != 3 || !p.hasAvg || p.avgBW != 115.8 {
		t.Errorf("footer: oob %v avg %v %v", p.oob, p.hasAvg, p.avgBW)
	}

	q := newParser(2)
	q.line("           8             2     float     sum      -1    17.48    0.00    0.00    N/A    17.20    0.00    0.00    N/A")
	q.line("        1024           256     float     sum      -1    20.50    0.05    0.05  0e+00    20.10    0.05    0.05  0e+00")
	q.line("# Avg bus bandwidth    : nan ")
	s := q.sizesOut()
	if s[0].Checked || s[0].OK {
		t.Errorf("N/A must mean unchecked: %+v", s[0])
	}
	if !s[1].Checked || !s[1].OK {
		t.Errorf("old float error column: %+v", s[1])
	}
	if q.hasAvg {
		t.Error("nan is no average")
	}
}

func TestNCCLTestsFailureLines(t *testing.T) {
	p := newParser(2)
	p.line("gpu49: Test NCCL failure common.cu:1279 'unhandled system error (run with NCCL_DEBUG=INFO for details) / Error while attaching to shared memory segment /dev/shm/nccl- (size 0)'")
	p.line(" .. gpu49 pid 123: Test failure common.cu:1090")
	p.line("gpu49: Test CUDA failure common.cu:941 'system not yet initialized'")
	p.line("gpu49: Test timeout (30s) common.cu:523")
	if !p.testFailed || len(p.errors) != 3 {
		t.Fatalf("%v %q", p.testFailed, p.errors)
	}
	if !strings.HasPrefix(p.errors[0], "The nccl-tests backend failed at common.cu:1279 (NCCL error: unhandled system error") {
		t.Errorf("%q", p.errors[0])
	}
}

// all_reduce_perf -J output (src/util.cu): doubles may be "nan", booleans
// are strings, nwrong is null without validation.
func TestNCCLTestsJSON(t *testing.T) {
	doc := `{"version":3,"nccl_version":22105,"config":{"ngpus":2},"results":[
	{"size":8,"count":2,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":17.5,"alg_bw":0.0,"bus_bw":"nan","nwrong":0.000000},"in_place":{"time":17.2,"alg_bw":0.0,"bus_bw":0.0,"nwrong":0.000000},"actual_iterations":20,"experiment_name":""},
	{"size":268435456,"count":67108864,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":1135.9,"alg_bw":236.3,"bus_bw":413.5,"nwrong":2.000000},"in_place":{"time":1130.0,"alg_bw":237.0,"bus_bw":414.0,"nwrong":null},"actual_iterations":20,"experiment_name":""}],
	"out_of_bounds":{"count":2,"okay":"false"},"average_bus_bandwidth":{"bandwidth":206.75,"okay":"unchecked"}}`
	path := filepath.Join(t.TempDir(), "o.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	rows, oob, avg, err := parseNCCLTestsJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || oob == nil || *oob != 2 || avg == nil || *avg != 206.75 {
		t.Fatalf("%+v %v %v", rows, oob, avg)
	}
	if r := rows[0]; !r.OK || !r.Checked || !r.HasBW || r.BusBW != 0 {
		t.Errorf("small row: %+v", r)
	}
	if r := rows[1]; r.OK || r.Checked || r.Wrong != 2 || r.BusBW != 414 || r.TimeUS != 1135.9 {
		t.Errorf("large row (null nwrong = unchecked): %+v", r)
	}
	if err := os.WriteFile(path, []byte(`{"results":[{"size":"x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := parseNCCLTestsJSON(path); err == nil {
		t.Error("malformed JSON must be an error")
	}
}

func TestParseScriptLine(t *testing.T) {
	line := `NCCLWIZ_RESULT {"algbw": 1.5, "busbw": 2.625, "bytes": 1024, "count": 256, "dtype": "float32", "iters": 20, "kind": "result", "ok": true, "op": "all_reduce", "rank": 3, "time_us": 12.5, "v": 1, "wrong": 0}`
	for _, prefix := range []string{"", "[rank3]:", "[default3]:", "2025-01-01 "} {
		s, ok, err := ParseScriptLine(prefix + line)
		if !ok || err != nil || s.Kind != "result" || s.Rank != 3 || s.Bytes != 1024 || s.BusBW != 2.625 || s.OK == nil || !*s.OK {
			t.Errorf("%q: %+v %v %v", prefix, s, ok, err)
		}
	}
	if _, ok, _ := ParseScriptLine("NCCL INFO something"); ok {
		t.Error("not a result line")
	}
	if _, ok, err := ParseScriptLine(`NCCLWIZ_RESULT {"kind": "result", "v": 1, "ok": tru`); !ok || err == nil {
		t.Error("a truncated line must be reported as malformed")
	}
	if _, _, err := ParseScriptLine(`NCCLWIZ_RESULT {"kind": "result", "v": 2}`); err == nil {
		t.Error("an unknown schema must be rejected")
	}
}

// Per-rank lines are merged per size: the slowest rank's bandwidth, the sum
// of wrong values; a measurement event only once every rank reported.
func TestScriptAggregation(t *testing.T) {
	p := newParser(2)
	mk := func(rank int, bus float64, ok bool, wrong int) string {
		o := "true"
		if !ok {
			o = "false"
		}
		return `[rank0]:NCCLWIZ_RESULT {"algbw": 100, "busbw": ` + trimFloat(bus) + `, "bytes": 268435456, "kind": "result", "ok": ` + o +
			`, "op": "all_reduce", "rank": ` + trimFloat(float64(rank)) + `, "time_us": 10, "v": 1, "wrong": ` + trimFloat(float64(wrong)) + `}`
	}
	if evs := p.line(mk(0, 400, true, 0)); len(evs) != 0 {
		t.Errorf("one of two ranks: no event yet, got %+v", evs)
	}
	p.line(mk(0, 1, true, 0)) // a duplicate of rank 0 counts once
	evs := p.line(mk(1, 380, false, 5))
	if len(evs) != 2 || evs[0].Kind != EventLog || evs[0].Text != "rank 1: 5 WRONG values in all_reduce at 256 MiB" ||
		evs[1].Kind != EventMeasure || evs[1].Size.BusBW != 380 || evs[1].Size.Wrong != 5 || evs[1].Size.OK {
		t.Fatalf("%+v", evs)
	}
	p.line(`NCCLWIZ_RESULT {"kind": "error", "rank": 1, "stage": "init_process_group", "type": "DistBackendError", "error": "NCCL error\nsecond line", "v": 1}`)
	if len(p.errors) != 1 || p.errors[0] != "rank 1 failed in init_process_group: DistBackendError: NCCL error" {
		t.Errorf("%q", p.errors)
	}
	p.line(`NCCLWIZ_RESULT {"kind": "result", "v": 1, "ok": tru`)
	if p.malformed != 1 {
		t.Error("malformed line not counted")
	}
}

func TestErrorLines(t *testing.T) {
	p := newParser(2)
	lines := []string{
		"\n",
		"[2026-05-22 10:26:17] h:1:2 [7] misc/shmutils.cc:132 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 0), error: No such file or directory (2)",
		"h:1:3 [6] misc/shmutils.cc:132 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 0), error: No such file or directory (2)",
		"[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error",
		"torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
		"  rank      : 3 (local_rank: 3)",
		"  exitcode  : -7 (pid: 5275)",
		"RuntimeError: The server socket has failed to listen on any local network address. (errno: 98 - Address already in use).",
	}
	for _, l := range lines {
		p.line(l)
	}
	want := []string{
		"NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 0), error: No such file or directory (2)",
		"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error",
		"Under the torchrun backend, rank 3 exited with code -7 (SIGBUS), the first observed failure.",
		"RuntimeError: The server socket has failed to listen on any local network address. (errno: 98 - Address already in use).",
	}
	if strings.Join(p.errors, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors (duplicates across ranks folded, ChildFailedError left to the root-cause block):\n%s", strings.Join(p.errors, "\n"))
	}
	if !p.addrInUse {
		t.Error("address in use not noticed")
	}
	for i := 0; i < 50; i++ {
		p.line("h:1:2 [0] NCCL WARN distinct " + trimFloat(float64(i)))
	}
	if len(p.errors) != maxErrors {
		t.Errorf("errors are capped at %d, got %d", maxErrors, len(p.errors))
	}
}

func TestReadLines(t *testing.T) {
	huge := strings.Repeat("x", 3*maxLine)
	in := "a\r\n" + huge + "\nb\n\x1b[31mred\nlast-without-newline"
	var got []string
	readLines(strings.NewReader(in), func(s string) { got = append(got, s) })
	if len(got) != 5 || got[0] != "a" || len(got[1]) != maxLine || got[2] != "b" || got[3] != "\x1b[31mred" || got[4] != "last-without-newline" {
		t.Fatalf("%d lines: %q", len(got), got[0])
	}
}

func FuzzParserLine(f *testing.F) {
	for _, s := range []string{
		"user:16905:16951 [6] NCCL INFO Channel 00/0 : 6[6] -> 5[5] via P2P/IPC/read",
		"  1073741824     268435456     float     sum      -1   9306.7  115.37  115.37      0   9291.5  115.56  115.56      0",
		`NCCLWIZ_RESULT {"kind": "result", "v": 1, "op": "all_reduce", "bytes": 8, "ok": true, "rank": 0}`,
		"# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 115.8 ", "  exitcode  : -11 (pid: 1)",
		"h:1:2 [0] NCCL WARN x", "ValueError: y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := newParser(2)
		p.line(s)
		p.line(s)
		_ = p.transportsOut()
		_ = p.sizesOut()
		if len(p.errors) > maxErrors {
			t.Fatal("error cap exceeded")
		}
	})
}

func BenchmarkParserINFOLog(b *testing.B) {
	var lines []string
	for r := 0; r < 8; r++ {
		for c := 0; c < 32; c++ {
			lines = append(lines, "gpu49:1234:1234 ["+trimFloat(float64(r))+"] NCCL INFO Channel "+trimFloat(float64(c))+"/0 : 0[0] -> 1[1] via P2P/IPC/read")
		}
		for i := 0; i < 200; i++ {
			lines = append(lines, "gpu49:1234:1234 [0] NCCL INFO cudaDriverVersion 12040 and some other init chatter")
		}
		lines = append(lines, `NCCLWIZ_RESULT {"algbw": 1.5, "busbw": 2.625, "bytes": 1024, "kind": "result", "ok": true, "op": "all_reduce", "rank": 3, "time_us": 12.5, "v": 1, "wrong": 0}`)
	}
	var n int64
	for _, l := range lines {
		n += int64(len(l)) + 1
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p := newParser(8)
		for _, l := range lines {
			p.line(l)
		}
	}
}
