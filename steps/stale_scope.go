package steps

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// proc.stale's scope (issue 25 item 5). Which processes are leftover ranks
// is the detector's judgement (checks/procs); this file decides which of
// them the fix offers and which it acts on by default:
//
//   - the user's own processes, also as root: other users' only with
//     --all-users (root), like shm.cleanup's files;
//   - one job by default — the newest job of ncclwiz's own PID namespace
//     (a container's ranks are another job); the others are listed as
//     choices, unticked, for the wizard's PID checklist and `fix --pid`.

// jobOf names the job a rank belonged to: torchrun's run id, else the
// rendezvous address, else its session.
func jobOf(env map[string]string, sid int) string {
	switch {
	case env["TORCHELASTIC_RUN_ID"] != "":
		return "run " + env["TORCHELASTIC_RUN_ID"]
	case env["MASTER_PORT"] != "":
		return "rendezvous " + env["MASTER_ADDR"] + ":" + env["MASTER_PORT"]
	}
	return "session " + strconv.Itoa(sid)
}

// scopeStale keeps the user's own leftover ranks (any user's with
// allUsers, as root); the others are said in skipped.
func scopeStale(h *host.Host, targets []rank, skipped []string, allUsers bool) ([]rank, []string) {
	var mine []rank
	for _, t := range targets {
		// A practice server's processes are the practising user's.
		if t.UID != h.EUID && !h.Simulated && !(allUsers && h.IsRoot()) {
			why := "only that user or root may end it"
			if h.IsRoot() {
				why = "another user's; add --all-users to include it"
			}
			skipped = append(skipped, fmt.Sprintf("pid %d belongs to uid %d (%s)", t.PID, t.UID, why))
			continue
		}
		mine = append(mine, t)
	}
	return mine, skipped
}

// staleJob is one job's leftover ranks.
type staleJob struct {
	key, label string
	own        bool // in ncclwiz's own PID namespace
	newest     uint64
	ranks      []rank
}

// staleJobs groups ranks by job (and PID namespace), newest job first.
func staleJobs(h *host.Host, targets []rank) []*staleJob {
	// ncclwiz's own PID namespace, as the host's /proc shows it.
	selfNS, _ := h.Readlink("/proc/self/ns/pid")
	byKey := map[string]*staleJob{}
	var jobs []*staleJob
	for _, t := range targets {
		key := t.PIDNS + "|" + t.Job
		j := byKey[key]
		if j == nil {
			own := t.PIDNS == "" || selfNS == "" || t.PIDNS == selfNS
			label := t.Job
			if !own {
				label += ", in another PID namespace (" + t.PIDNS + ": a container)"
			}
			j = &staleJob{key: key, label: label, own: own}
			byKey[key] = j
			jobs = append(jobs, j)
		}
		j.ranks = append(j.ranks, t)
		j.newest = max(j.newest, t.Start)
	}
	sort.SliceStable(jobs, func(a, b int) bool {
		if jobs[a].own != jobs[b].own {
			return jobs[a].own
		}
		return jobs[a].newest > jobs[b].newest
	})
	return jobs
}

// choosableStale is proc.stale over targets with every rank an item and
// the default choice made: the newest job of this PID namespace.
func choosableStale(h *host.Host, targets []rank, skipped []string) *Fix {
	jobs := staleJobs(h, targets)
	var chosen []string
	if len(jobs) > 0 && jobs[0].own {
		for _, t := range jobs[0].ranks {
			chosen = append(chosen, strconv.Itoa(t.PID))
		}
	}
	f := selectStale(h, jobs, skipped, chosen)
	return &f
}

// selectStale makes proc.stale ending exactly the chosen PIDs, with every
// leftover rank of the user listed as an item.
func selectStale(h *host.Host, jobs []*staleJob, skipped, chosen []string) Fix {
	var items []Item
	var picked, listed []rank
	var pids []int
	for _, j := range jobs {
		for _, t := range j.ranks {
			listed = append(listed, t)
			id := strconv.Itoa(t.PID)
			on := slices.Contains(chosen, id)
			items = append(items, Item{ID: id, Group: j.label, Chosen: on,
				Label: fmt.Sprintf("pid %d  %s; %s", t.PID, clipText(t.Command, 60), t.holds())})
			if on {
				picked = append(picked, t)
				pids = append(pids, t.PID)
			}
		}
	}
	var f Fix
	if len(picked) > 0 {
		f = *staleFix(h, picked, skipped)
	} else {
		f = Fix{ID: "proc.stale", Title: "End leftover ranks by PID: none chosen", Guide: "stale-ranks", Risk: RiskHigh,
			Summary:  "No leftover rank is chosen. " + notChosenHint(items),
			Recheck:  []string{"gpu.processes", "proc.ranks", "shm.segments"},
			Warnings: skipped}
		f.Impossible = "no PID is chosen"
		f.Alternative = "choose the leftover ranks to end: in the wizard tick their PIDs; on the command line ncclwiz fix --apply proc.stale --pid PID[,PID]"
	}
	if n := len(items) - len(picked); n > 0 && len(picked) > 0 {
		f.Summary += " " + notChosenHint(items)
	}
	f.Items, f.stalePIDs = items, pids
	// The preview the user saw lists every item, chosen or not: a later
	// `--apply proc.stale --pid P --yes` may pick any of them, never one
	// that was not listed.
	f.stale = listed
	f.choose = func(ids []string) Fix { return selectStale(h, jobs, skipped, ids) }
	return f
}

// notChosenHint says which leftover ranks are not chosen and how to add them.
func notChosenHint(items []Item) string {
	var off []string
	groups := map[string]bool{}
	for _, it := range items {
		if !it.Chosen {
			off = append(off, it.ID)
			groups[it.Group] = true
		}
	}
	if len(off) == 0 {
		return ""
	}
	return fmt.Sprintf("Not chosen: %s of %s (pid %s) — choose them in the wizard's PID list or with --pid.",
		units.Count(len(off), "leftover rank"), units.Count(len(groups), "other job"), strings.Join(off, ", "))
}
