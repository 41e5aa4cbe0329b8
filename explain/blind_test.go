package explain

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The blind set (testdata/blind/) is kept apart from the development
// corpus: 80 logs written from public threads whose failure shapes the
// corpus did not model, labelled and scored once on the explainer as it
// was before they existed (docs/explain.md has both numbers). Tuning the
// explainer to these logs defeats their purpose: a miss here is fixed in
// the catalogue or the reading, never by a pattern for one log.

// blindLabel is a corpusLabel plus the rank the root must name, when the
// log says which rank failed.
type blindLabel struct {
	Root    string   `yaml:"root"`
	Accept  []string `yaml:"accept"`
	NotNCCL bool     `yaml:"not_nccl"`
	Rank    *int     `yaml:"rank"`
	Thread  string   `yaml:"thread"`
}

// Blind-set floors: set from the score at the end of issue 24 with a
// margin for one or two logs, so that a change that loses ground fails.
const (
	blindMinTop1 = 0.90
	blindMinRank = 0.85
)

// TestBlindScore scores the blind set: top-1 root, the rank the root
// names where the label gives one, false all-clears ("No NCCL failure
// found" on a log with a failure) and false NCCL alarms. Misses are
// printed; the test fails under the floors or on any false all-clear.
func TestBlindScore(t *testing.T) {
	e := testExplainer(t)
	dir := filepath.Join("testdata", "blind")
	entries, err := os.ReadDir(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	var n, top1, ranked, rankRight, clears, alarms int
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
		if strings.TrimSpace(l.Thread) == "" {
			t.Errorf("%s: the label names no thread", name)
		}
		r := analyzeCorpus(t, e, filepath.Join(dir, "logs", name))
		root := rootOf(r)
		got, conf := "", ""
		if root != nil {
			got, conf = root.ID, root.Confidence
		}
		n++
		right := got == l.Root || (got != "" && slices.Contains(l.Accept, got))
		if right {
			top1++
		} else {
			t.Logf("miss: %s: got %s (%s), want %s", name, or(got, "none"), conf, or(l.Root, "none"))
		}
		if l.Root != "" && len(r.Diagnoses) == 0 {
			clears++
			t.Errorf("%s: false all-clear (no diagnosis) on a log whose thread found %s", name, l.Root)
		}
		if l.NotNCCL && root != nil && !root.NotNCCL {
			alarms++
			t.Logf("false NCCL alarm: %s: root %s for a cause that is not NCCL", name, got)
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
	t.Logf("blind: %d logs, top-1 %d/%d (%.1f%%), rank %d/%d (%.1f%%), false all-clears %d, false NCCL alarms %d",
		n, top1, n, 100*score, rankRight, ranked, 100*rscore, clears, alarms)
	if n < 60 {
		t.Errorf("the blind set has %d logs; it was frozen with 80", n)
	}
	if score < blindMinTop1 {
		t.Errorf("blind top-1 %.1f%% is under %.0f%%", 100*score, 100*blindMinTop1)
	}
	if rscore < blindMinRank {
		t.Errorf("blind rank %.1f%% is under %.0f%%", 100*rscore, 100*blindMinRank)
	}
}

// namedRank is the one rank a root diagnosis blames: the single straggler
// of a watchdog decode, else its only rank; -1 when it names none or
// several.
func namedRank(d *Diagnosis) int {
	if d == nil {
		return -1
	}
	if d.Culprit != nil {
		return *d.Culprit
	}
	if w := d.Watchdog; w != nil && len(w.Stragglers) == 1 {
		return w.Stragglers[0]
	}
	if len(d.Ranks) == 1 {
		return d.Ranks[0]
	}
	return -1
}
