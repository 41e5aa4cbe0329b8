package flightrec

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
)

// writeDumps runs testdata/write_dumps.py, which writes dumps with the
// structure PyTorch's flight recorder writes.
func writeDumps(t *testing.T, scenario, version, format string) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	out, err := exec.Command(py, "testdata/write_dumps.py", dir, scenario, version, format).CombinedOutput()
	if err != nil {
		t.Fatalf("write_dumps.py: %v\n%s", err, out)
	}
	return dir
}

func TestAnalyzeScenarios(t *testing.T) {
	cases := []struct {
		scenario string
		suspects string
		kind     string
	}{
		{"desync", "[2]", "op"},
		{"missing", "[3]", ""},
		{"lagging", "[1]", "missing"},
		{"healthy", "[]", ""},
	}
	for _, version := range []string{"2.3", "2.4", "2.7", "2.10"} {
		for _, format := range []string{"pickle", "json"} {
			for _, tc := range cases {
				t.Run(fmt.Sprintf("%s/%s/%s", version, format, tc.scenario), func(t *testing.T) {
					dir := writeDumps(t, tc.scenario, version, format)
					h := host.Local(host.LocalOptions{})
					f := Find(context.Background(), h, "", filepath.Join(dir, "nccl_trace_rank_"), time.Time{})
					if len(f.Skipped) > 0 {
						t.Fatalf("skipped %v", f.Skipped)
					}
					groups := Analyze(f.Dumps)
					if len(groups) != 1 {
						t.Fatalf("%d groups", len(groups))
					}
					g := groups[0]
					got := fmt.Sprint(g.Suspects)
					if g.Suspects == nil {
						got = "[]"
					}
					if got != tc.suspects {
						t.Fatalf("suspects %s, want %s: %s (%+v)", got, tc.suspects, g.Verdict, g)
					}
					if tc.kind != "" && (g.First == nil || g.First.Kind != tc.kind) {
						t.Fatalf("first disagreement %+v, want kind %s", g.First, tc.kind)
					}
					if g.Desc != "default_pg" || len(g.Ranks) != 4 {
						t.Fatalf("group %+v", g)
					}
				})
			}
		}
	}
}

func TestFindSkips(t *testing.T) {
	dir := writeDumps(t, "healthy", "2.10", "pickle")
	p := filepath.Join(dir, "nccl_trace_rank_")
	if err := os.Symlink("/etc/passwd", p+"7"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+"8", []byte("\x80\x02X\xff\xff\xff\x7f"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := host.Local(host.LocalOptions{})
	f := Find(context.Background(), h, "", p, time.Time{})
	if len(f.Dumps) != 4 || len(f.Skipped) != 2 {
		t.Fatalf("dumps %d, skipped %v", len(f.Dumps), f.Skipped)
	}
	later := Find(context.Background(), h, "", p, time.Now().Add(time.Hour))
	if len(later.Dumps) != 0 {
		t.Fatalf("dumps older than the job were read: %d", len(later.Dumps))
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"seed-desync-rank2.pickle", "seed-lagging-rank1.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("\x80\x02]q\x00h\x00a."))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b, 0)
		if err == nil {
			_ = Analyze([]*Dump{d})
		}
	})
}
