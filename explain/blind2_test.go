package explain

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The second blind set (testdata/blind2/) was written by a helper who had
// not read the explainer, its catalogue or its answers: 46 logs from public
// threads that neither the corpus nor the first blind set models, labelled
// from each thread's own conclusion, committed before the explainer was run
// on them, and scored once. It measures how far the explainer generalises
// beyond the examples its authors wrote. Its logs and labels are not to be
// edited to match the explainer, and a miss is not to be fixed by a pattern
// for one log.

// Blind2 floors and ceilings. Scored once when the set was frozen (top-1
// 40/46, rank 9/11, one false all-clear, no false alarm, three NCCL
// failures called not NCCL; docs/explain.md), then again after the classes
// behind its misses were fixed — no longer a blind measure — at top-1
// 46/46, rank 10/11, no false all-clear, no false alarm either way. The
// floors are a log under that; any false all-clear or alarm fails.
// blind2Digest pins the set itself: a log or label edited after scoring
// changes it (a fix of a transcription mistake must say so where it
// updates the digest).
const (
	blind2MinTop1    = 0.97
	blind2MinRank    = 0.80
	blind2MaxClears  = 0
	blind2MaxAlarms  = 0
	blind2MaxNotNCCL = 0
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
	dir := filepath.Join("testdata", "blind2")
	sc := scoreBlindSet(t, dir, func(th string) bool { return strings.HasPrefix(th, "https://") })
	t.Logf("blind2: %s", sc)
	if d := blindSetDigest(t, dir); d != blind2Digest {
		t.Errorf("the second blind set changed after it was scored (digest %s, frozen %s)", d, blind2Digest)
	}
	if sc.n != blind2Frozen {
		t.Errorf("the second blind set has %d logs; it was frozen with %d", sc.n, blind2Frozen)
	}
	if sc.top1Rate() < blind2MinTop1 {
		t.Errorf("blind2 top-1 %.1f%% is under %.0f%%", 100*sc.top1Rate(), 100*blind2MinTop1)
	}
	if sc.rankRate() < blind2MinRank {
		t.Errorf("blind2 rank %.1f%% is under %.0f%%", 100*sc.rankRate(), 100*blind2MinRank)
	}
	if sc.clears > blind2MaxClears {
		t.Errorf("blind2: %d false all-clears, more than the %d allowed", sc.clears, blind2MaxClears)
	}
	if sc.alarms > blind2MaxAlarms {
		t.Errorf("blind2: %d false NCCL alarms, more than the %d allowed", sc.alarms, blind2MaxAlarms)
	}
	if sc.notNCCL > blind2MaxNotNCCL {
		t.Errorf("blind2: %d NCCL failures called not NCCL, more than the %d allowed", sc.notNCCL, blind2MaxNotNCCL)
	}
}

// blindSetDigest hashes every file under a blind set (path and bytes, in
// path order) so that an edit to a log or label after scoring is seen.
func blindSetDigest(t *testing.T, dir string) string {
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
