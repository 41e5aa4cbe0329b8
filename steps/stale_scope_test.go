package steps

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/host"
)

// Issue 25 item 5: proc.stale acts on the user's own leftover ranks of one
// job by default — the newest job of ncclwiz's PID namespace — and lists
// the others (older jobs, a container's) as choices; other users' ranks
// only with --all-users, as root. Select makes the fix for another choice,
// its preview and its targets exactly the chosen PIDs.
func TestStaleScope(t *testing.T) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	selfNS, err := h.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skip("no /proc/self/ns/pid here")
	}
	h.EUID = 1000
	mk := func(pid, uid int, start uint64, ns, job string) rank {
		return rank{PID: pid, UID: uid, Start: start, PIDNS: ns, Job: job, Command: "python3 train.py", Reason: "launcher gone"}
	}
	all := []rank{
		mk(101, 1000, 500, selfNS, "run A"), mk(102, 1000, 501, selfNS, "run A"), // the newest job here
		mk(201, 1000, 100, selfNS, "run B"),             // an older job
		mk(301, 1000, 900, "pid:[4026599999]", "run C"), // a container's, newer still
		mk(401, 2000, 950, selfNS, "run D"),             // another user's
	}
	mine, skipped := scopeStale(h, all, nil, false)
	if len(mine) != 4 || len(skipped) != 1 || !strings.Contains(skipped[0], "pid 401 belongs to uid 2000") {
		t.Fatalf("scope: %d kept, skipped %q", len(mine), skipped)
	}
	f := choosableStale(h, mine, skipped)
	if got := f.Chosen(); !slices.Equal(got, []string{"101", "102"}) {
		t.Errorf("chosen by default: %v, want the newest job here (101, 102)", got)
	}
	if len(f.Items) != 4 || !strings.Contains(strings.Join(f.Preview(), "\n"), "kill -TERM 101") || strings.Contains(strings.Join(f.Preview(), "\n"), "kill -TERM 201") {
		t.Errorf("items %v, preview:\n%s", f.Items, strings.Join(f.Preview(), "\n"))
	}
	var container Item
	for _, it := range f.Items {
		if it.ID == "301" {
			container = it
		}
	}
	if !strings.Contains(container.Group, "another PID namespace") || container.Chosen {
		t.Errorf("the container's rank: %+v", container)
	}
	g, err := f.Select([]string{"201", "301"})
	if err != nil {
		t.Fatal(err)
	}
	pv := strings.Join(g.Preview(), "\n")
	if !strings.Contains(pv, "kill -TERM 201") || !strings.Contains(pv, "kill -TERM 301") || strings.Contains(pv, "kill -TERM 101") || !slices.Equal(g.Chosen(), []string{"201", "301"}) {
		t.Errorf("Select(201, 301): chosen %v, preview:\n%s", g.Chosen(), pv)
	}
	if _, err := f.Select([]string{"401"}); err == nil {
		t.Error("another user's PID was selectable without --all-users")
	}
	none, _ := f.Select(nil)
	if none.Impossible == "" {
		t.Error("a proc.stale with no PID chosen can be applied")
	}
	if _, err := none.Apply(context.Background(), h, ApplyOptions{Yes: true}); err == nil {
		t.Error("applying proc.stale with no PID chosen did not fail")
	}
	h.EUID = 0 // root, with --all-users: everyone's
	if mine, _ := scopeStale(h, all, nil, true); len(mine) != 5 {
		t.Errorf("--all-users as root keeps %d of 5", len(mine))
	}
}
