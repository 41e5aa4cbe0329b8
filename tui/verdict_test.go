package tui

import (
	"errors"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
)

func TestVerdict(t *testing.T) {
	okCheck := checks.Result{ID: "shm.segments", Findings: []checks.Finding{{Severity: checks.OK}}}
	smallShm := checks.Result{ID: "shm.mount", Findings: []checks.Finding{{Severity: checks.Warn, Title: "/dev/shm is 64 MiB"}}}
	for _, c := range []struct {
		name   string
		r      FixResult
		sev    checks.Severity
		substr string
	}{
		// The case, judged by steps.Judge: /dev/shm is still full
		// after the cleanup; the remount, not applied, answers that.
		{"handed on to another open fix", FixResult{ID: "shm.cleanup", Verdict: "handed-on", HandedOn: "done; the re-check still reports /tmp/x is full, which shm.remount answers"},
			checks.OK, "the re-check still reports /tmp/x is full, which shm.remount answers"},
		{"failed", FixResult{ID: "shm.cleanup", Verdict: "failed", Remaining: []checks.Finding{{Title: "/tmp/x is full"}}},
			checks.Error, "still reports: /tmp/x is full"},
		{"error", FixResult{Err: errors.New("boom")}, checks.Error, "failed: boom"},
		{"passed, another problem elsewhere", FixResult{Verdict: "passed", Recheck: []checks.Result{okCheck, smallShm}}, checks.OK, "re-check passed: nothing it answers is reported any more (shm.segments clean); shm.mount still reports other problems"},
		{"failed names what remains", FixResult{Verdict: "failed", Remaining: []checks.Finding{{Title: "1 orphaned segment"}}, Recheck: []checks.Result{smallShm}}, checks.Error, "still reports: 1 orphaned segment"},
		{"unproven with proof", FixResult{Verdict: "unproven", Proof: "fstab read back"}, checks.Info, "done; fstab read back"},
		{"unproven", FixResult{Verdict: "unproven"}, checks.Info, "no check here can prove it"},
		{"passed by proof", FixResult{Verdict: "passed", Proof: "/etc/fstab was read back"}, checks.OK, "verified: /etc/fstab was read back"},
		{"no verdict: any problem counts", FixResult{Recheck: []checks.Result{smallShm}}, checks.Error, "still reports problems in shm.mount"},
		{"no verdict, clean", FixResult{Recheck: []checks.Result{okCheck}}, checks.OK, "re-check passed (shm.segments)"},
		{"nothing to check", FixResult{}, checks.Info, "done"},
		{"passed, no proof text", FixResult{Verdict: "passed"}, checks.OK, "verified"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sev, s := verdict(c.r)
			if sev != c.sev || !strings.Contains(s, c.substr) {
				t.Errorf("verdict = %v %q, want %v containing %q", sev, s, c.sev, c.substr)
			}
		})
	}
}
