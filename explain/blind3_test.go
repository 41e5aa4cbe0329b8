package explain

import (
	"path/filepath"
	"testing"
)

// The third blind set (testdata/blind3/) was written like the second: by a
// helper who had not read the explainer, its catalogue or its answers, from
// 30 public threads that neither the corpus nor the first two blind sets
// model, labelled from each thread's own conclusion, committed (cd25fa5)
// before the explainer was first run on them, and scored once
// (docs/explain.md). Its logs and labels are not to be edited to match the
// explainer, and a miss is not to be fixed by a pattern for one log.

// Blind3 floors and ceilings: a notch under the score measured once when
// the set was frozen (explainer at 6dfddcf: top-1 27/30, rank 4/5, one
// false all-clear, no false alarm either way; docs/explain.md), so that a
// change that loses ground fails. The class behind the false all-clear (a
// paste that goes on with the user's next command at a shell prompt,
// joined to the signal line before it) was then fixed with a perturbation
// and tests of our own (TestShellPromptEndsTheJob), and two more classes
// (plugin-named IB completion errors, launcher tags taken for hosts): 29/30,
// rank 5/5, no all-clear — no longer blind for those logs, so no all-clear
// is allowed; top-1 must stay above 28/30. The digest pins the set itself: a log
// or label edited after scoring changes it (a fix of a transcription
// mistake must say so where it updates the digest).
var blind3Floors = blindFloors{name: "blind3", minTop1: 0.93, minRank: 0.80, maxClears: 0, maxAlarms: 0,
	maxNotNCCL: 0, frozen: 30, digest: "21ade36cdfbbe6c7eaec8a95435c8ae8a9cba7479b78b0b4af107720f1816d1c"}

// TestBlind3Score scores the third blind set like TestBlind2Score.
func TestBlind3Score(t *testing.T) {
	t.Parallel()
	checkBlindSet(t, filepath.Join("testdata", "blind3"), blind3Floors)
}
