package explain

import (
	"path/filepath"
	"strings"
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
// is allowed. blind3Digest pins the set itself: a log
// or label edited after scoring changes it (a fix of a transcription
// mistake must say so where it updates the digest).
const (
	blind3MinTop1    = 0.86
	blind3MinRank    = 0.60
	blind3MaxClears  = 0
	blind3MaxAlarms  = 0
	blind3MaxNotNCCL = 0
	blind3Frozen     = 30
	blind3Digest     = "21ade36cdfbbe6c7eaec8a95435c8ae8a9cba7479b78b0b4af107720f1816d1c"
)

// TestBlind3Score scores the third blind set like TestBlind2Score.
func TestBlind3Score(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "blind3")
	sc := scoreBlindSet(t, dir, func(th string) bool { return strings.HasPrefix(th, "https://") })
	t.Logf("blind3: %s", sc)
	if d := blindSetDigest(t, dir); d != blind3Digest {
		t.Errorf("the third blind set changed after it was scored (digest %s, frozen %s)", d, blind3Digest)
	}
	if sc.n != blind3Frozen {
		t.Errorf("the third blind set has %d logs; it was frozen with %d", sc.n, blind3Frozen)
	}
	if sc.top1Rate() < blind3MinTop1 {
		t.Errorf("blind3 top-1 %.1f%% is under %.0f%%", 100*sc.top1Rate(), 100*blind3MinTop1)
	}
	if sc.rankRate() < blind3MinRank {
		t.Errorf("blind3 rank %.1f%% is under %.0f%%", 100*sc.rankRate(), 100*blind3MinRank)
	}
	if sc.clears > blind3MaxClears {
		t.Errorf("blind3: %d false all-clears, more than the %d allowed", sc.clears, blind3MaxClears)
	}
	if sc.alarms > blind3MaxAlarms {
		t.Errorf("blind3: %d false NCCL alarms, more than the %d allowed", sc.alarms, blind3MaxAlarms)
	}
	if sc.notNCCL > blind3MaxNotNCCL {
		t.Errorf("blind3: %d NCCL failures called not NCCL, more than the %d allowed", sc.notNCCL, blind3MaxNotNCCL)
	}
}
