package remote

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/cluster"
	"github.com/ncclwiz/ncclwiz/internal/hostiletest"
)

// The fan-out simulation: a small sh script stands in for ssh, answering
// the probe, the clock and the check like a node with the shared binary,
// and logging when each call ran. It simulates the engine's side of 1,000
// nodes (processes, parallelism, timeouts) without 1,000 machines; the
// real ssh path is TestClusterCheckOverSSHAndPDSH in cli.
const fakeSSHScript = `#!/bin/sh
start=$(date +%s%N)
for a in "$@"; do [ "$a" = -O ] && exit 0; done  # ssh -O exit: no master
for a in "$@"; do host=$script; script=$a; done  # the last two: host, command
log() { echo "$start $(date +%s%N)" >> "$FAKE_LOG"; }
case "$host" in dead*) echo "ssh: connect to host $host port 22: Connection refused" >&2; log; exit 255;; esac
case "$script" in
*@@ncclwiz-version@@*) echo "@@ncclwiz-date@@ $(date +%s.%N)"; echo "@@ncclwiz-version@@ ncclwiz sim"; echo "@@ncclwiz-sum@@ $FAKE_SUM";;
*@@ncclwiz-date@@*) echo "@@ncclwiz-date@@ $(date +%s.%N)";;
*) sleep "$FAKE_DELAY"; cat "$FAKE_REPORT";;
esac
log
`

func TestMain(m *testing.M) {
	hostiletest.Main(map[string]hostiletest.Reader{"from-json": readFromJSON})
	if os.Getenv(envFakeSrunNodes) != "" {
		os.Exit(fakeSrun(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// simulate runs the ssh engine over n simulated nodes (every 30th dead)
// and returns the nodes and the peak number of ssh processes at once.
func simulate(t testing.TB, n, fanout int, delay time.Duration) ([]cluster.Node, int) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "ncclwiz")
	if err := os.WriteFile(bin, []byte("binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	sum, _ := FileSum(bin)
	rep := filepath.Join(dir, "report.json")
	if err := os.WriteFile(rep, []byte(`{"schema":1,"tool":"ncclwiz","version":"sim","generated_at":"2026-01-01T00:00:00Z","host":{"name":"x","kind":"local","shm_dir":"/dev/shm","uid":0,"euid":0,"simulated":false},"summary":{},"checks":[],"findings":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "calls.log")
	fake := filepath.Join(dir, "ssh")
	if err := os.WriteFile(fake, []byte(fakeSSHScript), 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"FAKE_LOG": log, "FAKE_SUM": sum, "FAKE_REPORT": rep, "FAKE_DELAY": fmt.Sprintf("%.3f", delay.Seconds())} {
		t.Setenv(k, v)
	}
	eng, err := NewSSH(Options{SSH: fake, LocalBinary: bin, Fanout: fanout, ConnectTimeout: 5 * time.Second, NodeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("node%04d", i)
		if i%30 == 29 {
			hosts[i] = fmt.Sprintf("dead%04d", i)
		}
	}
	out, err := eng.Run(context.Background(), hosts)
	if err != nil {
		t.Fatal(err)
	}
	return out.Nodes, peak(t, log)
}

// peak is the most calls whose [start, end] intervals overlap.
func peak(t testing.TB, log string) int {
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		a, b, _ := strings.Cut(sc.Text(), " ")
		s, _ := strconv.ParseInt(a, 10, 64)
		e, _ := strconv.ParseInt(b, 10, 64)
		evs = append(evs, ev{s, 1}, ev{e, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta
	})
	cur, top := 0, 0
	for _, e := range evs {
		cur += e.delta
		top = max(top, cur)
	}
	return top
}

// TestSSHFanoutBounded: never more ssh processes than --fanout, every
// node accounted for (the dead ones as refused).
func TestSSHFanoutBounded(t *testing.T) {
	nodes, top := simulate(t, 120, 6, 10*time.Millisecond)
	if top > 6 {
		t.Errorf("%d ssh processes at once, fanout 6", top)
	}
	counts := map[string]int{}
	for _, n := range nodes {
		counts[string(n.Status)+"/"+n.Reason]++
		if n.Status == cluster.StatusOK && (n.Delivery != "shared" || n.Report == nil || n.ClockOffset == nil) {
			t.Errorf("%s: %+v", n.Name, n)
		}
	}
	if counts["ok/"] != 116 || counts["unreachable/refused"] != 4 {
		t.Errorf("outcomes %v", counts)
	}
	t.Logf("peak %d ssh processes at once", top)
}

// BenchmarkSSHFanout1000 simulates 1,000 nodes (33 dead) with a 100 ms
// check each, at fan-out 32 and 128: wall time per run is what README
// quotes. Run with -benchtime=1x; it spawns ~4,000 ssh stand-ins per run.
func BenchmarkSSHFanout1000(b *testing.B) {
	for _, fanout := range []int{32, 128} {
		b.Run(fmt.Sprintf("fanout%d", fanout), func(b *testing.B) {
			for range b.N {
				_, top := simulate(b, 1000, fanout, 100*time.Millisecond)
				b.ReportMetric(float64(top), "peak-ssh")
			}
		})
	}
}
