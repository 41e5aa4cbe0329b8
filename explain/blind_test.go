package explain

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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

// Blind-set floors: a log under the score after the second blind set's
// classes were fixed (80/80, ranks 25/25; 77/80 before, when gloo's lone
// "Connection closed by peer" was consequences only), so that a change
// that loses ground fails.
const (
	blindMinTop1 = 0.98
	blindMinRank = 0.95
)

// TestBlindScore scores the blind set: top-1 root, the rank the root
// names where the label gives one, false all-clears ("No NCCL failure
// found" on a log with a failure) and false NCCL alarms. Misses are
// printed; the test fails under the floors or on any false all-clear.
func TestBlindScore(t *testing.T) {
	sc := scoreBlindSet(t, filepath.Join("testdata", "blind"), func(th string) bool { return strings.TrimSpace(th) != "" })
	t.Logf("blind: %s", sc)
	if sc.n < 60 {
		t.Errorf("the blind set has %d logs; it was frozen with 80", sc.n)
	}
	if sc.clears > 0 {
		t.Errorf("blind: %d false all-clears", sc.clears)
	}
	if sc.top1Rate() < blindMinTop1 {
		t.Errorf("blind top-1 %.1f%% is under %.0f%%", 100*sc.top1Rate(), 100*blindMinTop1)
	}
	if sc.rankRate() < blindMinRank {
		t.Errorf("blind rank %.1f%% is under %.0f%%", 100*sc.rankRate(), 100*blindMinRank)
	}
}

// blindScore is what scoring a blind set counted.
// blindFloors is what a frozen blind set must keep: rates under which
// it fails, counts over which it fails, and the set itself (its size and
// the digest of its files, so that an edit after scoring is seen).
type blindFloors struct {
	name                 string
	minTop1, minRank     float64
	maxClears, maxAlarms int
	maxNotNCCL, frozen   int
	digest               string
}

// checkBlindSet scores the set in dir and fails under f's floors.
func checkBlindSet(t *testing.T, dir string, f blindFloors) {
	t.Helper()
	sc := scoreBlindSet(t, dir, func(th string) bool { return strings.HasPrefix(th, "https://") })
	t.Logf("%s: %s", f.name, sc)
	if d := blindSetDigest(t, dir); d != f.digest {
		t.Errorf("%s changed after it was scored (digest %s, frozen %s)", f.name, d, f.digest)
	}
	if sc.n != f.frozen {
		t.Errorf("%s has %d logs; it was frozen with %d", f.name, sc.n, f.frozen)
	}
	if sc.top1Rate() < f.minTop1 {
		t.Errorf("%s top-1 %.1f%% is under %.0f%%", f.name, 100*sc.top1Rate(), 100*f.minTop1)
	}
	if sc.rankRate() < f.minRank {
		t.Errorf("%s rank %.1f%% is under %.0f%%", f.name, 100*sc.rankRate(), 100*f.minRank)
	}
	for _, c := range []struct {
		got, max int
		what     string
	}{{sc.clears, f.maxClears, "false all-clears"}, {sc.alarms, f.maxAlarms, "false NCCL alarms"}, {sc.notNCCL, f.maxNotNCCL, "NCCL failures called not NCCL"}} {
		if c.got > c.max {
			t.Errorf("%s: %d %s, more than the %d allowed", f.name, c.got, c.what, c.max)
		}
	}
}

type blindScore struct {
	n, top1, ranked, rankRight int
	clears                     int // no diagnosis on a log with a failure
	alarms                     int // an NCCL root for a cause that is not NCCL
	notNCCL                    int // a not-NCCL root for an NCCL, c10d or gloo failure
}

func (b blindScore) top1Rate() float64 { return float64(b.top1) / float64(max(b.n, 1)) }
func (b blindScore) rankRate() float64 { return float64(b.rankRight) / float64(max(b.ranked, 1)) }

func (b blindScore) String() string {
	return fmt.Sprintf("%d logs, top-1 %d/%d (%.1f%%), rank %d/%d (%.1f%%), false all-clears %d, false NCCL alarms %d, false not-NCCL verdicts %d",
		b.n, b.top1, b.n, 100*b.top1Rate(), b.rankRight, b.ranked, 100*b.rankRate(), b.clears, b.alarms, b.notNCCL)
}

// scoreBlindSet scores every log of dir/logs against its label in
// dir/labels (top-1 root or an accepted one, the rank the root names,
// all-clears, alarms both ways), logging each miss; threadOK checks the
// label's thread.
func scoreBlindSet(t *testing.T, dir string, threadOK func(string) bool) blindScore {
	t.Helper()
	e := testExplainer(t)
	entries, err := os.ReadDir(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	var sc blindScore
	for _, ent := range entries {
		name := ent.Name()
		var l blindLabel
		decodeLabel(t, filepath.Join(dir, "labels", name+".yaml"), &l)
		if !threadOK(l.Thread) {
			t.Errorf("%s: the label names no thread", name)
		}
		r := analyzeCorpus(t, e, filepath.Join(dir, "logs", name))
		root := rootOf(r)
		got, conf := "", ""
		if root != nil {
			got, conf = root.ID, root.Confidence
		}
		sc.n++
		if got == l.Root || (got != "" && slices.Contains(l.Accept, got)) {
			sc.top1++
		} else {
			t.Logf("miss: %s: got %s (%s), want %s", name, or(got, "none"), conf, or(l.Root, "none"))
		}
		if l.Root != "" && len(r.Diagnoses) == 0 {
			sc.clears++
			t.Logf("false all-clear: %s: no diagnosis on a log whose thread found %s", name, l.Root)
		}
		if l.NotNCCL && root != nil && !root.NotNCCL {
			sc.alarms++
			t.Logf("false NCCL alarm: %s: root %s for a cause that is not NCCL", name, got)
		}
		// The other direction: a failure the thread placed in NCCL or c10d
		// that the explainer calls "not NCCL" sends the user away from it.
		if !l.NotNCCL && l.Root != "" && root != nil && root.NotNCCL {
			sc.notNCCL++
			t.Logf("false not-NCCL verdict: %s: root %s (not NCCL) for %s", name, got, l.Root)
		}
		if l.Rank != nil {
			sc.ranked++
			if nr := namedRank(root); nr == *l.Rank {
				sc.rankRight++
			} else {
				t.Logf("rank miss: %s: root names rank %d, want %d", name, nr, *l.Rank)
			}
		}
	}
	return sc
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
