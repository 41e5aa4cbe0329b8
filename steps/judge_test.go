package steps

import (
	"slices"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
)

// The one verdict rule, as both `ncclwiz fix --apply` and the wizard see it.
func TestJudge(t *testing.T) {
	full := checks.Finding{Check: "shm.mount", Severity: checks.Error, Title: "/dev/shm is full", Fixes: []string{"shm.cleanup", "shm.remount", "container.shm"}}
	orphans := checks.Finding{Check: "shm.segments", Severity: checks.Warn, Title: "3 orphaned segments", Fixes: []string{"shm.cleanup"}}
	fine := checks.Finding{Check: "shm.segments", Severity: checks.OK, Title: "no orphaned segments"}
	other := checks.Finding{Check: "env.nccl", Severity: checks.Warn, Title: "NCCL_TIMEOUT is not an NCCL variable", Fixes: []string{"env.export"}}
	res := func(id string, fs ...checks.Finding) checks.Result { return checks.Result{ID: id, Findings: fs} }
	for _, c := range []struct {
		name      string
		rs        []checks.Result
		open      []string
		verdict   string
		remaining []string
		answered  map[string][]string
	}{
		{"clean re-check", []checks.Result{res("shm.segments", fine)}, nil, VerdictPassed, nil, nil},
		{"problems of other fixes do not count", []checks.Result{res("shm.segments", fine), res("env.nccl", other)}, nil, VerdictPassed, nil, nil},
		{"still reported, no other fix", []checks.Result{res("shm.segments", orphans)}, []string{"shm.remount"}, VerdictFailed, []string{"3 orphaned segments"}, nil},
		// The case: /dev/shm still full after the cleanup; the
		// remount, planned and not applied, answers that.
		{"still full, remount open", []checks.Result{res("shm.segments", fine), res("shm.mount", full)}, []string{"shm.remount"}, VerdictHandedOn, nil,
			map[string][]string{"/dev/shm is full": {"shm.remount"}}},
		{"still full, remount applied or impossible", []checks.Result{res("shm.segments", fine), res("shm.mount", full)}, nil, VerdictFailed, []string{"/dev/shm is full"}, nil},
		{"own problem left beside an answered one", []checks.Result{res("shm.segments", orphans), res("shm.mount", full)}, []string{"shm.remount", "container.shm"}, VerdictFailed,
			[]string{"3 orphaned segments"}, map[string][]string{"/dev/shm is full": {"shm.remount", "container.shm"}}},
		{"the fix itself in open does not answer", []checks.Result{res("shm.mount", full)}, []string{"shm.cleanup"}, VerdictFailed, []string{"/dev/shm is full"}, nil},
		{"nothing could run", []checks.Result{res("shm.segments", checks.Finding{Severity: checks.Skipped})}, nil, VerdictUnproven, nil, nil},
		{"panicked check", []checks.Result{{ID: "shm.segments", Panicked: true}}, nil, VerdictUnproven, nil, nil},
		{"no re-check", nil, nil, VerdictUnproven, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := Judge("shm.cleanup", c.rs, c.open)
			if j.Verdict != c.verdict {
				t.Errorf("verdict %q, want %q", j.Verdict, c.verdict)
			}
			var rem []string
			for _, f := range j.Remaining {
				rem = append(rem, f.Title)
			}
			if !slices.Equal(rem, c.remaining) {
				t.Errorf("remaining %q, want %q", rem, c.remaining)
			}
			if len(j.Answered) != len(c.answered) {
				t.Fatalf("answered %+v, want %v", j.Answered, c.answered)
			}
			for _, a := range j.Answered {
				if !slices.Equal(a.By, c.answered[a.Finding.Title]) {
					t.Errorf("%q answered by %q, want %q", a.Finding.Title, a.By, c.answered[a.Finding.Title])
				}
			}
		})
	}
}
