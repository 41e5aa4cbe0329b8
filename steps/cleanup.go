package steps

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/textsafe"
)

// cleanupCandidates returns the segments shm.cleanup may remove: proven
// orphaned, regular, single-linked, named with printable characters, the
// user's own unless allUsers (root only). Everything else that looks like
// a leftover is returned in skipped with the reason it stays.
func cleanupCandidates(inv *shm.Inventory, h *host.Host, allUsers bool) (cands []shm.Segment, skipped []string) {
	others := allUsers && h.IsRoot()
	for _, s := range inv.Segments {
		name := textsafe.Sanitize(s.Name)
		switch {
		case s.Symlink:
			skipped = append(skipped, fmt.Sprintf("%s: a symlink to %s (uid %d); never followed or removed — remove it by hand if it is not yours to keep",
				name, textsafe.Sanitize(s.LinkTarget), s.UID))
		case s.Irregular:
			skipped = append(skipped, name+": not a regular file")
		case s.State == shm.InUse:
			continue // the common case; the check lists the holders
		case s.State == shm.Young:
			skipped = append(skipped, name+": "+textsafe.Sanitize(s.Reason))
		case s.State != shm.Orphaned:
			skipped = append(skipped, name+": not proven unused ("+textsafe.Sanitize(s.Reason)+")")
		case s.Nlink > 1:
			skipped = append(skipped, name+": has other hard links (removing this name would free nothing)")
		case !textsafe.IsClean(s.Name) || strings.ContainsAny(s.Name, "/\n"):
			skipped = append(skipped, name+": the name holds control bytes; check it and remove it by hand")
		case s.OtherUser && !others:
			why := "only its owner or root may remove it"
			if h.IsRoot() {
				why = "another user's; add --all-users to include it"
			}
			skipped = append(skipped, fmt.Sprintf("%s: owned by uid %d (%s)", name, s.UID, why))
		default:
			cands = append(cands, s)
		}
	}
	return cands, skipped
}

func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days old", int(d.Hours()/24))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d h old", int(d.Hours()))
	default:
		return fmt.Sprintf("%d min old", int(d.Minutes()))
	}
}

func planCleanup(ctx context.Context, h *host.Host, r *request) *Fix {
	inv, err := shm.Scan(ctx, h)
	if err != nil {
		return r.note("shm.cleanup", "cannot scan "+h.ShmLogical()+": "+err.Error())
	}
	cands, skipped := cleanupCandidates(inv, h, r.opts.AllUsers)
	if len(cands) == 0 {
		why := "no segment in " + inv.Dir + " is proven orphaned"
		if inv.Note != "" && !inv.Private {
			why += ": " + inv.Note
		} else if len(skipped) > 0 {
			why += fmt.Sprintf(" (%d left alone: %s)", len(skipped), skipped[0])
		}
		return r.note("shm.cleanup", why)
	}
	var total int64
	now := h.Now()
	var own, others []string
	for _, s := range cands {
		total += s.Allocated
		line := fmt.Sprintf("rm -- %s   # %s, %s", ShellQuote(s.Path), shm.Human(uint64(s.Allocated)), age(now, s.ModTime))
		if s.OtherUser {
			others = append(others, line+fmt.Sprintf(", uid %d", s.UID))
		} else {
			own = append(own, line)
		}
	}
	steps := []Step{}
	if len(own) > 0 {
		steps = append(steps, Step{Comment: "yours; each re-proven unused, and the same file, right before it is removed", Lines: own})
	}
	if len(others) > 0 {
		steps = append(steps, Step{Comment: "OTHER USERS' files (--all-users); each re-proven unused right before removal", Lines: others, Root: true})
	}
	f := &Fix{
		ID:    "shm.cleanup",
		Title: fmt.Sprintf("Remove %d orphaned segment%s (%s) from %s", len(cands), plural(len(cands)), shm.Human(uint64(total)), inv.Dir),
		Summary: fmt.Sprintf("Removes %d file%s (%s) that no running process has open or mapped. Right before each removal ncclwiz proves it again "+
			"(a fresh pass over every /proc/PID/fd and maps), moves it aside so nothing can open it by name, checks it is still the same file "+
			"(device and inode), proves it unused once more and only then unlinks it; any doubt puts it back. Symlinks, hard-linked files, "+
			"files modified in the last %d minutes and other users' files are left alone.",
			len(cands), plural(len(cands)), shm.Human(uint64(total)), int(shm.YoungAge.Minutes())),
		Guide: "shm-stale-segments", Risk: RiskLow,
		NeedsRoot: len(others) > 0,
		Steps:     steps,
		Recheck:   []string{"shm.segments", "shm.mount"},
		Warnings:  skipped,
	}
	f.apply = func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
		return applyCleanup(ctx, h, cands, o)
	}
	f.script = func(s *script) { scriptCleanup(s, cands, skipped) }
	return f
}

// applyCleanup removes the planned segments that are still provably
// orphaned, one by one.
func applyCleanup(ctx context.Context, h *host.Host, cands []shm.Segment, o ApplyOptions) (Outcome, error) {
	dir := h.ShmLogical()
	before, beforeErr := h.Statfs(dir)
	out := Outcome{Before: map[string]any{"segments_planned": len(cands)}}
	if beforeErr == nil {
		out.Before["used_bytes"] = before.Used()
	}
	// The directory itself may be a symlink (old Debian: /dev/shm ->
	// /run/shm): open what it resolves to inside the host's root, and never
	// follow a link from there on.
	real := h.ShmReal()
	if m, err := shm.ReadMount(ctx, h); err == nil && m.LinkTarget != "" {
		real = h.Path(m.LinkTarget)
	}
	dirfd, err := unix.Open(real, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return out, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dirfd)
	var freed int64
	removed := 0
	for _, s := range cands {
		if err := ctx.Err(); err != nil {
			out.Skipped = append(out.Skipped, "stopped: "+err.Error())
			break
		}
		name := textsafe.Sanitize(s.Name)
		ok, holders, err := shm.ProveOrphaned(ctx, h, s)
		switch {
		case len(holders) > 0:
			out.Skipped = append(out.Skipped, fmt.Sprintf("%s: now in use by pid %d (%s)", name, holders[0].PID, textsafe.Sanitize(holders[0].Comm)))
			continue
		case err != nil && errors.Is(err, unix.ENOENT):
			out.Skipped = append(out.Skipped, name+": already gone")
			continue
		case err != nil || !ok:
			out.Skipped = append(out.Skipped, name+": "+reason(err, "not proven unused"))
			continue
		}
		if o.DryRun {
			out.Changed = append(out.Changed, fmt.Sprintf("would remove %s (%s): proven unused just now", path.Join(dir, name), shm.Human(uint64(s.Allocated))))
			freed += s.Allocated
			continue
		}
		if err := removeProven(ctx, h, dirfd, s); err != nil {
			out.Skipped = append(out.Skipped, name+": "+err.Error())
			continue
		}
		removed++
		freed += s.Allocated
		out.Changed = append(out.Changed, fmt.Sprintf("removed %s (%s)", path.Join(dir, name), shm.Human(uint64(s.Allocated))))
		o.progress("removed %s (%s)", name, shm.Human(uint64(s.Allocated)))
	}
	after, afterErr := h.Statfs(dir)
	out.After = map[string]any{"segments_removed": removed, "freed_bytes": freed}
	if afterErr == nil {
		out.After["used_bytes"] = after.Used()
	}
	verb := "removed"
	if o.DryRun {
		verb = "would remove"
		removed = len(out.Changed)
	}
	out.Summary = fmt.Sprintf("%s %d segment%s, %s freed", verb, removed, plural(removed), shm.Human(uint64(freed)))
	if o.DryRun {
		out.Summary = fmt.Sprintf("would remove %d segment%s (%s); nothing changed", removed, plural(removed), shm.Human(uint64(freed)))
	} else if beforeErr == nil && afterErr == nil {
		out.Summary += fmt.Sprintf(" (%s used: %s → %s)", dir, shm.Human(before.Used()), shm.Human(after.Used()))
	}
	if len(out.Skipped) > 0 {
		out.Summary += fmt.Sprintf("; %d left alone", len(out.Skipped))
	}
	return out, nil
}

func reason(err error, def string) string {
	if err == nil {
		return def
	}
	return textsafe.Sanitize(err.Error())
}

// quarantineName is where a segment waits between its two proofs. It
// starts with "nccl-" so that, should ncclwiz die right there, the next scan
// finds it as an orphan again.
func quarantineName(s shm.Segment) string {
	return "nccl-ncclwiz-rm-" + strconv.FormatUint(s.Ino, 36) + "-" + strconv.Itoa(syscall.Getpid())
}

// sameFile checks that name in dirfd is the regular file s (device and
// inode), without following a symlink.
func sameFile(dirfd int, name string, s shm.Segment) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return errors.New("already gone")
		}
		return fmt.Errorf("stat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != s.Ino || uint64(st.Dev) != s.Dev {
		return errors.New("it changed since it was proven unused (not the same file); left alone")
	}
	return nil
}

// removeProven unlinks a segment that was just proven orphaned, closing
// the gap between proof and unlink: the file is moved aside (so no process
// can open it by its name any more), checked to be the same file, proven
// unused again and unlinked. Any doubt moves it back.
func removeProven(ctx context.Context, h *host.Host, dirfd int, s shm.Segment) error {
	if err := sameFile(dirfd, s.Name, s); err != nil {
		return err
	}
	q := quarantineName(s)
	err := unix.Renameat2(dirfd, s.Name, dirfd, q, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		// No renameat2 here: the proof and the inode check must do.
		if err := unix.Unlinkat(dirfd, s.Name, 0); err != nil {
			return fmt.Errorf("unlink: %w", err)
		}
		return nil
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return errors.New("already gone")
		}
		return fmt.Errorf("move aside: %w", err)
	}
	putBack := func(why string) error {
		if err := unix.Renameat2(dirfd, q, dirfd, s.Name, unix.RENAME_NOREPLACE); err != nil {
			return fmt.Errorf("%s, and it could not be moved back (%v): it is now %s", why, err, path.Join(h.ShmLogical(), q))
		}
		return errors.New(why + "; put back")
	}
	if err := sameFile(dirfd, q, s); err != nil {
		return putBack("a different file was moved aside")
	}
	moved := s
	moved.Name = q
	moved.Path = path.Join(h.ShmLogical(), q)
	moved.RealPath = h.Path(moved.Path)
	ok, holders, err := shm.ProveOrphaned(ctx, h, moved)
	if len(holders) > 0 {
		return putBack(fmt.Sprintf("pid %d (%s) opened it meanwhile", holders[0].PID, textsafe.Sanitize(holders[0].Comm)))
	}
	if err != nil || !ok {
		return putBack("no longer provably unused (" + reason(err, "unknown") + ")")
	}
	if err := unix.Unlinkat(dirfd, q, 0); err != nil {
		return putBack("unlink failed: " + err.Error())
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
