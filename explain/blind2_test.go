package explain

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
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
// The digest pins the set itself: a log or label edited after scoring
// changes it (a fix of a transcription mistake must say so where it
// updates the digest).
var blind2Floors = blindFloors{name: "blind2", minTop1: 0.97, minRank: 0.80, maxClears: 0, maxAlarms: 0,
	maxNotNCCL: 0, frozen: 46, digest: "f3f3734037096c457dfe6215318576b2b508e313da362fa7166f3e7fd7fd748a"}

// TestBlind2Score scores the second blind set like TestBlindScore: top-1
// root, the rank the root names where the label gives one, false
// all-clears, false NCCL alarms and NCCL failures called not NCCL. Misses
// are logged; the test fails under the floors, over the ceilings, or when
// the set was edited.
func TestBlind2Score(t *testing.T) {
	t.Parallel()
	checkBlindSet(t, filepath.Join("testdata", "blind2"), blind2Floors)
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
