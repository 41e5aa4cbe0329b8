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
		ok     bool
		substr string
	}{
		{"error", FixResult{Err: errors.New("boom")}, false, "failed: boom"},
		{"passed, another problem elsewhere", FixResult{Verdict: "passed", Recheck: []checks.Result{okCheck, smallShm}}, true, "re-check passed (shm.segments, shm.mount); other findings remain in shm.mount"},
		{"failed names what remains", FixResult{Verdict: "failed", Remaining: []string{"1 orphaned segment"}, Recheck: []checks.Result{smallShm}}, false, "still reports: 1 orphaned segment"},
		{"unproven with proof", FixResult{Verdict: "unproven", Proof: "fstab read back"}, true, "done; fstab read back"},
		{"unproven", FixResult{Verdict: "unproven"}, true, "no check here can prove it"},
		{"passed by proof", FixResult{Verdict: "passed", Proof: "/etc/fstab was read back"}, true, "verified: /etc/fstab was read back"},
		{"no verdict: any problem counts", FixResult{Recheck: []checks.Result{smallShm}}, false, "still reports problems in shm.mount"},
		{"no verdict, clean", FixResult{Recheck: []checks.Result{okCheck}}, true, "re-check passed (shm.segments)"},
		{"nothing to check", FixResult{}, true, "done"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok, s := verdict(c.r)
			if ok != c.ok || !strings.Contains(s, c.substr) {
				t.Errorf("verdict = %v %q, want %v containing %q", ok, s, c.ok, c.substr)
			}
		})
	}
}
