package validate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The torchrun backend against the fake launcher replaying a healthy
// 8-GPU H100 box: every rung passes, the environment and arguments are
// exactly what the runner promises, and the bandwidth is judged against
// the NVLink 4 range.
func TestTorchrunSuccessEightGPUs(t *testing.T) {
	f := newFakeMachine(t, "NCCL_SOCKET_IFNAME=eth0", "RANK=5", "MASTER_PORT=1")
	var ev events
	res, err := Run(context.Background(), f.h, Options{
		GPUs: h100(8), Env: []string{"NCCL_CUMEM_HOST_ENABLE=0"}, Timeout: time.Minute, OnEvent: ev.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass || res.Backend != BackendTorchrun || res.GPUs != 8 {
		t.Fatalf("want a passing torchrun run on 8 GPUs, got pass=%v backend=%s gpus=%d: %s", res.Pass, res.Backend, res.GPUs, res.Verdict)
	}
	if res.Torch != "2.5.1+fake" || res.NCCL != "2.21.5" || !strings.HasSuffix(res.Launcher, "/torchrun") {
		t.Errorf("probe details: torch %q nccl %q launcher %q", res.Torch, res.NCCL, res.Launcher)
	}
	wantTransport := map[string]string{RungAll: "P2P", RungSHM: "SHM", RungNet: "NET/Socket", RungFix: "P2P"}
	for _, id := range []string{RungSingle, RungAll, RungSHM, RungNet, RungFix} {
		r := rung(t, res, id)
		if r.Status != Pass {
			t.Errorf("%s: %s %v", id, r.Status, r.Reasons)
		}
		if len(r.Sizes) != 16 || r.WrongValues != 0 {
			t.Errorf("%s: %d sizes, %d wrong", id, len(r.Sizes), r.WrongValues)
		}
		if want := wantTransport[id]; want != "" && (len(r.Transports) != 1 || r.Transports[0].Class != want) {
			t.Errorf("%s: transports %+v, want %s", id, r.Transports, want)
		}
		if len(r.Survivors) != 0 || len(r.LeftoverShm) != 0 {
			t.Errorf("%s: survivors %v leftovers %v", id, r.Survivors, r.LeftoverShm)
		}
	}
	all := rung(t, res, RungAll)
	if all.Bandwidth.State != BWOK || all.Expected == nil || all.Expected.ID != "nvlink4-nvswitch" || all.LargeBytes != 256<<20 {
		t.Errorf("all: bandwidth %+v expected %+v at %d", all.Bandwidth, all.Expected, all.LargeBytes)
	}
	if s := rung(t, res, RungSHM); s.Bandwidth.State != BWNotJudged || !strings.Contains(s.Bandwidth.Detail, "shared memory") {
		t.Errorf("shm: %+v", s.Bandwidth)
	}
	if s := rung(t, res, RungSingle); s.Bandwidth.State != BWNA {
		t.Errorf("single: %+v", s.Bandwidth)
	}
	if res.AB == nil || res.AB.Base != RungAll || !strings.HasPrefix(res.AB.Verdict, "Both pass.") {
		t.Errorf("A/B: %+v", res.AB)
	}
	if !hasNote(res.Notes, "NCCL_SOCKET_IFNAME") {
		t.Errorf("notes should say the user's NCCL variable was left out of the defaults: %v", res.Notes)
	}

	// What the launcher received.
	args := f.records(t, "torchrun.*.args")
	envs := f.records(t, "torchrun.*.env")
	modes := f.records(t, "torchrun.*.modes")
	scripts := f.records(t, "torchrun.*.script")
	if len(args) != 5 || len(envs) != 5 {
		t.Fatalf("want 5 launches, got %d", len(args))
	}
	ports := map[string]bool{}
	for i, a := range args {
		lines := strings.Split(strings.TrimSpace(a), "\n")
		if len(lines) != 6 || lines[0] != "--nnodes=1" || lines[2] != "--master_addr=127.0.0.1" || lines[4] != "--max_restarts=0" {
			t.Errorf("launch %d args: %q", i, lines)
		}
		port, err := strconv.Atoi(strings.TrimPrefix(lines[3], "--master_port="))
		if err != nil || port < 1024 || port > 65535 {
			t.Errorf("launch %d: bad port %q", i, lines[3])
		}
		ports[lines[3]] = true
		if filepath.Base(lines[5]) != "collective.py" {
			t.Errorf("launch %d: script %q", i, lines[5])
		}
	}
	if busy := f.records(t, "torchrun.*.port-busy"); len(busy) > 0 {
		t.Errorf("the chosen port was not free: %v", busy)
	}
	if strings.TrimSpace(modes[0]) != "600\n700" {
		t.Errorf("script and its directory must be private, got modes %q", modes[0])
	}
	if scripts[0] != string(CollectiveScript) {
		t.Error("the launcher did not get the embedded script")
	}
	shmRungs := 0
	for i, e := range envs {
		vars := strings.Split(e, "\n")
		for _, want := range []string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,ENV", "PYTHONUNBUFFERED=1", "OMP_NUM_THREADS=1",
			"NCCLWIZ_SIZES=8,128,2048,32768,524288,8388608,67108864,268435456", MarkerVar + "=" + res.RunID} {
			if !slices.Contains(vars, want) {
				t.Errorf("launch %d env lacks %s", i, want)
			}
		}
		for _, bad := range []string{"NCCL_SOCKET_IFNAME=eth0", "RANK=5", "MASTER_PORT=1"} {
			if slices.Contains(vars, bad) {
				t.Errorf("launch %d env leaks %s", i, bad)
			}
		}
		if slices.Contains(vars, "NCCL_P2P_DISABLE=1") {
			shmRungs++
		}
	}
	if shmRungs != 2 {
		t.Errorf("NCCL_P2P_DISABLE=1 should reach exactly the shm and net rungs, reached %d", shmRungs)
	}
	if !slices.Contains(strings.Split(envs[4], "\n"), "NCCL_CUMEM_HOST_ENABLE=0") {
		t.Error("the candidate environment did not reach the fix rung")
	}

	k := ev.kinds()
	if k[EventPlan] != 1 || k[EventRungStart] != 5 || k[EventRungDone] != 5 || k[EventTransport] != 4 || k[EventMeasure] != 5*16 {
		t.Errorf("events: %v", k)
	}
	assertNoSurvivors(t, res.RunID)

	// The JSON form is stable and complete.
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil || back["schema"].(float64) != 1 || back["ab"] == nil {
		t.Fatalf("JSON: %v %v", err, back["schema"])
	}
}

// A hang: every process ignores SIGTERM, one grandchild is in the group and
// one escaped it with setsid. The rung times out, the group is killed, the
// escaped process is found by the environment marker and ended, and /proc
// shows nothing of the run afterwards.
func TestHangEndsWholeProcessGroup(t *testing.T) {
	f := newFakeMachine(t, "FAKE_SCENARIO=hang")
	res, err := Run(context.Background(), f.h, Options{GPUs: h100(4), Rungs: []string{RungAll}, Timeout: 2 * time.Second, Grace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := rung(t, res, RungAll)
	if r.Status != Fail || !r.TimedOut || !strings.HasPrefix(r.Reasons[0], "hung: no exit within 2s") {
		t.Fatalf("want a timed-out failure, got %s %v", r.Status, r.Reasons)
	}
	escaped := false
	for _, p := range r.Survivors {
		if p.Why == "environment marker" && p.Comm == "sleep" {
			escaped = true
		}
	}
	if !escaped {
		t.Errorf("the setsid grandchild should be reported as a survivor, got %+v", r.Survivors)
	}
	if res.Pass {
		t.Error("a hang must not pass")
	}
	assertNoSurvivors(t, res.RunID)
}

// Ctrl-C (context cancellation) in the middle of a rung ends it at once,
// marks the run interrupted and leaves no process behind.
func TestCancelEndsRun(t *testing.T) {
	f := newFakeMachine(t, "FAKE_SCENARIO=hang")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Run(ctx, f.h, Options{
		GPUs: h100(2), Rungs: []string{RungAll, RungSHM, RungNet}, Timeout: time.Minute, Grace: 200 * time.Millisecond,
		OnEvent: func(e Event) {
			if e.Kind == EventTransport {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Pass || !strings.Contains(res.Verdict, "interrupted") {
		t.Fatalf("want an interrupted run, got %+v", res.Verdict)
	}
	r := rung(t, res, RungAll)
	if !r.Canceled || !hasReason(r, "interrupted") {
		t.Errorf("all rung: %+v", r.Reasons)
	}
	for _, id := range []string{RungSHM, RungNet} {
		for _, rr := range res.Rungs {
			if rr.Rung.ID == id {
				t.Errorf("rung %s ran after the interruption", id)
			}
		}
	}
	assertNoSurvivors(t, res.RunID)
}

// The SHM attach failure on a consumer PCIe box (no P2P): the defaults and
// SHM rungs fail with the NCCL warning, the diagnosis names the guide, the
// leftover segment is reported; the candidate NCCL_SHM_DISABLE=1 moves NCCL
// to the network and passes, and the A/B table says so.
func TestShmAttachFailureAndAB(t *testing.T) {
	f := newFakeMachine(t, "FAKE_SCENARIO=shm-attach", "FAKE_NO_P2P=1")
	res, err := Run(context.Background(), f.h, Options{
		GPUs: pcieSnapshot(2, "NVIDIA GeForce RTX 4090", 4, 16, "PHB"), Env: []string{"NCCL_SHM_DISABLE=1"}, Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	all := rung(t, res, RungAll)
	if all.Status != Fail || !strings.Contains(all.Reasons[0], "Error while attaching to shared memory segment /dev/shm/nccl- (size 0)") {
		t.Fatalf("all: %s %v", all.Status, all.Reasons)
	}
	if all.Diagnosis == nil || all.Diagnosis.Guide != "shm-cumem-host" {
		t.Errorf("diagnosis: %+v", all.Diagnosis)
	}
	if len(all.LeftoverShm) != 1 || all.LeftoverShm[0].Name != "nccl-Rk2v9Q" || !hasNote(all.Notes, "NCCL left 1 segment") {
		t.Errorf("leftover: %+v %v", all.LeftoverShm, all.Notes)
	}
	if r := rung(t, res, RungSHM); r.Status != Fail {
		t.Errorf("shm: %s", r.Status)
	}
	if r := rung(t, res, RungNet); r.Status != Pass {
		t.Errorf("net: %s %v", r.Status, r.Reasons)
	}
	fix := rung(t, res, RungFix)
	if fix.Status != Pass || fix.Transports[0].Class != "NET/Socket" {
		t.Fatalf("fix: %s %v %+v", fix.Status, fix.Reasons, fix.Transports)
	}
	if res.AB == nil || !strings.HasPrefix(res.AB.Verdict, "The candidate environment fixes it") {
		t.Fatalf("A/B: %+v", res.AB)
	}
	var table strings.Builder
	if err := WriteABTable(&table, res.AB); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"without", "with NCCL_SHM_DISABLE=1", "SHM/direct/direct", "NET/Socket/0", "fail", "pass"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("A/B table lacks %q:\n%s", want, table.String())
		}
	}
	if res.Pass {
		t.Error("the run must fail: two rungs failed")
	}
	assertNoSurvivors(t, res.RunID)
}

// One rank dies of SIGSEGV: torchrun's root cause is the first reason, the
// other ranks are ended, nothing survives.
func TestRankCrash(t *testing.T) {
	f := newFakeMachine(t, "FAKE_SCENARIO=crash")
	res, err := Run(context.Background(), f.h, Options{GPUs: a100(8), Rungs: []string{RungAll}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := rung(t, res, RungAll)
	if r.Status != Fail || r.Reasons[0] != "Under the torchrun backend, rank 7 exited with code -11 (SIGSEGV), the first observed failure." {
		t.Fatalf("%s %v", r.Status, r.Reasons)
	}
	if !hasReason(r, "missing measurements") || !hasReason(r, "the launcher exited with status 1") || r.Bandwidth.State != BWMissing {
		t.Errorf("reasons %v bandwidth %+v", r.Reasons, r.Bandwidth)
	}
	assertNoSurvivors(t, res.RunID)
}

// Wrong values fail the rung even though the bandwidth is fine.
func TestWrongValuesFail(t *testing.T) {
	f := newFakeMachine(t, "FAKE_SCENARIO=wrong", "FAKE_WRONG=2:67108864")
	res, err := Run(context.Background(), f.h, Options{GPUs: h100(8), Rungs: []string{RungAll}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := rung(t, res, RungAll)
	if r.Status != Fail || r.Reasons[0] != "wrong values: 12 wrong elements in all_reduce at 64 MiB" || r.WrongValues != 12 {
		t.Fatalf("%s %v %d", r.Status, r.Reasons, r.WrongValues)
	}
	if r.Bandwidth.State != BWOK {
		t.Errorf("bandwidth is fine and judged separately: %+v", r.Bandwidth)
	}
}

// A port taken between choosing and binding: the rung is retried once on a
// new port.
func TestPortInUseRetried(t *testing.T) {
	f := newFakeMachine(t, "FAKE_SCENARIO=port-in-use")
	var ev events
	res, err := Run(context.Background(), f.h, Options{GPUs: h100(2), Rungs: []string{RungAll}, Timeout: time.Minute, OnEvent: ev.add})
	if err != nil {
		t.Fatal(err)
	}
	if r := rung(t, res, RungAll); r.Status != Pass {
		t.Fatalf("%s %v", r.Status, r.Reasons)
	}
	args := f.records(t, "torchrun.*.args")
	if len(args) != 2 || strings.Split(args[0], "\n")[3] == strings.Split(args[1], "\n")[3] {
		t.Errorf("want two launches on different ports, got %q", args)
	}
	if ev.kinds()[EventRungStart] != 2 {
		t.Errorf("events: %v", ev.kinds())
	}
}

// Without a torchrun next to the interpreter the runner uses
// "python -m torch.distributed.run" with the same interpreter.
func TestPythonModuleLauncher(t *testing.T) {
	fake, _ := filepath.Abs("testdata/fake/python3")
	bin := t.TempDir()
	wrapper := "#!/bin/sh\nexec " + fake + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "python3"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFakeMachineBin(t, bin)
	res, err := Run(context.Background(), f.h, Options{GPUs: h100(2), Rungs: []string{RungSingle}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(bin, "python3")
	if res.Launcher != py+" -m torch.distributed.run" {
		t.Errorf("launcher %q", res.Launcher)
	}
	r := rung(t, res, RungSingle)
	if r.Status != Pass || r.Command[0] != py || r.Command[1] != "-m" || r.Command[2] != "torch.distributed.run" {
		t.Errorf("%s %v %q", r.Status, r.Reasons, r.Command)
	}
}

// --python picks the interpreter explicitly; an active venv is preferred to
// PATH.
func TestPythonResolution(t *testing.T) {
	fake, _ := filepath.Abs("testdata/fake/python3")
	venv := t.TempDir()
	if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(venv, "bin", "python"), []byte("#!/bin/sh\nexec "+fake+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFakeMachine(t, "VIRTUAL_ENV="+venv)
	f.h.Python = "" // the rule itself (gpu.JobPython), not a pinned --python
	p, err := Prepare(context.Background(), f.h, Options{GPUs: h100(2)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// A rank of another job running on this machine comes first by the
	// rule; without one the active venv beats PATH.
	if p.Python != filepath.Join(venv, "bin", "python") && !strings.HasPrefix(p.PythonFrom, "the job's rank pid ") {
		t.Errorf("venv interpreter not chosen: %s (%s)", p.Python, p.PythonFrom)
	}
	p2, err := Prepare(context.Background(), f.h, Options{GPUs: h100(2), Python: fake})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if p2.Python != fake {
		t.Errorf("--python not honoured: %s", p2.Python)
	}
	if _, err := Prepare(context.Background(), f.h, Options{GPUs: h100(2), Python: "/nonexistent/python", Backend: BackendTorchrun}); err == nil ||
		!strings.Contains(err.Error(), "--python /nonexistent/python is not an executable file") {
		t.Errorf("bad --python: %v", err)
	}
}

// The real collective.py, run by the fake torchrun as two real processes
// with the fake torch package: its output is what the parser reads, its
// correctness checks hold, and a corrupted element is caught by the
// script itself.
func TestRealScriptWithFakeTorch(t *testing.T) {
	f := newFakeMachine(t, "FAKE_SCENARIO=script", "FAKE_GPUS=2")
	res, err := Run(context.Background(), f.h, Options{MaxBytes: 4096, Timeout: time.Minute, Rungs: []string{RungSingle, RungAll, RungSHM, RungNet}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass {
		for _, r := range res.Rungs {
			t.Logf("%s: %s %v\n%s", r.Rung.ID, r.Status, r.Reasons, strings.Join(r.LogTail, "\n"))
		}
		t.Fatalf("the real script should pass with the fake torch: %s", res.Verdict)
	}
	all := rung(t, res, RungAll)
	if len(all.Sizes) != 8 || all.Sizes[0].Bytes != 8 || all.Sizes[len(all.Sizes)-1].Bytes != 4096 || all.LargeBytes != 4096 {
		t.Errorf("sizes: %+v", all.Sizes)
	}
	for _, s := range all.Sizes {
		if s.Ranks != 2 || !s.OK || !s.Checked || s.BusBW < 0 {
			t.Errorf("size %+v", s)
		}
	}
	if all.Bandwidth.State != BWNotJudged {
		t.Errorf("without a GPU snapshot bandwidth cannot be judged: %+v", all.Bandwidth)
	}

	f2 := newFakeMachine(t, "FAKE_SCENARIO=script", "FAKE_GPUS=2", "FAKE_TORCH_CORRUPT=1:2048")
	res, err = Run(context.Background(), f2.h, Options{MaxBytes: 4096, Timeout: time.Minute, Rungs: []string{RungAll}})
	if err != nil {
		t.Fatal(err)
	}
	r := rung(t, res, RungAll)
	if r.Status != Fail || r.Reasons[0] != "wrong values: 1 wrong element in all_reduce at 2 KiB" {
		t.Fatalf("%s %v", r.Status, r.Reasons)
	}
	if !hasReason(r, "rank 1 exited with code 3") {
		t.Errorf("the script must exit non-zero on wrong values: %v", r.Reasons)
	}
}

// nccl-tests: a healthy 8-GPU run read from its JSON file, the arguments
// the issue asks for, and the table parsed identically.
func TestNCCLTestsSuccess(t *testing.T) {
	f := newFakeMachine(t, "FAKE_TORCH=missing")
	res, err := Run(context.Background(), f.h, Options{GPUs: h100(8), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != BackendNCCLTests || !res.Pass {
		t.Fatalf("backend %s pass %v: %s", res.Backend, res.Pass, res.Verdict)
	}
	args := f.records(t, "perf.*.args")
	if len(args) != 4 {
		t.Fatalf("want 4 launches (no candidate env), got %d", len(args))
	}
	if !strings.HasPrefix(args[1], "-b 8 -e 268435456 -f 2 -g 8 -c 1 -J /") || !strings.HasPrefix(args[0], "-b 8 -e 268435456 -f 2 -g 1 -c 1 -J") {
		t.Errorf("args: %q", args)
	}
	all := rung(t, res, RungAll)
	if len(all.Sizes) != 26 || all.LargeBytes != 256<<20 || all.Bandwidth.State != BWOK || all.AvgBusBW <= 0 {
		t.Errorf("all: %d sizes, large %d, %+v, avg %v", len(all.Sizes), all.LargeBytes, all.Bandwidth, all.AvgBusBW)
	}
	if all.Transports[0].Class != "P2P" {
		t.Errorf("transports %+v", all.Transports)
	}
	if r := rung(t, res, RungFix); r.Status != Skipped || !strings.Contains(r.Reasons[0], "--env") {
		t.Errorf("fix: %+v", r)
	}
	if res.AB != nil {
		t.Error("no A/B without a candidate")
	}
	assertNoSurvivors(t, res.RunID)
}

// The same run from an old build without -J: the table is the source.
func TestNCCLTestsOldFormat(t *testing.T) {
	f := newFakeMachine(t, "FAKE_TORCH=missing", "FAKE_NT_OLD=1")
	res, err := Run(context.Background(), f.h, Options{GPUs: a100(8), Backend: BackendNCCLTests, Rungs: []string{RungAll}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := rung(t, res, RungAll)
	if r.Status != Pass || len(r.Sizes) != 26 || r.Expected == nil || r.Expected.ID != "nvlink3-a100" {
		t.Fatalf("%s %v %d %+v", r.Status, r.Reasons, len(r.Sizes), r.Expected)
	}
	for _, a := range f.records(t, "perf.*.args") {
		if !strings.HasSuffix(strings.TrimSpace(a), "-J") {
			t.Errorf("-J must not be passed to a build that lacks it: %q", a)
		}
	}
}

func TestNCCLTestsFailures(t *testing.T) {
	cases := []struct {
		scenario string
		env      []string
		reason   string
		timeout  time.Duration
	}{
		{"wrong", nil, "wrong values: 3 wrong elements in all_reduce at 64 MiB", time.Minute},
		{"shm-attach", []string{"FAKE_NO_P2P=1"}, "NCCL WARN Error while attaching to shared memory segment", time.Minute},
		{"hang", nil, "hung: no exit within 2s", 2 * time.Second},
		{"crash", nil, "missing the 'Out of bounds values' summary", time.Minute},
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			f := newFakeMachine(t, append([]string{"FAKE_TORCH=missing", "FAKE_SCENARIO=" + c.scenario}, c.env...)...)
			res, err := Run(context.Background(), f.h, Options{
				GPUs: pcieSnapshot(4, "NVIDIA L40S", 4, 16, "NODE"), Rungs: []string{RungAll}, Timeout: c.timeout, Grace: 200 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := rung(t, res, RungAll)
			if r.Status != Fail || !strings.HasPrefix(r.Reasons[0], c.reason) {
				t.Fatalf("%s %v", r.Status, r.Reasons)
			}
			assertNoSurvivors(t, res.RunID)
		})
	}
}

// A launcher that prints a megabyte on one line and raw control bytes is
// read line by line without stalling; the table after it still parses.
func TestNoisyOutput(t *testing.T) {
	f := newFakeMachine(t, "FAKE_TORCH=missing", "FAKE_SCENARIO=noisy")
	res, err := Run(context.Background(), f.h, Options{GPUs: pcieSnapshot(2, "NVIDIA L40S", 4, 16, "NODE"), Rungs: []string{RungAll}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := rung(t, res, RungAll)
	if r.Status != Pass || len(r.Sizes) != 26 {
		t.Fatalf("%s %v %d", r.Status, r.Reasons, len(r.Sizes))
	}
	if r.Expected == nil || r.Expected.ID != "pcie-gen4-x16" {
		t.Errorf("expected %+v", r.Expected)
	}
}

func TestCannotRun(t *testing.T) {
	t.Run("no GPU, no torch, no nccl-tests", func(t *testing.T) {
		bin := t.TempDir()
		fake, _ := filepath.Abs("testdata/fake/python3")
		if err := os.WriteFile(filepath.Join(bin, "python3"), []byte("#!/bin/sh\nexec "+fake+" \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		f := newFakeMachineBin(t, bin, "FAKE_TORCH=missing")
		_, err := Run(context.Background(), f.h, Options{GPUs: &Snapshot{State: "no-driver", Detail: "libnvidia-ml.so.1: cannot open shared object file"}})
		var cr *CannotRunError
		if !errors.As(err, &cr) {
			t.Fatalf("want CannotRunError, got %v", err)
		}
		text := strings.Join(cr.Reasons, "\n") + "\n" + strings.Join(cr.Hints, "\n")
		for _, want := range []string{"No usable GPU: libnvidia-ml.so.1", "cannot import torch: ModuleNotFoundError: No module named 'torch'",
			"all_reduce_perf is not on PATH", "pip install torch", "make -C nccl-tests", "ncclwiz check"} {
			if !strings.Contains(text, want) {
				t.Errorf("message lacks %q:\n%s", want, text)
			}
		}
	})
	t.Run("torch without CUDA", func(t *testing.T) {
		f := newFakeMachine(t, "FAKE_TORCH=cpu")
		_, err := Run(context.Background(), f.h, Options{GPUs: h100(2), Backend: BackendTorchrun})
		var cr *CannotRunError
		if !errors.As(err, &cr) || !strings.Contains(cr.Reasons[0], "CPU-only build") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("torch without torch.distributed.run", func(t *testing.T) {
		f := newFakeMachine(t, "FAKE_TORCH=old")
		_, err := Run(context.Background(), f.h, Options{GPUs: h100(2), Backend: BackendTorchrun})
		var cr *CannotRunError
		if !errors.As(err, &cr) || !strings.Contains(cr.Reasons[0], "has no torch.distributed.run module") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("simulated", func(t *testing.T) {
		f := newFakeMachine(t)
		f.h.Simulated = true
		var cr *CannotRunError
		if _, err := Run(context.Background(), f.h, Options{}); !errors.As(err, &cr) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("usage errors", func(t *testing.T) {
		f := newFakeMachine(t)
		for _, o := range []Options{{Rungs: []string{"everything"}}, {Env: []string{"NOEQUALS"}}, {Env: []string{"A=b\nc"}}, {Backend: "mpi"}, {Tolerance: 2}} {
			o.GPUs = h100(2)
			_, err := Run(context.Background(), f.h, o)
			var cr *CannotRunError
			if err == nil || errors.As(err, &cr) {
				t.Errorf("%+v: want a usage error, got %v", o, err)
			}
		}
	})
}

// One GPU: the multi-GPU rungs are skipped with the reason, the single
// rung and the candidate run on it, and the notes say what is not proved.
func TestSingleGPU(t *testing.T) {
	f := newFakeMachine(t, "FAKE_GPUS=1")
	res, err := Run(context.Background(), f.h, Options{GPUs: h100(1), Env: []string{"NCCL_CUMEM_HOST_ENABLE=0"}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass {
		t.Fatalf("%s", res.Verdict)
	}
	for _, id := range []string{RungAll, RungSHM, RungNet} {
		if r := rung(t, res, id); r.Status != Skipped || !strings.Contains(r.Reasons[0], "needs at least 2 GPUs") {
			t.Errorf("%s: %+v", id, r)
		}
	}
	if r := rung(t, res, RungFix); r.Status != Pass || r.Rung.Ranks != 1 {
		t.Errorf("fix: %+v", r)
	}
	if res.AB == nil || res.AB.Base != RungSingle {
		t.Errorf("A/B against the single rung: %+v", res.AB)
	}
	if !hasNote(res.Notes, "cannot prove P2P") || !strings.Contains(res.Verdict, "skipped: all, net, shm") {
		t.Errorf("notes %v verdict %s", res.Notes, res.Verdict)
	}
}

// CUDA_VISIBLE_DEVICES limits the GPUs that nccl-tests uses (torch applies
// it itself).
func TestVisibleDevicesCount(t *testing.T) {
	f := newFakeMachine(t, "FAKE_TORCH=missing", "CUDA_VISIBLE_DEVICES=2,3")
	p, err := Prepare(context.Background(), f.h, Options{GPUs: h100(8)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Backend != BackendNCCLTests || p.GPUs != 2 {
		t.Errorf("backend %s gpus %d", p.Backend, p.GPUs)
	}
}

// NCCL applies ~/.nccl.conf and /etc/nccl.conf to every rung; the run says so.
func TestNCCLConfNote(t *testing.T) {
	f := newFakeMachine(t)
	home := envGet(f.h.Env, "HOME")
	if err := os.WriteFile(filepath.Join(home, ".nccl.conf"), []byte("# site settings\nNCCL_P2P_DISABLE=1\nNCCL_IB_HCA=mlx5_0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Prepare(context.Background(), f.h, Options{GPUs: h100(2)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !hasNote(p.Notes, ".nccl.conf sets NCCL_P2P_DISABLE, NCCL_IB_HCA; NCCL applies it to every rung") {
		t.Errorf("notes: %q", p.Notes)
	}
}

// The candidate environment is checked against ncclwiz's table of
// variables; the variables the test itself needs are not overridable.
func TestCandidateNotes(t *testing.T) {
	f := newFakeMachine(t)
	p, err := Prepare(context.Background(), f.h, Options{GPUs: h100(2), Env: []string{
		"NCCL_DEBUG=WARN", "NCCL_TIMEOUT=5", "NCCL_ASYNC_ERROR_HANDLING=1", "NCCL_P2P_LEVL=NVL", "NCCL_SHM_DISABLE=1", "NCCL_SHM_DISABLE=0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, want := range []string{
		"NCCL_DEBUG is set by the test itself",
		"NCCL_TIMEOUT is nonexistent",
		"NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING",
		"NCCL_P2P_LEVL is not a variable ncclwiz knows; NCCL ignores unknown names (did you mean NCCL_P2P_LEVEL?)",
	} {
		if !hasNote(p.Notes, want) {
			t.Errorf("notes lack %q: %q", want, p.Notes)
		}
	}
	if strings.Join(p.Candidate, " ") != "NCCL_ASYNC_ERROR_HANDLING=1 NCCL_P2P_LEVL=NVL NCCL_SHM_DISABLE=0 NCCL_TIMEOUT=5" {
		t.Errorf("candidate (sorted, last value wins, NCCL_DEBUG left out): %q", p.Candidate)
	}
}
