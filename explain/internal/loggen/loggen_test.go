package loggen

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/guides"
)

// The grep -E rewrite of each signature matches the same sample lines as
// the Go pattern, so the benchmark compares like with like.
func TestEREAgreesWithGo(t *testing.T) {
	if _, err := exec.LookPath("grep"); err != nil {
		t.Skip("grep not installed")
	}
	lib, err := guides.Load()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, s := range lib.Signatures() {
		ere, err := ERE(s.Pattern)
		if err != nil {
			t.Fatalf("%s: %v", s.ID, err)
		}
		lines := samples(t, s.ID)
		if len(lines) == 0 {
			continue
		}
		in := filepath.Join(dir, s.ID+".txt")
		os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		pat := filepath.Join(dir, s.ID+".pat")
		os.WriteFile(pat, []byte(ere+"\n"), 0o644)
		out, _ := exec.Command("grep", "-E", "-n", "-f", pat, in).Output()
		got := map[int]bool{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if n, _, ok := strings.Cut(l, ":"); ok {
				got[atoi(n)] = true
			}
		}
		re := regexp.MustCompile(s.Pattern)
		for i, l := range lines {
			if re.MatchString(l) != got[i+1] {
				t.Errorf("%s: Go %v, grep %v on %q (ERE %s)", s.ID, re.MatchString(l), got[i+1], l, ere)
			}
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func samples(t *testing.T, id string) []string {
	f, err := os.Open(filepath.Join("..", "..", "..", "guides", "testdata", "signatures", id+".txt"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimPrefix(sc.Text(), "!")
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func TestGenerateSize(t *testing.T) {
	var buf bytes.Buffer
	n, err := Generate(&buf, Options{Size: 1 << 20, Seed: 3})
	if err != nil || n != int64(buf.Len()) || n < 1<<20 || n > 1<<20+64<<10 {
		t.Fatalf("n=%d len=%d err=%v", n, buf.Len(), err)
	}
	if !bytes.Contains(buf.Bytes(), []byte("Watchdog caught collective operation timeout")) || !bytes.Contains(buf.Bytes(), []byte("NCCL version 2.21.5+cuda12.4")) {
		t.Fatal("missing expected lines")
	}
}

// The realistic job has the size asked for, 16 interleaved ranks behind
// torchrun prefixes, the NCCL 2.30 formats the benchmark is about, and
// ends with the watchdog timeout.
func TestGenerateRealistic(t *testing.T) {
	var buf bytes.Buffer
	n, err := Generate(&buf, Options{Size: 4 << 20, Seed: 7, Realistic: true})
	if err != nil || n != int64(buf.Len()) || n < 4<<20 || n > 4<<20+1<<20 {
		t.Fatalf("n=%d len=%d err=%v", n, buf.Len(), err)
	}
	log := buf.String()
	for _, want := range []string{
		"[rank15]:gpu-node-02:", "NCCL INFO Channel 00/32 :", "[send] via NET/IB/", "[receive] via NET/IB/",
		"via P2P/CUMEM/read", "Connected all rings, use ring PXN 0 GDR 1", "ncclCommSplit comm 0x", "nNodes 2 localRanks 8",
		"Trees [0] ", "Ring 00 : ", "AllReduce: opCount ", "\rTraining: ", "Watchdog caught collective operation timeout",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("no %q in the realistic log", want)
		}
	}
	// Ranks interleave: a rank's line is often followed by another's.
	lines := strings.Split(log, "\n")
	switches := 0
	for i := 1; i < len(lines); i++ {
		a, _, _ := strings.Cut(lines[i-1], ":")
		b, _, _ := strings.Cut(lines[i], ":")
		if strings.HasPrefix(a, "[rank") && strings.HasPrefix(b, "[rank") && a != b {
			switches++
		}
	}
	if switches < len(lines)/10 {
		t.Errorf("%d rank switches in %d lines: not interleaved", switches, len(lines))
	}
}

// The init-heavy log has the size asked for, is nearly all NCCL INFO set-up
// lines of every kind the digest and the GRAPH subsystem print, has no COLL
// lines beyond a few steps of training, and ends with the watchdog timeout.
func TestGenerateInitHeavy(t *testing.T) {
	var buf bytes.Buffer
	n, err := Generate(&buf, Options{Size: 4 << 20, Seed: 7, InitHeavy: true})
	if err != nil || n != int64(buf.Len()) || n < 4<<20 || n > 4<<20+2<<20 {
		t.Fatalf("n=%d len=%d err=%v", n, buf.Len(), err)
	}
	log := buf.String()
	for _, want := range []string{
		"NCCL INFO NCCL_IB_HCA set by environment to ", "NCCL INFO Bootstrap: Using ib0:", "NCCL INFO NET/IB : Using [0]mlx5_0",
		"NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 7 'mlx5_7'", "=== System : maxBw ", "+ PCI[48.0] - GPU/0-",
		"Pattern 4, crossNic 0, nChannels 16, bw ", " 0 : NET/0-0 GPU/0-18000", "Tree 0 : -1 -> 0 -> 1/-1/-1",
		"Ring 00 : 15 -> 0 -> 1", "[receive] via NET/IB/", "Worker group FAILED", "ncclCommSplit comm 0x",
		"Watchdog caught collective operation timeout",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("no %q in the init-heavy log", want)
		}
	}
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	info, coll := 0, 0
	for _, l := range lines {
		if strings.Contains(l, " NCCL INFO ") {
			info++
		}
		if strings.Contains(l, ": opCount ") {
			coll++
		}
	}
	if info < len(lines)*95/100 || coll > len(lines)/20 {
		t.Errorf("%d lines: %d NCCL INFO, %d COLL: not an init-heavy log", len(lines), info, coll)
	}
}
