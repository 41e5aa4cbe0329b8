package steps

import (
	"bytes"
	"context"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
)

// TestExportedScriptEveryCombination lints the scripts of combinations of
// the fixes (a cleanup alone once wrote ETC= unused: shellcheck SC2034):
// each is valid bash, shellcheck-clean, and defines $ETC exactly when a
// step writes under it. A script's lint depends on which helpers, sections
// and variables it holds, so every fix alone, every pair, every set but
// one and all of them are linted (37 scripts, one shellcheck run); all
// 2^7 subsets cost 20 s of shellcheck CPU for no further kind of script.
// The advice-only fixes count as one member (they all write comments).
func TestExportedScriptEveryCombination(t *testing.T) {
	h := fixtureHost(t)
	fs := []checks.Finding{
		{Check: "shm.segments", Severity: checks.Warn, Title: "1 orphaned NCCL segment", Fixes: []string{"shm.cleanup"}},
		{Check: "x", Severity: checks.Warn, Fixes: []string{"env.export"}, Evidence: map[string]any{"recommended_env": map[string]string{"NCCL_DEBUG": "INFO"}}},
	}
	plan := PlanFor(context.Background(), h, fs, IDs())
	var members [][]Fix
	var advice []Fix
	for _, f := range plan {
		if f.Manual || f.script == nil {
			advice = append(advice, f)
			continue
		}
		members = append(members, []Fix{f})
	}
	if len(advice) > 0 {
		members = append(members, advice)
	}
	// Each kind the exporter writes must be in the plan, or the
	// combinations prove less than they claim.
	for _, id := range []string{"shm.cleanup", "proc.stale", "shm.remount", "shm.persist", "systemd.removeipc", "limits.memlock", "env.export"} {
		if _, ok := ByID(plan, id); !ok {
			t.Fatalf("%s not planned on the fixture; plan: %v", id, fixIDs(plan))
		}
	}
	dir := t.TempDir()
	var files []string
	for mask := 0; mask < 1<<len(members); mask++ {
		if n := bits.OnesCount(uint(mask)); n > 2 && n < len(members)-1 {
			continue
		}
		var sub []Fix
		for i, m := range members {
			if mask&(1<<i) != 0 {
				sub = append(sub, m...)
			}
		}
		var buf bytes.Buffer
		if err := ExportScriptWith(&buf, h, sub, fs, ExportOptions{Version: "test"}); err != nil {
			t.Fatal(err)
		}
		s := buf.String()
		name := "none"
		if len(sub) > 0 {
			name = strings.Join(fixIDs(sub), "+")
		}
		if defines, uses := strings.Contains(s, "\nETC="), strings.Contains(s, "$ETC"); defines != uses {
			t.Errorf("%s: defines ETC %v, uses it %v", name, defines, uses)
		}
		if out, err := exec.Command("bash", "-n", "-c", s).CombinedOutput(); err != nil {
			t.Errorf("%s: bash -n: %v %s", name, err, out)
		}
		checkScriptSafety(t, s)
		p := filepath.Join(dir, name+".sh")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed (CI installs it)")
	}
	cmd := exec.Command(sc, append([]string{"-s", "bash"}, files...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("shellcheck on %d scripts: %v\n%s", len(files), err, out)
	}
}

func fixIDs(fs []Fix) []string {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.ID)
	}
	return ids
}
