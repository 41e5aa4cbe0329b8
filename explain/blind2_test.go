package explain

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The second blind set (testdata/blind2/) was written by a helper who had
// not read the explainer, its catalogue or its answers: 46 logs from public
// threads that neither the corpus nor the first blind set models, labelled
// from each thread's own conclusion, committed before the explainer was run
// on them, and scored once. It measures how far the explainer generalises
// beyond the examples its authors wrote. Its logs and labels are not to be
// edited to match the explainer, and a miss is not to be fixed by a pattern
// for one log.

// Blind2 floors and ceilings: measured once when the set was frozen (top-1
// 40/46, rank 9/11, one false all-clear, no false alarm, three NCCL
// failures called not NCCL; docs/explain.md), the floors a log under that,
// so that a change that loses ground fails.
// blind2Digest pins the set itself: a log or label edited after scoring
// changes it (a fix of a transcription mistake must say so where it
// updates the digest).
const (
	blind2MinTop1    = 0.84
	blind2MinRank    = 0.72
	blind2MaxClears  = 1
	blind2MaxAlarms  = 0
	blind2MaxNotNCCL = 3
	blind2Frozen     = 46
	blind2Digest     = "f3f3734037096c457dfe6215318576b2b508e313da362fa7166f3e7fd7fd748a"
)

// TestBlind2Score scores the second blind set like TestBlindScore: top-1
// root, the rank the root names where the label gives one, false
// all-clears, false NCCL alarms and NCCL failures called not NCCL. Misses
// are logged; the test fails under the floors, over the ceilings, or when
// the set was edited.
func TestBlind2Score(t *testing.T) {
	t.Parallel()
	e := testExplainer(t)
	dir := filepath.Join("testdata", "blind2")
	entries, err := os.ReadDir(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	var n, top1, ranked, rankRight, clears, alarms, cleared int
	for _, ent := range entries {
		name := ent.Name()
		b, err := os.ReadFile(filepath.Join(dir, "labels", name+".yaml"))
		if err != nil {
			t.Fatalf("%s: no label: %v", name, err)
		}
		var l blindLabel
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("%s: label: %v", name, err)
		}
		if !strings.HasPrefix(l.Thread, "https://") {
			t.Errorf("%s: the label names no thread", name)
		}
		r := analyzeCorpus(t, e, filepath.Join(dir, "logs", name))
		root := rootOf(r)
		got, conf := "", ""
		if root != nil {
			got, conf = root.ID, root.Confidence
		}
		n++
		if got == l.Root || (got != "" && slices.Contains(l.Accept, got)) {
			top1++
		} else {
			t.Logf("miss: %s: got %s (%s), want %s", name, or(got, "none"), conf, or(l.Root, "none"))
		}
		if l.Root != "" && len(r.Diagnoses) == 0 {
			clears++
			t.Logf("false all-clear: %s: no diagnosis on a log whose thread found %s", name, l.Root)
		}
		if l.NotNCCL && root != nil && !root.NotNCCL {
			alarms++
			t.Logf("false NCCL alarm: %s: root %s for a cause that is not NCCL", name, got)
		}
		// The other direction: a failure the thread placed in NCCL or c10d
		// that the explainer calls "not NCCL" sends the user away from it.
		if !l.NotNCCL && l.Root != "" && root != nil && root.NotNCCL {
			cleared++
			t.Logf("false not-NCCL verdict: %s: root %s (not NCCL) for %s", name, got, l.Root)
		}
		if l.Rank != nil {
			ranked++
			if nr := namedRank(root); nr == *l.Rank {
				rankRight++
			} else {
				t.Logf("rank miss: %s: root names rank %d, want %d", name, nr, *l.Rank)
			}
		}
	}
	score := float64(top1) / float64(max(n, 1))
	rscore := float64(rankRight) / float64(max(ranked, 1))
	t.Logf("blind2: %d logs, top-1 %d/%d (%.1f%%), rank %d/%d (%.1f%%), false all-clears %d, false NCCL alarms %d, false not-NCCL verdicts %d",
		n, top1, n, 100*score, rankRight, ranked, 100*rscore, clears, alarms, cleared)
	if d := blind2SetDigest(t, dir); d != blind2Digest {
		t.Errorf("the second blind set changed after it was scored (digest %s, frozen %s)", d, blind2Digest)
	}
	if n != blind2Frozen {
		t.Errorf("the second blind set has %d logs; it was frozen with %d", n, blind2Frozen)
	}
	if score < blind2MinTop1 {
		t.Errorf("blind2 top-1 %.1f%% is under %.0f%%", 100*score, 100*blind2MinTop1)
	}
	if rscore < blind2MinRank {
		t.Errorf("blind2 rank %.1f%% is under %.0f%%", 100*rscore, 100*blind2MinRank)
	}
	if clears > blind2MaxClears {
		t.Errorf("blind2: %d false all-clears, more than the %d measured when it was frozen", clears, blind2MaxClears)
	}
	if alarms > blind2MaxAlarms {
		t.Errorf("blind2: %d false NCCL alarms, more than the %d measured when it was frozen", alarms, blind2MaxAlarms)
	}
	if cleared > blind2MaxNotNCCL {
		t.Errorf("blind2: %d NCCL failures called not NCCL, more than the %d measured when it was frozen", cleared, blind2MaxNotNCCL)
	}
}

// blind2SetDigest hashes every file under the set (path and bytes, in
// path order) so that an edit to a log or label after scoring is seen.
func blind2SetDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return err
		}
		h.Write([]byte(p))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
