package validate

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// feed builds a parser from torchrun-backend lines: a transport line per
// class and one all_reduce/all_gather result per rank and size.
func feed(ranks int, classes []string, sizes []int64, busbw float64) *parser {
	p := newParser(ranks)
	via := map[string]string{"P2P": "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read", "SHM": "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
		"NET/Socket": "Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0"}
	for _, c := range classes {
		p.line("h:1:2 [0] NCCL INFO " + via[c])
	}
	for _, s := range sizes {
		for _, op := range []string{"all_reduce", "all_gather"} {
			for r := 0; r < ranks; r++ {
				p.line(fmt.Sprintf(`NCCLWIZ_RESULT {"kind": "result", "v": 1, "op": %q, "bytes": %d, "rank": %d, "ok": true, "wrong": 0, "busbw": %g, "algbw": 1, "time_us": 1}`, op, s, r, busbw))
			}
		}
	}
	for r := 0; r < ranks; r++ {
		p.line(fmt.Sprintf(`NCCLWIZ_RESULT {"kind": "done", "v": 1, "rank": %d, "ok": true}`, r))
	}
	return p
}

func judged(id string, ranks int, env []string, snap *Snapshot, p *parser, sizes int) RungResult {
	vis, verr := visibleDevices(snap, "", false)
	rr := RungResult{Rung: Rung{ID: id, Ranks: ranks, Env: env}}
	judge(&rr, judgeInput{backend: BackendTorchrun, sys: buildSystem(snap, vis, verr, ranks), parser: p,
		tolerance: DefaultTolerance, timeout: time.Minute, nSizes: sizes, maxBytes: DefaultMaxBytes, shmDir: "/dev/shm"})
	return rr
}

func TestVerdicts(t *testing.T) {
	full := torchSizes(DefaultMaxBytes)
	small := full[:5]
	consumer := pcieSnapshot(2, "NVIDIA GeForce RTX 4090", 4, 16, "PHB")
	cases := []struct {
		name    string
		id      string
		ranks   int
		env     []string
		snap    *Snapshot
		p       *parser
		status  Status
		bw      string
		reason  string // first reason, or a note for passing rungs
		note    string
		nSizes  int
		special func(*RungResult)
	}{
		{name: "H100 healthy", id: RungAll, ranks: 8, snap: h100(8), p: feed(8, []string{"P2P"}, full, 410), status: Pass, bw: BWOK},
		{name: "H100 at 60 GB/s: NVLink not really used", id: RungAll, ranks: 8, snap: h100(8), p: feed(8, []string{"P2P"}, full, 60),
			status: Fail, bw: BWLow, reason: "bandwidth too low: busbw 60.0 GB/s at 256 MiB is below 185 GB/s, 50% of the low end of 370–480 GB/s"},
		{name: "H100 at 250 GB/s: under typical, passes with a note", id: RungAll, ranks: 8, snap: h100(8), p: feed(8, []string{"P2P"}, full, 250),
			status: Pass, bw: BWBelow, note: "under the typical 370–480 GB/s"},
		{name: "A100 healthy", id: RungAll, ranks: 8, snap: a100(8), p: feed(8, []string{"P2P"}, full, 215), status: Pass, bw: BWOK},
		{name: "PCIe Gen4 healthy", id: RungAll, ranks: 4, snap: pcieSnapshot(4, "NVIDIA L40S", 4, 16, "NODE"), p: feed(4, []string{"P2P"}, full, 22), status: Pass, bw: BWOK},
		{name: "PCIe Gen4 too slow", id: RungAll, ranks: 4, snap: pcieSnapshot(4, "NVIDIA L40S", 4, 16, "NODE"), p: feed(4, []string{"P2P"}, full, 5),
			status: Fail, bw: BWLow, reason: "bandwidth too low"},
		{name: "consumer box on SHM is expected", id: RungAll, ranks: 2, snap: consumer, p: feed(2, []string{"SHM"}, full, 9),
			status: Pass, bw: BWNotJudged, note: "GeForce drivers usually keep P2P off"},
		{name: "NVLink box on SHM with defaults", id: RungAll, ranks: 8, snap: h100(8), p: feed(8, []string{"SHM"}, full, 15),
			status: Fail, bw: BWNotJudged, reason: "NVLink connects these GPUs but NCCL did not use P2P (it used SHM/direct/direct)"},
		{name: "candidate turns P2P off on NVLink: a cost, not a failure", id: RungFix, ranks: 8, env: []string{"NCCL_P2P_DISABLE=1"}, snap: h100(8),
			p: feed(8, []string{"SHM"}, full, 15), status: Pass, bw: BWNotJudged, note: "turns P2P off, so NVLink goes unused"},
		{name: "P2P although disabled", id: RungSHM, ranks: 8, env: []string{"NCCL_P2P_DISABLE=1"}, snap: h100(8), p: feed(8, []string{"P2P"}, full, 400),
			status: Fail, reason: "NCCL used P2P although NCCL_P2P_DISABLE=1"},
		{name: "shm rung without SHM", id: RungSHM, ranks: 8, env: []string{"NCCL_P2P_DISABLE=1"}, snap: h100(8), p: feed(8, []string{"NET/Socket"}, full, 5),
			status: Fail, reason: "no shared-memory connection: NCCL used NET/Socket/0 instead"},
		{name: "net rung on sockets", id: RungNet, ranks: 8, env: []string{"NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1"}, snap: h100(8),
			p: feed(8, []string{"NET/Socket"}, full, 5), status: Pass, bw: BWNotJudged},
		{name: "network on one machine with SHM allowed", id: RungAll, ranks: 2, snap: consumer, p: feed(2, []string{"NET/Socket"}, full, 5),
			status: Fail, reason: "ranks on this one machine connected over the network (NET/Socket)"},
		{name: "no transport lines", id: RungAll, ranks: 8, snap: h100(8), p: feed(8, nil, full, 400),
			status: Fail, reason: "NCCL printed no transport lines"},
		{name: "no large message: bandwidth unproven", id: RungAll, ranks: 8, snap: h100(8), p: feed(8, []string{"P2P"}, small, 400), nSizes: 5,
			status: Fail, bw: BWMissing, reason: "bandwidth unproven: no all_reduce measurement at 64 MiB or more"},
		{name: "sizes missing", id: RungAll, ranks: 8, snap: h100(8), p: feed(8, []string{"P2P"}, full[:7], 400),
			status: Fail, reason: "missing measurements: all_reduce 7 of 8 sizes, all_gather 7 of 8 sizes reported"},
		{name: "one GPU", id: RungSingle, ranks: 1, snap: h100(1), p: feed(1, nil, full, 0), status: Pass, bw: BWNA},
		{name: "unknown GPUs: bandwidth not judged, still passes", id: RungAll, ranks: 8, snap: &Snapshot{State: "unavailable-in-build"},
			p: feed(8, []string{"P2P"}, full, 400), status: Pass, bw: BWNotJudged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := c.nSizes
			if n == 0 {
				n = len(full)
			}
			r := judged(c.id, c.ranks, c.env, c.snap, c.p, n)
			if r.Status != c.status {
				t.Fatalf("status %s, want %s: %v", r.Status, c.status, r.Reasons)
			}
			if c.bw != "" && r.Bandwidth.State != c.bw {
				t.Errorf("bandwidth %+v, want %s", r.Bandwidth, c.bw)
			}
			if c.reason != "" && (len(r.Reasons) == 0 || !strings.HasPrefix(r.Reasons[0], c.reason)) {
				t.Errorf("reasons %q, want first %q", r.Reasons, c.reason)
			}
			if c.note != "" && !hasNote(r.Notes, c.note) {
				t.Errorf("notes %q lack %q", r.Notes, c.note)
			}
		})
	}
}

// nccl-tests' own gates: N/A correctness, out-of-bounds values, no footer.
func TestNCCLTestsVerdicts(t *testing.T) {
	row := "   268435456      67108864     float     sum      -1  1135.96  236.31  413.54      %s  1135.96  236.31  413.54      %s"
	cases := []struct {
		lines  []string
		reason string
	}{
		{[]string{fmt.Sprintf(row, "N/A", "N/A"), "# Out of bounds values : 0 OK"}, "correctness unknown: #wrong is N/A at 256 MiB"},
		{[]string{fmt.Sprintf(row, "0", "0")}, "missing the 'Out of bounds values' summary"},
		{[]string{fmt.Sprintf(row, "0", "0"), "# Out of bounds values : 4 FAILED"}, "nccl-tests counted 4 out-of-bounds"},
		{nil, "missing measurements: all_reduce_perf printed no result rows"},
	}
	for _, c := range cases {
		p := newParser(8)
		p.line("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read")
		for _, l := range c.lines {
			p.line(l)
		}
		vis, _ := visibleDevices(h100(8), "", false)
		rr := RungResult{Rung: Rung{ID: RungAll, Ranks: 8}}
		judge(&rr, judgeInput{backend: BackendNCCLTests, sys: buildSystem(h100(8), vis, "", 8), parser: p, tolerance: 0.5, maxBytes: DefaultMaxBytes})
		if rr.Status != Fail || !hasReason(rr, c.reason) {
			t.Errorf("%v: %s %q", c.lines, rr.Status, rr.Reasons)
		}
	}
}

func TestProcessOutcomes(t *testing.T) {
	p := feed(2, []string{"P2P"}, torchSizes(DefaultMaxBytes), 400)
	vis, _ := visibleDevices(h100(2), "", false)
	in := judgeInput{backend: BackendTorchrun, sys: buildSystem(h100(2), vis, "", 2), parser: p, tolerance: 0.5, timeout: time.Minute, nSizes: 8, maxBytes: DefaultMaxBytes}
	cases := []struct {
		run    procResult
		reason string
	}{
		{procResult{ExitCode: 1}, "the launcher exited with status 1"},
		{procResult{ExitCode: -9, Signal: "SIGKILL"}, "the launcher was killed by SIGKILL"},
		{procResult{Leftover: []Proc{{PID: 42, Comm: "python3"}}}, "could not end 1 process of the run (they may still hold GPUs): 42 python3"},
	}
	for _, c := range cases {
		in.run = c.run
		rr := RungResult{Rung: Rung{ID: RungAll, Ranks: 2}}
		judge(&rr, in)
		if rr.Status != Fail || !hasReason(rr, c.reason) {
			t.Errorf("%+v: %q", c.run, rr.Reasons)
		}
	}
	in.run = procResult{Survivors: []Proc{{PID: 7, Comm: "sleep", Why: "process group"}}}
	rr := RungResult{Rung: Rung{ID: RungAll, Ranks: 2}, LeftoverShm: []ShmEntry{{Name: "nccl-AbC123", Size: 9637892}}}
	judge(&rr, in)
	if rr.Status != Pass || !hasNote(rr.Notes, "7 sleep (process group)") || !hasNote(rr.Notes, "nccl-AbC123 (9.2 MiB)") {
		t.Errorf("hygiene notes: %s %q", rr.Status, rr.Notes)
	}
}

func TestCompareAB(t *testing.T) {
	pass := func(id string, bw float64) RungResult {
		return RungResult{Rung: Rung{ID: id, Ranks: 8}, Status: Pass, HasLarge: true, LargeBusBW: bw, LargeBytes: 256 << 20,
			Transports: []Transport{{Class: "P2P", Via: "P2P/IPC/read"}}}
	}
	fail := func(id string) RungResult {
		return RungResult{Rung: Rung{ID: id, Ranks: 8}, Status: Fail, Reasons: []string{"NCCL WARN boom"}, Errors: []string{"NCCL WARN boom"}}
	}
	cases := []struct {
		base, cand RungResult
		want       string
	}{
		{fail(RungAll), pass(RungFix, 400), "The candidate environment fixes it: without it the all rung fails (NCCL WARN boom)"},
		{pass(RungAll, 400), pass(RungFix, 20), "Both pass. It costs bandwidth: busbw 400.0 GB/s -> 20.0 GB/s (-95%)."},
		{pass(RungAll, 400), pass(RungFix, 410), "Both pass. Bandwidth is about the same"},
		{pass(RungAll, 100), pass(RungFix, 400), "Both pass. It raises bandwidth"},
		{pass(RungAll, 400), fail(RungFix), "The candidate environment breaks a working setup"},
		{fail(RungAll), fail(RungFix), "Neither passes"},
	}
	for _, c := range cases {
		ab := compareAB([]RungResult{c.base, c.cand}, []string{"NCCL_X=1"})
		if ab == nil || !strings.HasPrefix(ab.Verdict, c.want) {
			t.Errorf("got %+v, want %q", ab, c.want)
		}
		if ab != nil && len(ab.Rows) != 8 {
			t.Errorf("rows %+v", ab.Rows)
		}
	}
	if compareAB([]RungResult{pass(RungAll, 1)}, nil) != nil {
		t.Error("no candidate, no comparison")
	}
}

func TestOverall(t *testing.T) {
	res := &Result{Rungs: []RungResult{{Rung: Rung{ID: RungSingle}, Status: Pass}, {Rung: Rung{ID: RungAll}, Status: Fail}, {Rung: Rung{ID: RungFix}, Status: Skipped}}}
	if ok, v := overall(res); ok || v != "1 of 2 rungs failed: all; skipped: fix" {
		t.Errorf("%v %q", ok, v)
	}
	res.Rungs[1].Status = Pass
	res.Interrupted = true
	if ok, v := overall(res); ok || !strings.Contains(v, "interrupted") {
		t.Errorf("an interrupted run never passes: %v %q", ok, v)
	}
	if ok, _ := overall(&Result{}); ok {
		t.Error("no rung ran: not a pass")
	}
}

func TestEventString(t *testing.T) {
	s := SizeResult{Op: "all_reduce", Bytes: 256 << 20, BusBW: 413.54, HasBW: true, OK: true}
	if got := (Event{Kind: EventMeasure, Rung: "all", Size: &s}).String(); got != "[all] all_reduce   256 MiB  busbw 413.5 GB/s  ok" {
		t.Errorf("%q", got)
	}
	s.Wrong, s.OK = 3, false
	if got := (Event{Kind: EventMeasure, Rung: "all", Size: &s}).String(); !strings.HasSuffix(got, "3 WRONG") {
		t.Errorf("%q", got)
	}
	r := RungResult{Rung: Rung{ID: "shm"}, Status: Fail, Reasons: []string{"boom"}}
	if got := (Event{Kind: EventRungDone, Rung: "shm", Result: &r}).String(); got != "[shm] fail: boom" {
		t.Errorf("%q", got)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{8: "8 B", 2048: "2 KiB", 256 << 20: "256 MiB", 9637892: "9.2 MiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q", n, got)
		}
	}
	for n, want := range map[int64]string{8: "8", 256 << 20: "256M", 1 << 30: "1G", 3000: "3000"} {
		if got := FormatSizeArg(n); got != want {
			t.Errorf("FormatSizeArg(%d) = %q", n, got)
		}
	}
	want := []int64{8, 128, 2048, 32768, 524288, 8388608, 67108864, 268435456}
	if got := torchSizes(DefaultMaxBytes); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sizes %v", got)
	}
	if got := torchSizes(4096); fmt.Sprint(got) != "[8 128 2048 4096]" {
		t.Errorf("sizes %v", got)
	}
}
