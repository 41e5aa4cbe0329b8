package steps

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/textsafe"
)

// cleanupCandidates returns the segments shm.cleanup may remove: proven
// orphaned, regular, single-linked, with a printable name, and the user's
// own unless allUsers (root only).
func cleanupCandidates(inv *shm.Inventory, h *host.Host, allUsers bool) (cands []shm.Segment, skipped []string) {
	for _, s := range inv.Segments {
		name := textsafe.Sanitize(s.Name)
		switch {
		case s.State != shm.Orphaned:
			continue
		case s.Symlink || s.Irregular:
			skipped = append(skipped, name+": not a regular file")
		case s.Nlink > 1:
			skipped = append(skipped, name+": has other hard links")
		case !textsafe.IsClean(s.Name) || strings.ContainsAny(s.Name, "/"):
			skipped = append(skipped, name+": name has control bytes; remove it by hand after checking")
		case s.OtherUser && !(allUsers && h.IsRoot()):
			skipped = append(skipped, fmt.Sprintf("%s: owned by uid %d", name, s.UID))
		default:
			cands = append(cands, s)
		}
	}
	return cands, skipped
}

func planCleanup(ctx context.Context, h *host.Host, w wanted) *Fix {
	if !w.has("shm.cleanup") {
		return nil
	}
	inv, err := shm.Scan(ctx, h)
	if err != nil {
		return nil
	}
	cands, _ := cleanupCandidates(inv, h, false)
	if len(cands) == 0 {
		return nil
	}
	var bytes int64
	lines := make([]string, 0, len(cands))
	for _, s := range cands {
		bytes += s.Allocated
		lines = append(lines, "rm -- "+ShellQuote(s.Path))
	}
	return &Fix{
		ID: "shm.cleanup", Title: fmt.Sprintf("Remove %d orphaned segment(s) from %s", len(cands), inv.Dir),
		Summary: fmt.Sprintf("Removes %d file(s) (%s) that no running process has open or mapped. Each is re-proven unused, "+
			"and checked to be the same regular file, right before it is removed; symlinks, hard-linked files and other users' files are left alone.",
			len(cands), shm.Human(uint64(bytes))),
		Answers: []string{"shm.segments", "shm.mount"}, Risk: RiskLow,
		Steps:   []Step{{Comment: "each file is re-checked as unused immediately before removal", Lines: lines}},
		Recheck: []string{"shm.segments", "shm.mount"},
		apply: func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
			return applyCleanup(ctx, h, o)
		},
	}
}

func applyCleanup(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
	inv, err := shm.Scan(ctx, h)
	if err != nil {
		return Outcome{}, err
	}
	before, _ := h.Statfs(inv.Dir)
	cands, skipped := cleanupCandidates(inv, h, o.AllUsers)
	out := Outcome{Skipped: skipped, Before: map[string]any{"used_bytes": before.Used(), "segments": len(inv.Segments)}}
	dirfd, err := unix.Open(h.ShmReal(), unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return out, fmt.Errorf("open %s: %w", inv.Dir, err)
	}
	defer unix.Close(dirfd)
	var freed int64
	for _, s := range cands {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		ok, holders, err := shm.ProveOrphaned(ctx, h, s)
		switch {
		case err != nil:
			out.Skipped = append(out.Skipped, textsafe.Sanitize(s.Name)+": "+err.Error())
			continue
		case !ok:
			out.Skipped = append(out.Skipped, fmt.Sprintf("%s: now in use by pid %d", textsafe.Sanitize(s.Name), holders[0].PID))
			continue
		}
		if err := unlinkSame(dirfd, s); err != nil {
			out.Skipped = append(out.Skipped, textsafe.Sanitize(s.Name)+": "+err.Error())
			continue
		}
		freed += s.Allocated
		out.Changed = append(out.Changed, "removed "+path.Join(inv.Dir, textsafe.Sanitize(s.Name))+" ("+shm.Human(uint64(s.Allocated))+")")
		o.progress("removed %s", textsafe.Sanitize(s.Name))
	}
	after, _ := h.Statfs(inv.Dir)
	out.After = map[string]any{"used_bytes": after.Used()}
	out.Summary = fmt.Sprintf("removed %d segment(s), freed %s", len(out.Changed), shm.Human(uint64(freed)))
	if len(out.Skipped) > 0 {
		out.Summary += fmt.Sprintf("; left %d alone", len(out.Skipped))
	}
	return out, nil
}

// unlinkSame removes name from the directory only if it is still the very
// file that was proven unused (same device and inode, not a symlink): the
// last guard against a swap between the proof and the unlink.
func unlinkSame(dirfd int, s shm.Segment) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, s.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Ino != s.Ino || uint64(st.Dev) != s.Dev {
		return fmt.Errorf("changed since it was proven unused; left alone")
	}
	if err := unix.Unlinkat(dirfd, s.Name, 0); err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("already gone")
		}
		return fmt.Errorf("unlink: %w", err)
	}
	return nil
}

// ShellQuote quotes s for POSIX shells with single quotes.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '_' || r == '-' || r == '=' || r == ':' || r == ',' || r == '+' || r == '@' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
