package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/gobin"
	"github.com/ncclwiz/ncclwiz/internal/grouptest"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
	"github.com/ncclwiz/ncclwiz/internal/rastest"
)

// startFakeTorchrun starts hang's fake job (hang/internal/fakejob) as
// torchrun with world ranks — rank 1 blocks reading a pipe nobody writes,
// the others wait (as ranks waiting in a collective) — and env (the RAS address and dump prefix of
// the test), and returns the launcher's PID and the ranks' by rank.
func startFakeTorchrun(t *testing.T, world int, env ...string) (launcher int, ranks []int) {
	t.Helper()
	plan := make([]string, world)
	for r := range plan {
		plan[r] = "wait"
	}
	plan[1] = "pipe"
	c := exec.Command(gobin.Build(t, "./hang/internal/fakejob", true))
	c.Args = []string{"torchrun", "--nproc-per-node=" + strconv.Itoa(world), "train.py"}
	c.Env = append(os.Environ(), append(env, "FAKEJOB_PLAN="+strings.Join(plan, ","), "FAKEJOB_LOGDIR="+t.TempDir())...)
	grouptest.StartReady(t, c)
	h := host.Local(host.LocalOptions{NoNVML: true})
	tab, err := proctab.Read(context.Background(), h, proctab.Options{EnvKeys: []string{"RANK"}})
	if err != nil {
		t.Fatal(err)
	}
	ranks = make([]int, world)
	for _, p := range tab.Children(c.Process.Pid) {
		if r, err := strconv.Atoi(p.Env["RANK"]); err == nil && r >= 0 && r < world {
			ranks[r] = p.PID
		}
	}
	for r, pid := range ranks {
		if pid == 0 {
			t.Fatalf("fake torchrun %d: no rank %d among its children", c.Process.Pid, r)
		}
	}
	return c.Process.Pid, ranks
}

// rasStatus is a NCCL 2.28.9 JSON status for a 4-rank communicator in
// which rank 1 launched fewer AllReduce operations than the others.
func rasStatus(pids []int) string {
	var ranks []string
	for r, pid := range pids {
		n := 5
		if r == 1 {
			n = 4
		}
		ranks = append(ranks, fmt.Sprintf(`{"rank": %d, "host": "127.0.0.1", "pid": %d, "cuda_dev": %d, "nvml_dev": %d,
  "status": {"init_state": 0, "async_error": 0, "finalize_called": false, "destroy_flag": false, "abort_flag": false},
  "collective_counts": {"Broadcast": 1, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0, "AllReduce": %d, "SendRecv": 0}}`, r, pid, r, r, n))
	}
	return fmt.Sprintf(`{
  "nccl_version": "2.28.9",
  "cuda_runtime_version": 12090,
  "cuda_driver_version": 13000,
  "timestamp": "2026-11-24 05:00:00",
  "communicators_count": 1,
  "communicators": [
    {"hash": "0x51f0", "secondary_hash": "0x1:0x2", "size": %d, "ranks_count": %d, "missing_ranks_count": 0,
     "ranks": [%s],
     "missing_ranks": []}
  ],
  "ras": {"collection_time_sec": 0.010, "timeouts_count": 0}
}
`, len(pids), len(pids), strings.Join(ranks, ",\n"))
}

// settleRank waits until pid sleeps in its pipe read: a rank may still be
// starting up (and running) right after the launcher reports ready.
func settleRank(t *testing.T, pid int) {
	t.Helper()
	for try := 0; try < 200; try++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i:]), ") S") {
			// a sleep is not yet the pipe read: look again after a while
			time.Sleep(200 * time.Millisecond)
			if b2, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid)); err == nil && strings.Contains(string(b2), "pipe") {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("rank %d never blocked on its pipe", pid)
}

func hangSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(filepath.Join("..", "docs", "hang.schema.json"))
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	return sch
}

func validateHang(t *testing.T, sch *jsonschema.Schema, doc string) map[string]any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, doc)
	}
	if err := sch.Validate(v); err != nil {
		t.Fatalf("report does not match docs/hang.schema.json: %v\n%s", err, doc)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(doc), &m)
	return m
}

// TestHangLiveJob runs `ncclwiz hang` on a real fake job: four ranks under
// a launcher named torchrun, rank 1 blocked on a pipe while the others
// spin, a RAS service that says rank 1 is behind, and flight-recorder
// dumps (written by the Python script PyTorch's structure is copied in)
// in which rank 1 never enqueued the last collective. Every source must
// name rank 1.
func TestHangLiveJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fake job and samples it")
	}
	var mu sync.Mutex
	var pids []int
	addr := rastest.Serve(t, rastest.Server{JSON: true, Status: func() string {
		mu.Lock()
		defer mu.Unlock()
		return rasStatus(pids)
	}})
	dumps := t.TempDir()
	prefix := filepath.Join(dumps, "nccl_trace_rank_")
	launcher, ranks := startFakeTorchrun(t, 4, "NCCL_RAS_ADDR="+addr, "TORCH_FR_DUMP_TEMP_FILE="+prefix, "TORCH_NCCL_TRACE_BUFFER_SIZE=2000")
	mu.Lock()
	pids = ranks
	mu.Unlock()
	// The dumps are written after the job started, as a watchdog would.
	if out, err := exec.Command("python3", filepath.Join("..", "hang", "flightrec", "testdata", "write_dumps.py"), dumps, "lagging", "2.10", "pickle").CombinedOutput(); err != nil {
		t.Fatalf("write_dumps.py: %v\n%s", err, out)
	}
	settleRank(t, ranks[1])
	sch := hangSchema(t)
	out, errOut, code := runCLI(t, nil, "hang", "--pid", strconv.Itoa(launcher), "--interval", "1s", "--json")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	doc := validateHang(t, sch, out)
	if got := fmt.Sprint(doc["suspects"]); got != "[1]" {
		t.Fatalf("suspects %s, want [1]\n%s", got, out)
	}
	sources := map[string]bool{}
	for _, e := range doc["evidence"].([]any) {
		ev := e.(map[string]any)
		if ev["suspect"] == true && ev["rank"] == float64(1) {
			sources[ev["source"].(string)] = true
		}
	}
	for _, s := range []string{"process", "ras", "flight_recorder"} {
		if !sources[s] {
			t.Errorf("no %s evidence against rank 1: %v\n%s", s, sources, out)
		}
	}
	if doc["ras"].(map[string]any)["raw"] != nil {
		t.Error("raw RAS reply included without --raw")
	}
	plain, _, code := runCLI(t, nil, "hang", "--pid", strconv.Itoa(ranks[2]), "--interval", "1s", "--raw")
	if code != 1 || !strings.Contains(plain, "Verdict: suspect") || !strings.Contains(plain, `"nccl_version": "2.28.9"`) {
		t.Fatalf("plain report (exit %d):\n%s", code, plain)
	}
}

func TestHangDumpsAlone(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	sch := hangSchema(t)
	for _, tc := range []struct {
		scenario string
		code     int
		suspects string
	}{{"desync", 1, "[2]"}, {"missing", 1, "[3]"}, {"healthy", 0, "[]"}} {
		t.Run(tc.scenario, func(t *testing.T) {
			dir := t.TempDir()
			if out, err := exec.Command("python3", filepath.Join("..", "hang", "flightrec", "testdata", "write_dumps.py"), dir, tc.scenario, "2.7", "json").CombinedOutput(); err != nil {
				t.Fatalf("write_dumps.py: %v\n%s", err, out)
			}
			out, errOut, code := runCLI(t, nil, "hang", "--dumps", filepath.Join(dir, "nccl_trace_rank_"), "--json")
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			doc := validateHang(t, sch, out)
			if got := fmt.Sprint(doc["suspects"]); got != tc.suspects {
				t.Fatalf("suspects %s, want %s", got, tc.suspects)
			}
		})
	}
}

func TestHangUsage(t *testing.T) {
	for _, args := range [][]string{
		{"hang", "--interval", "1ms"},
		{"hang", "--pid", "-4"},
		{"hang", "--pid", "2147483000"},
		{"hang", "--ras-addr", "no-port"},
		{"hang", "--dumps", "/nonexistent/nccl_trace_rank_"},
	} {
		_, errOut, code := runCLI(t, nil, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestHangSeveralJobs: with two jobs running and no --pid, the jobs are
// listed and the user must choose (exit 2); --pid with a rank's PID picks
// that rank's job.
func TestHangSeveralJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two fake jobs")
	}
	l1, r1 := startFakeTorchrun(t, 2)
	l2, _ := startFakeTorchrun(t, 2)
	_, errOut, code := runCLI(t, nil, "hang", "--interval", "100ms", "--no-ras")
	if code != 2 || !strings.Contains(errOut, "--pid") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	for _, pid := range []int{l1, l2} {
		if !strings.Contains(errOut, strconv.Itoa(pid)+" ") {
			t.Errorf("job %d not listed:\n%s", pid, errOut)
		}
	}
	out, _, _ := runCLI(t, nil, "hang", "--pid", strconv.Itoa(r1[0]), "--interval", "100ms", "--no-ras", "--json")
	var doc struct {
		Job struct {
			LauncherPID int `json:"launcher_pid"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Job.LauncherPID != l1 {
		t.Fatalf("--pid %d picked launcher %d, want %d (%v)\n%s", r1[0], doc.Job.LauncherPID, l1, err, out)
	}
}

// TestHangHostileDump: names inside a dump reach the terminal and the JSON
// without escapes.
func TestHangHostileDump(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	script := `
import pickle, sys
for rank in range(2):
    e = {"record_id": 0, "pg_id": 0, "process_group": ("0", "evil\x1b]0;owned\x07pg"), "collective_seq_id": 1, "p2p_seq_id": 0,
         "op_id": 1, "profiling_name": "nccl:all_reduce\x1b[2J" if rank else "nccl:all_reduce", "input_sizes": [[8]],
         "input_dtypes": ["Float"], "output_sizes": [[8]], "output_dtypes": ["Float"], "state": "scheduled", "is_p2p": False}
    d = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "evil\x1b]0;owned\x07pg", "ranks": "[0, 1]"}}, "entries": [e]}
    open(sys.argv[1] + "/nccl_trace_rank_%d" % rank, "wb").write(pickle.dumps(d, protocol=2))
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, args := range [][]string{{"--json"}, {}} {
		out, _, code := runCLI(t, nil, append([]string{"hang", "--dumps", filepath.Join(dir, "nccl_trace_rank_")}, args...)...)
		if code != 1 || strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, `\u001b`) || strings.Contains(out, `\u0007`) {
			t.Fatalf("exit %d; escapes in the report:\n%q", code, out)
		}
	}
}

// TestHangPySpyConsent: py-spy (a stand-in on PATH that records whom it
// was asked about) is never run without consent; with --yes it is run on
// the suspect rank only.
func TestHangPySpyConsent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fake job")
	}
	bin := t.TempDir()
	marker := filepath.Join(t.TempDir(), "attached")
	fake := "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'py-spy 0.4.0'; exit 0; }\necho \"$3\" >> \"$HANG_PYSPY_MARKER\"\nprintf 'Thread 1 (idle): \"MainThread\"\\n    readline (<stdin>:2)\\n'\n"
	if err := os.WriteFile(filepath.Join(bin, "py-spy"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("HANG_PYSPY_MARKER", marker)
	launcher, ranks := startFakeTorchrun(t, 2)
	settleRank(t, ranks[1])
	out, _, code := runCLI(t, nil, "hang", "--pid", strconv.Itoa(launcher), "--interval", "1s", "--no-ras", "--py-spy")
	if code != 1 || !strings.Contains(out, "no terminal to ask for consent") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("py-spy ran without consent")
	}
	out, _, code = runCLI(t, nil, "hang", "--pid", strconv.Itoa(launcher), "--interval", "1s", "--no-ras", "--py-spy", "--yes", "--json")
	doc := validateHang(t, hangSchema(t), out)
	stacks, _ := doc["stacks"].([]any)
	if code != 1 || len(stacks) != 1 || !strings.Contains(fmt.Sprint(stacks[0]), "readline") {
		t.Fatalf("exit %d, stacks %v", code, stacks)
	}
	b, err := os.ReadFile(marker)
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(ranks[1]) {
		t.Fatalf("py-spy attached to %q, want only rank 1 (pid %d)", b, ranks[1])
	}
}

// Issue 22 item 16: `hang` on a practice scenario says SIMULATED first and
// why RAS was not asked (never "--no-ras", which the user did not pass).
func TestHangScenarioIsSimulated(t *testing.T) {
	out, errOut, code := runCLI(t, nil, "hang", "--scenario", "watchdog-timeout", "--interval", "200ms")
	if code == 2 || !strings.HasPrefix(out, "SIMULATED — practice scenario watchdog-timeout") || strings.Contains(out, "--no-ras") ||
		!strings.Contains(out, "a practice scenario has no RAS port") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	out, _, _ = runCLI(t, nil, "hang", "--scenario", "watchdog-timeout", "--interval", "200ms", "--json")
	doc := validateHang(t, hangSchema(t), out)
	if doc["simulated"] != "watchdog-timeout" || !strings.HasPrefix(doc["summary"].(string), "SIMULATED") {
		t.Fatalf("simulated %v, summary %v", doc["simulated"], doc["summary"])
	}
}

// `ncclwiz fix` keeps what it showed of proc.stale as the user's preview
// (per user and PID namespace), which a later `--apply proc.stale --yes`
// acts on (steps.TestStaleOnRealLeftovers proves the acting part).
func TestFixKeepsThePreview(t *testing.T) {
	state := t.TempDir()
	if _, errOut, code := runCLI(t, []string{"XDG_STATE_HOME=" + state}, "fix"); code == 2 {
		t.Fatalf("fix: exit %d: %s", code, errOut)
	}
	m, err := filepath.Glob(filepath.Join(state, "ncclwiz", "stale-preview-*.json"))
	if err != nil || len(m) != 1 {
		t.Fatalf("no preview kept under %s: %v %v", state, m, err)
	}
	b, err := os.ReadFile(m[0])
	if err != nil || !strings.Contains(string(b), `"boot_id"`) || !strings.Contains(string(b), `"stale"`) {
		t.Fatalf("preview %s: %v\n%s", m[0], err, b)
	}
}
