package steps

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/shellquote"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// heldOnlyBy returns the segments in use only by processes proc.stale ends
// (ending): once they are gone these are orphans, so the cleanup planned
// with proc.stale (which runs first) includes them — shown apart in the
// preview, and judged like every other segment when it runs: a holder
// still alive then keeps its segment (issue 25 item 3). Otherwise they are
// what cleanupCandidates would take (regular, single-linked, printable
// names, the user's own unless allUsers as root).
func heldOnlyBy(inv *shm.Inventory, h *host.Host, allUsers bool, ending []int) []shm.Segment {
	if len(ending) == 0 {
		return nil
	}
	var out []shm.Segment
	for _, s := range inv.Segments {
		if s.State != shm.InUse || len(s.Holders) == 0 || s.Symlink || s.Irregular || s.Nlink > 1 ||
			!textsafe.IsClean(s.Name) || strings.ContainsAny(s.Name, "/\n") || (s.OtherUser && !(allUsers && h.IsRoot())) {
			continue
		}
		only := true
		for _, hd := range s.Holders {
			only = only && slices.Contains(ending, hd.PID)
		}
		if only {
			out = append(out, s)
		}
	}
	return out
}

// pendingStep is the preview of the segments the cleanup removes after
// proc.stale, and their size.
func pendingStep(pending []shm.Segment, ending []int, now time.Time) (Step, int64) {
	var lines []string
	var total int64
	pids := map[int]bool{}
	for _, s := range pending {
		total += s.Allocated
		var by []string
		for _, hd := range s.Holders {
			pids[hd.PID] = true
			by = append(by, strconv.Itoa(hd.PID))
		}
		lines = append(lines, fmt.Sprintf("rm -- %s   # %s, %s, held by pid %s", shellquote.Quote(s.Path), shm.Human(uint64(s.Allocated)), age(now, s.ModTime), strings.Join(by, ",")))
	}
	var ps []string
	for _, p := range ending {
		if pids[p] {
			ps = append(ps, strconv.Itoa(p))
		}
	}
	return Step{Comment: "only if proc.stale ends pid " + strings.Join(ps, ", ") + " first (chosen too, it runs first): each removed only if then proven unused, as above",
		Lines: lines}, total
}
