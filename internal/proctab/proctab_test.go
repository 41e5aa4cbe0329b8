package proctab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

// fixturePID is above the largest pid_max Linux allows (2^22), so it can
// never be a real process: a read that reaches past the fixture root fails.
const fixturePID = 4194305

func fixture(t *testing.T) *host.Host {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d", fixturePID)
	stat := func(id int, state string, ut int) string {
		return fmt.Sprintf("%d (pt main (x)) %s 4194306 4194300 4194300 0 -1 4194304 10 0 0 0 %d 20 0 0 20 0 2 0 500000 1000 100 0\n", id, state, ut)
	}
	return ft.Tree(t, map[string]any{
		"/proc/stat":               "cpu  1 2 3\nbtime 1700000000\n",
		"/proc/uptime":             "9000.00 1.00\n",
		"/proc/self/status":        "Name:\tncclwiz\nPid:\t77\nPPid:\t1\nNSpid:\t77\n",
		"/proc/self/ns/pid":        ft.Symlink(InitPIDNS),
		dir + "/stat":              stat(fixturePID, "S", 300),
		dir + "/status":            "Name:\tpt main (x)\nState:\tS (sleeping)\nPid:\t4194305\nPPid:\t4194306\nUid:\t1000\t1001\t1002\t1003\nThreads:\t2\nNSpid:\t4194305\t7\n",
		dir + "/cmdline":           "python\x00-u\x00train.py\x00",
		dir + "/environ":           "RANK=3\x00SECRET=x\x00LOCAL_RANK=3\x00",
		dir + "/ns/pid":            ft.Symlink("pid:[4026532999]"),
		dir + "/task/4194305/stat": stat(fixturePID, "S", 100),
		dir + "/task/4194307/stat": stat(4194307, "D", 200),
		"/proc/4194306/stat":       "4194306 (tini) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n",
		"/proc/4194306/status":     "Name:\ttini\nNSpid:\t4194306\t1\n",
		"/proc/4194306/cmdline":    "tini\x00--\x00",
		"/proc/not-a-pid/stat":     "junk",
		"/proc/4194308/stat":       "malformed",
	}, host.FixtureSpec{UID: 1000, Now: "2023-11-14T22:28:20Z"}) // btime + 5000 s
}

// TestReadFixture: every field of the model comes from the host's root.
func TestReadFixture(t *testing.T) {
	h := fixture(t)
	tab, err := Read(context.Background(), h, Options{EnvKeys: []string{"RANK", "LOCAL_RANK", "WORLD_SIZE"}})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tab.Lookup(fixturePID)
	if !ok {
		t.Fatalf("pid %d not read; table %+v", fixturePID, tab.All())
	}
	want := Process{PID: fixturePID, PPID: 4194306, PGID: 4194300, SID: 4194300, NSpid: []int{fixturePID, 7}, PIDNS: "pid:[4026532999]",
		UIDs: []int{1000, 1001, 1002, 1003}, State: "S", Comm: "pt main (x)", Cmdline: []string{"python", "-u", "train.py"},
		Env: map[string]string{"RANK": "3", "LOCAL_RANK": "3"}, EnvReadable: true, StartTicks: 500000, Threads: 2, CPUTicks: 320}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("process =\n%+v\nwant\n%+v", p, want)
	}
	if tab.Skipped != 1 || len(tab.All()) != 2 || tab.Self != 77 || !tab.InitNamespace {
		t.Errorf("skipped %d, %d processes, self %d, init ns %v", tab.Skipped, len(tab.All()), tab.Self, tab.InitNamespace)
	}
	if c := tab.Children(4194306); len(c) != 1 || c[0].PID != fixturePID {
		t.Errorf("children = %+v", c)
	}
	if d := tab.Descendants(0); len(d) != 2 || d[0].PID != fixturePID || d[1].PID != 4194306 {
		t.Errorf("descendants of 0 = %+v", d)
	}
	if p.NSLocalPID() != 7 || p.IsNamespaceInit() || p.UID() != 1000 {
		t.Errorf("NSLocalPID %d, ns init %v, uid %d", p.NSLocalPID(), p.IsNamespaceInit(), p.UID())
	}
	if tini, _ := tab.Lookup(4194306); !tini.IsNamespaceInit() || tab.IsMachineInit(tini) {
		t.Errorf("tini: %+v", tini)
	}
	// started 5000 s after boot; the fixture's clock says boot + 5000 s + 0 → age 0;
	// a clock an hour later makes it an hour old.
	h.Clock = func() time.Time { return time.Unix(1700000000+5000+3600, 0) }
	if got := Age(h, p); got != time.Hour {
		t.Errorf("age = %s", got)
	}
	ts, err := Tasks(h, fixturePID)
	if err != nil || len(ts) != 2 || ts[1].State != "D" || ts[1].CPUTicks != 220 {
		t.Errorf("tasks = %+v, %v", ts, err)
	}
}

// TestGopsutilHonoursRoot verifies, field by field, that the gopsutil calls
// this package makes read the fixture's root and not the real /proc, and
// shows the one it must not make: NewProcessWithContext probes the real
// PID (kill(pid, 0) when the root is not a mount point) and so does not
// find a fixture process.
func TestGopsutilHonoursRoot(t *testing.T) {
	h := fixture(t)
	ctx := h.GopsutilContext(context.Background())
	pids, err := process.PidsWithContext(ctx)
	if err != nil || !reflect.DeepEqual(pids, []int32{4194305, 4194306, 4194308}) {
		t.Errorf("Pids = %v, %v", pids, err)
	}
	gp := &process.Process{Pid: fixturePID}
	if c, err := gp.CmdlineSliceWithContext(ctx); err != nil || !reflect.DeepEqual(c, []string{"python", "-u", "train.py"}) {
		t.Errorf("CmdlineSlice = %v, %v", c, err)
	}
	if e, err := gp.EnvironWithContext(ctx); err != nil || len(e) < 3 || e[0] != "RANK=3" {
		t.Errorf("Environ = %v, %v", e, err)
	}
	if u, err := gp.UidsWithContext(ctx); err != nil || !reflect.DeepEqual(u, []uint32{1000, 1001, 1002, 1003}) {
		t.Errorf("Uids = %v, %v", u, err)
	}
	if n, err := gp.NumThreadsWithContext(ctx); err != nil || n != 2 {
		t.Errorf("NumThreads = %v, %v", n, err)
	}
	if pp, err := gp.PpidWithContext(ctx); err != nil || pp != 4194306 {
		t.Errorf("Ppid = %v, %v", pp, err)
	}
	if th, err := gp.ThreadsWithContext(ctx); err != nil || len(th) != 2 {
		t.Errorf("Threads = %v, %v", th, err)
	}
	if _, err := process.NewProcessWithContext(ctx, fixturePID); err == nil {
		t.Error("NewProcessWithContext found the fixture process: if gopsutil stopped probing the real PID, proctab may use it")
	}
}

// TestSampleRealProcesses: a child that works shows progress over a
// second; one that sleeps does not.
func TestSampleRealProcesses(t *testing.T) {
	busy := exec.Command("sh", "-c", "while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.1; done")
	idle := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{busy, idle} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	time.Sleep(100 * time.Millisecond)
	h := host.Local(host.LocalOptions{NoNVML: true})
	got, err := Sample(context.Background(), h, []int{busy.Process.Pid, idle.Process.Pid}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if b := got[busy.Process.Pid]; !b.Progressed() || b.Gone {
		t.Errorf("busy: %+v (%s)", b, b)
	}
	if i := got[idle.Process.Pid]; i.Progressed() || i.Gone || i.Threads != 1 || i.Live != 1 {
		t.Errorf("idle: %+v (%s)", i, i)
	}
}

func TestParseStat(t *testing.T) {
	st, err := parseStat([]byte("4242 (pt_main_thread (x)) S 1 4242 4242 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 5000 0 0\n"))
	if err != nil || st.pid != 4242 || st.comm != "pt_main_thread (x)" || st.state != "S" || st.ppid != 1 || st.start != 5000 || st.cpuTicks != 10 {
		t.Errorf("parseStat = %+v, %v", st, err)
	}
	// A name may hold ") " itself: fields are counted from the last ')'.
	if st, err := parseStat([]byte("12 (a) b (c)) R 1 12 12 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242 7 8")); err != nil || st.comm != "a) b (c)" || st.state != "R" || st.start != 4242 {
		t.Errorf("parseStat of a name with ') ' = %+v, %v", st, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S", "12 sleep S 1 12 12 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242", "x (y) S 1 2 3 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0", "1 (x) S a 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (a) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = parseStat(b) })
}

// TestReadStatusAndSelf: the status-only reads give the name (unescaped
// like the kernel's comm), ids, groups and capabilities from one file.
func TestReadStatusAndSelf(t *testing.T) {
	h := ft.Tree(t, map[string]any{
		"/proc/self/status": "Name:\tncclwiz\nState:\tR (running)\nPid:\t77\nPPid:\t1\nUid:\t0\t0\t0\t0\nGid:\t5\t6\t7\t8\n" +
			"Groups:\t4 27 \nNSpid:\t77\t3\nNSpgid:\t70\t1\nThreads:\t3\nCapEff:\t000001ffffffffff\nUmask:\t0027\n",
		"/proc/4194305/status": "Name:\tbad\\\\name\\n1\nState:\tS (sleeping)\nPid:\t4194305\nPPid:\t9\nUid:\t1000\t1000\t1000\t1000\n",
		"/proc/4194306/status": "Uid:\t5\t5\t5\t5\n", // a short fixture
		"/proc/4194307/stat":   "4194307 (a) Z 1 2 3 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 99 0 0\n",
	}, host.FixtureSpec{})
	self, err := Self(h)
	want := Process{PID: 77, PPID: 1, Comm: "ncclwiz", State: "R", UIDs: []int{0, 0, 0, 0}, GIDs: []int{5, 6, 7, 8},
		Groups: []int{4, 27}, NSpid: []int{77, 3}, NSpgid: []int{70, 1}, Threads: 3, CapEff: 0x1ffffffffff, Umask: 0o027, UmaskKnown: true}
	if err != nil || !reflect.DeepEqual(self, want) {
		t.Errorf("Self = %+v, %v;\nwant %+v", self, err, want)
	}
	for _, tt := range []struct {
		pid  int
		want Process
		ok   bool
	}{
		{4194305, Process{PID: 4194305, PPID: 9, Comm: "bad\\name\n1", State: "S", UIDs: []int{1000, 1000, 1000, 1000}}, true},
		{4194306, Process{PID: 4194306, UIDs: []int{5, 5, 5, 5}}, true},
		{4194307, Process{}, false}, // no status
		{0, Process{}, false},
		{-3, Process{}, false},
	} {
		got, err := ReadStatus(h, tt.pid)
		if (err == nil) != tt.ok || (tt.ok && !reflect.DeepEqual(got, tt.want)) {
			t.Errorf("ReadStatus(%d) = %+v, %v; want %+v", tt.pid, got, err, tt.want)
		}
	}
	st, err := ReadStat(h, 4194307)
	if err != nil || st.Comm != "a" || st.State != "Z" || st.StartTicks != 99 || st.CPUTicks != 3 || st.PGID != 2 || st.UIDs != nil {
		t.Errorf("ReadStat = %+v, %v", st, err)
	}
	if _, err := ReadStat(h, 4194305); err == nil {
		t.Error("ReadStat of a process without stat succeeded")
	}
}

func TestUnescapeName(t *testing.T) {
	for in, want := range map[string]string{"python": "python", `a\nb`: "a\nb", `a\\b`: `a\b`, `a\\nb`: `a\nb`, `x\`: `x\`, `a\tb`: `a\tb`} {
		if got := unescapeName(in); got != want {
			t.Errorf("unescapeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStatOnlyTable: a poll reads stat alone (no status, command line or
// environment), and still links parents and children.
func TestStatOnlyTable(t *testing.T) {
	h := fixture(t)
	tab, err := Read(context.Background(), h, Options{StatOnly: true, EnvKeys: []string{"RANK"}})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tab.Lookup(fixturePID)
	if !ok || p.PPID != 4194306 || p.StartTicks != 500000 || p.Comm != "pt main (x)" || p.UIDs != nil || p.Cmdline != nil || p.Env != nil || p.PIDNS != "" {
		t.Errorf("stat-only process = %+v, %v", p, ok)
	}
	if tab.EnvUnreadable != 0 {
		t.Errorf("EnvUnreadable = %d in a stat-only table", tab.EnvUnreadable)
	}
	if d := tab.Descendants(4194306); len(d) != 1 || d[0].PID != fixturePID {
		t.Errorf("Descendants = %+v", d)
	}
}

// TestIOAndWakeups: this test's own process writes and sleeps; its I/O
// accounting and its main thread's wake-ups grow.
func TestIOAndWakeups(t *testing.T) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	pid := os.Getpid()
	a, err := ReadIO(h, pid, 0)
	if err != nil {
		t.Skipf("no I/O accounting here: %v", err)
	}
	w0 := Wakeups(h, pid, pid)
	f, err := os.Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, err := ReadIO(h, pid, 0)
	if err != nil || b.WChar < a.WChar+4096 || b.SyscW <= a.SyscW {
		t.Errorf("wchar %d → %d, syscw %d → %d (%v)", a.WChar, b.WChar, a.SyscW, b.SyscW, err)
	}
	if w0 < 0 || Wakeups(h, pid, 999999999) != -1 {
		t.Errorf("wakeups %d; of a missing thread %d", w0, Wakeups(h, pid, 999999999))
	}
	files, err := MappedFiles(h, pid)
	if err != nil || len(files) == 0 || !strings.HasPrefix(files[0], "/") {
		t.Errorf("mapped files %v %v", files, err)
	}
}
