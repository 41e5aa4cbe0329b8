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
	full := checks.Finding{Title: "/tmp/x is full", Fixes: []string{"shm.cleanup", "shm.remount", "container.shm"}}
	for _, c := range []struct {
		name   string
		r      FixResult
		open   map[string]bool
		sev    checks.Severity
		substr string
	}{
		// The case: /dev/shm is still small after the cleanup; the
		// remount, not applied, answers that.
		{"failed only on what another open fix answers", FixResult{ID: "shm.cleanup", Verdict: "failed", Remaining: []checks.Finding{full}},
			map[string]bool{"shm.remount": true}, checks.OK, "the re-check still reports /tmp/x is full, which shm.remount answers"},
		{"every other remedy applied or impossible", FixResult{ID: "shm.cleanup", Verdict: "failed", Remaining: []checks.Finding{full}},
			map[string]bool{"shm.cleanup": true}, checks.Error, "still reports: /tmp/x is full"},
		{"error", FixResult{Err: errors.New("boom")}, nil, checks.Error, "failed: boom"},
		{"passed, another problem elsewhere", FixResult{Verdict: "passed", Recheck: []checks.Result{okCheck, smallShm}}, nil, checks.OK, "re-check passed (shm.segments, shm.mount); other findings remain in shm.mount"},
		{"failed names what remains", FixResult{Verdict: "failed", Remaining: []checks.Finding{{Title: "1 orphaned segment"}}, Recheck: []checks.Result{smallShm}}, nil, checks.Error, "still reports: 1 orphaned segment"},
		{"unproven with proof", FixResult{Verdict: "unproven", Proof: "fstab read back"}, nil, checks.Info, "done; fstab read back"},
		{"unproven", FixResult{Verdict: "unproven"}, nil, checks.Info, "no check here can prove it"},
		{"passed by proof", FixResult{Verdict: "passed", Proof: "/etc/fstab was read back"}, nil, checks.OK, "verified: /etc/fstab was read back"},
		{"no verdict: any problem counts", FixResult{Recheck: []checks.Result{smallShm}}, nil, checks.Error, "still reports problems in shm.mount"},
		{"no verdict, clean", FixResult{Recheck: []checks.Result{okCheck}}, nil, checks.OK, "re-check passed (shm.segments)"},
		{"nothing to check", FixResult{}, nil, checks.Info, "done"},
		{"passed, no proof text", FixResult{Verdict: "passed"}, nil, checks.OK, "verified"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sev, s := verdict(c.r, c.open)
			if sev != c.sev || !strings.Contains(s, c.substr) {
				t.Errorf("verdict = %v %q, want %v containing %q", sev, s, c.sev, c.substr)
			}
		})
	}
}
