package steps

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
	"github.com/ncclwiz/ncclwiz/internal/shellquote"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// cleanupCandidates returns the segments shm.cleanup may remove: proven
// orphaned, regular, single-linked, named with printable characters, the
// user's own unless allUsers (root only). Everything else that looks like
// a leftover is returned in skipped with the reason it stays.
func cleanupCandidates(inv *shm.Inventory, h *host.Host, allUsers bool) (cands []shm.Segment, skipped []string) {
	others := allUsers && h.IsRoot()
	for _, s := range inv.Segments {
		name := textsafe.Name(s.Name)
		switch {
		case s.Symlink:
			skipped = append(skipped, fmt.Sprintf("%s: a symlink to %s (uid %d); never followed or removed — remove it by hand if it is not yours to keep",
				name, textsafe.Name(s.LinkTarget), s.UID))
		case s.Irregular:
			skipped = append(skipped, name+": not a regular file")
		case s.State == shm.InUse:
			continue // the common case; the check lists the holders
		case s.State == shm.Young:
			skipped = append(skipped, name+": "+textsafe.Sanitize(s.Reason))
		case s.State != shm.Orphaned && strings.HasPrefix(s.Reason, "not proven unused"):
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

// age is how old a file of mtime t is at now, for people.
func age(now, t time.Time) string { return units.Duration(now.Sub(t)) + " old" }

func planCleanup(ctx context.Context, h *host.Host, r *request) *Fix {
	inv, err := shm.Scan(ctx, h)
	if err != nil {
		return r.note("shm.cleanup", "cannot scan "+h.ShmLogical()+": "+err.Error())
	}
	cands, skipped := cleanupCandidates(inv, h, r.opts.AllUsers)
	pending := heldOnlyBy(inv, h, r.opts.AllUsers, r.ending)
	if len(cands) == 0 && len(pending) == 0 {
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
		line := fmt.Sprintf("rm -- %s   # %s, %s", shellquote.Quote(s.Path), shm.Human(uint64(s.Allocated)), age(now, s.ModTime))
		if s.OtherUser {
			others = append(others, line+fmt.Sprintf(", uid %d", s.UID))
		} else {
			own = append(own, line)
		}
	}
	steps := []Step{}
	if len(own) > 0 {
		steps = append(steps, Step{Comment: "yours; each proven unused right before it is removed" + proofWord(h), Lines: own})
	}
	if len(others) > 0 {
		steps = append(steps, Step{Comment: "OTHER USERS' files (--all-users); each re-proven unused right before removal" + proofWord(h), Lines: others, Root: true})
	}
	title := fmt.Sprintf("Remove %s (%s) from %s", units.Count(len(cands), "orphaned segment"), shm.Human(uint64(total)), inv.Dir)
	summary := cleanupSummary(h, len(cands), total)
	if len(pending) > 0 {
		// proc.stale runs first only when it is chosen too: what only its
		// ranks hold is said as depending on it, never as unused.
		st, n := pendingStep(pending, r.ending, now)
		steps = append(steps, st)
		held := units.Count(len(pending), "segment held only by a leftover rank", "segments held only by leftover ranks")
		if len(cands) == 0 {
			title = fmt.Sprintf("Remove %s from %s, if proc.stale ends %s first", held, inv.Dir, map[bool]string{true: "it", false: "them"}[len(pending) == 1])
			summary = ""
		} else {
			title = fmt.Sprintf("%s, and %s if proc.stale ends %s first", title, units.Count(len(pending), "held only by a leftover rank", "held only by leftover ranks"), map[bool]string{true: "it", false: "them"}[len(pending) == 1])
			summary += " "
		}
		if len(pending) == 1 {
			summary += fmt.Sprintf("The segment held only by a leftover rank (%s) is removed only if proc.stale ends that rank first "+
				"(chosen too, it runs before the cleanup) and the segment is then proven unused like the others; otherwise it stays.", shm.Human(uint64(n)))
		} else {
			summary += fmt.Sprintf("The %s (%s) are removed only if proc.stale ends those ranks first "+
				"(chosen too, it runs before the cleanup) and each is then proven unused like the others; otherwise they stay.", held, shm.Human(uint64(n)))
		}
		cands = append(cands, pending...)
	}
	f := &Fix{
		ID:      "shm.cleanup",
		Title:   title,
		Summary: summary,
		Guide:   "shm-stale-segments", Risk: RiskLow,
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

// cleanupSummary says what the cleanup will do and what proves each file
// unused: on the machine, the kernel lease (and nothing else); in a
// simulation, the simulated process table.
func cleanupSummary(h *host.Host, n int, total int64) string {
	files := units.Count(n, "file")
	if !shm.RealHost(h) {
		return fmt.Sprintf("Removes %s (%s) that no process of the simulated server has open or mapped, each checked again right before "+
			"it is removed. Symlinks, hard-linked files, files modified in the last %d minutes and other users' files are left alone.",
			files, shm.Human(uint64(total)), int(shm.YoungAge.Minutes()))
	}
	return fmt.Sprintf("Removes %s (%s) that nothing has open or mapped. Right before each removal ncclwiz takes the kernel's "+
		"exclusive lease on it, which the kernel grants only when no other open file exists anywhere (any process, thread or container, "+
		"a descriptor in flight over a socket, an io_uring registered file, a loop device), checks that no process shows it in /proc "+
		"(an O_PATH descriptor), moves it into a private directory, checks it is the very file it leased (device and inode) and unlinks it "+
		"there while holding the lease. A file no lease can be taken on is not removed: nothing else proves it unused. "+
		"Symlinks, hard-linked files, files modified in the last %d minutes and other users' files are left alone.",
		files, shm.Human(uint64(total)), int(shm.YoungAge.Minutes()))
}

// proofWord names the proof in the preview's step comment.
func proofWord(h *host.Host) string {
	if shm.RealHost(h) {
		return " (kernel lease)"
	}
	return " (simulated process table)"
}

// proofBatch is how many segments one pass over /proc covers. The pass
// explains who holds a file and is the whole proof only where no lease can
// be taken; the per-file lease is the proof everywhere else, so a batch can
// be large: 100,000 orphans cost 25 passes, not 200,000.
const proofBatch = 4096

// changedListed caps Outcome.Changed; the counts in the summary stay exact.
const changedListed = 200

// cleaner removes one plan's segments and records what it did.
type cleaner struct {
	h               *host.Host
	o               ApplyOptions
	dirfd           int
	privfd          int // the private directory, -1 until made
	privName        string
	dir             string
	real            bool
	out             *Outcome
	total           int // files planned
	removed, listed int
	freed           int64
}

// applyCleanup removes the planned segments that are still provably
// orphaned, batch by batch: one /proc scan per batch, then per file a
// kernel write lease taken right before the unlink and held across it.
// An interrupt (ctx) is honoured between files, never inside one, so every
// file is either removed or untouched and the outcome says how far it got.
func applyCleanup(ctx context.Context, h *host.Host, cands []shm.Segment, o ApplyOptions) (Outcome, error) {
	dir := h.ShmLogical()
	before, beforeErr := h.Statfs(dir)
	out := Outcome{Before: map[string]any{"segments_planned": len(cands)}}
	if beforeErr == nil {
		out.Before["used_bytes"] = before.Used()
	}
	dirfd, err := shm.OpenDir(h)
	if err != nil {
		return out, err
	}
	defer unix.Close(dirfd)
	c := &cleaner{h: h, o: o, dirfd: dirfd, privfd: -1, dir: dir, real: shm.RealHost(h), out: &out, total: len(cands)}
	defer c.closePrivate()
	if c.real && !o.DryRun {
		out.Changed = append(out.Changed, restoreStale(h, dirfd, dir)...)
	}
	done := 0
	stopped := false
batches:
	for start := 0; start < len(cands); start += proofBatch {
		batch := cands[start:min(start+proofBatch, len(cands))]
		if ctx.Err() != nil {
			stopped = true
			break
		}
		proof, err := shm.ProveBatch(ctx, h, batch)
		if err != nil {
			if ctx.Err() != nil {
				stopped = true
				break
			}
			for _, s := range batch {
				out.Skipped = append(out.Skipped, textsafe.Name(s.Name)+": not proven unused ("+reason(err, "scan failed")+")")
			}
			done += len(batch)
			continue
		}
		var queued []int // to prove by the scan alone (no lease possible)
		for i, s := range batch {
			if ctx.Err() != nil {
				stopped = true
				done += i
				c.fallback(ctx, batch, queued)
				break batches
			}
			if c.one(i, s, proof) {
				queued = append(queued, i)
			}
		}
		c.fallback(ctx, batch, queued)
		done += len(batch)
		if len(cands) > proofBatch {
			verb := map[bool]string{true: "would be removed", false: "removed"}[o.DryRun]
			o.progress("proved %s of %s: %s %s so far (%s)", units.Digits(done), units.Count(len(cands), "file"), units.Digits(c.removed), verb, shm.Human(uint64(c.freed)))
		}
	}
	c.closePrivate()
	if n := c.removed - c.listed; n > 0 {
		out.Changed = append(out.Changed, fmt.Sprintf("… and %d more %s", n, map[bool]string{true: "would be removed", false: "removed"}[o.DryRun]))
	}
	after, afterErr := h.Statfs(dir)
	out.After = map[string]any{"segments_removed": c.removed, "freed_bytes": c.freed}
	if stopped {
		out.After["interrupted"] = true
	}
	if afterErr == nil {
		out.After["used_bytes"] = after.Used()
	}
	n := c.removed
	out.Summary = fmt.Sprintf("removed %s, %s freed", units.Count(n, "segment"), shm.Human(uint64(c.freed)))
	if o.DryRun {
		out.Summary = fmt.Sprintf("would remove %s (%s); nothing changed", units.Count(n, "segment"), shm.Human(uint64(c.freed)))
	} else if beforeErr == nil && afterErr == nil {
		out.Summary += fmt.Sprintf(" (%s used: %s → %s)", dir, shm.Human(before.Used()), shm.Human(after.Used()))
	}
	if stopped {
		out.Summary = "interrupted: " + out.Summary + fmt.Sprintf("; the other %s of %s were not touched", units.Digits(len(cands)-done), units.Count(len(cands), "file"))
	}
	if len(out.Skipped) > 0 {
		out.Summary += fmt.Sprintf("; %d left alone", len(out.Skipped))
	}
	return out, nil
}

// one decides and, when proven, removes the batch's i-th segment. It
// returns true when the file may only be proven by the /proc scan (a
// simulation, where no kernel is asked) and that scan saw everything:
// then fallback decides it.
//
// On the machine the proof is the kernel's write lease, held from before
// the last check until after the unlink. The unlink acts on the inode that
// was leased, not on whatever has the name at that moment: the file is
// first moved into a private 0700 directory (nobody else can rename there),
// checked there to be the leased inode, and unlinked there; a name that
// was swapped in the meantime (renameat2 RENAME_EXCHANGE by its owner)
// brings another file into the private directory, which is then put back
// untouched.
func (c *cleaner) one(i int, s shm.Segment, proof *shm.Proof) bool {
	name := textsafe.Name(s.Name)
	if hs := proof.Holders[i]; len(hs) > 0 {
		c.skip(fmt.Sprintf("%s: now in use by pid %d (%s)", name, hs[0].PID, textsafe.Sanitize(hs[0].Comm)))
		return false
	}
	if !c.real {
		return c.scanAlone(i, s, proof, shm.LeaseResult{})
	}
	l, lr := shm.TakeLease(c.dirfd, s.Name, s.Dev, s.Ino)
	switch lr.Verdict {
	case shm.LeaseFree:
		defer l.Release()
	case shm.LeaseUnavailable:
		c.skip(name + ": not proven unused: no kernel lease could be taken (" + textsafe.Sanitize(lr.Why) + "), and a /proc scan is no proof; kept")
		return false
	default:
		c.skip(name + ": " + textsafe.Sanitize(lr.Why))
		return false
	}
	cur, err := c.current(s)
	if err != nil {
		c.skip(name + ": " + err.Error())
		return false
	}
	if st, why := proof.Judge(i, cur, lr, c.h.Now()); st != shm.Orphaned {
		c.skip(name + ": " + textsafe.Sanitize(why))
		return false
	}
	if c.o.DryRun {
		c.done(s, "would remove %s (%s): the kernel granted an exclusive lease just now")
		return false
	}
	// Held across the move and the unlink: anything that opens the file
	// from the moment the lease was granted breaks it, and then it stays.
	if l.Broken() {
		c.skip(name + ": a process began opening it just now; kept")
		return false
	}
	priv, err := c.private()
	if err != nil {
		c.skip(name + ": " + err.Error() + "; kept")
		return false
	}
	if err := unix.Renameat2(c.dirfd, s.Name, priv, s.Name, unix.RENAME_NOREPLACE); err != nil {
		c.skip(name + ": could not be moved into ncclwiz's private directory (" + err.Error() + "); kept")
		return false
	}
	if !l.Same(priv, s.Name) {
		c.skip(name + ": " + c.restore(s.Name, "another file had taken its name at that moment (a rename swapped them)").Error())
		return false
	}
	if l.Broken() {
		c.skip(name + ": " + c.restore(s.Name, "a process began opening it just now").Error())
		return false
	}
	if err := unix.Unlinkat(priv, s.Name, 0); err != nil {
		c.skip(name + ": " + c.restore(s.Name, "unlink failed: "+err.Error()).Error())
		return false
	}
	if n, err := l.Links(); err != nil || n != 0 {
		// Only a hard link made through a descriptor could do this, and
		// that descriptor's open would have broken the lease.
		c.skip(fmt.Sprintf("%s: its name was removed, yet the file still has %d other name(s); nothing was freed", name, n))
		return false
	}
	if l.Broken() {
		// Its open had resolved the name before the move: it keeps a
		// working (now nameless) file, as if it had opened it first.
		c.done(s, "removed %s (%s); a process opened it at that very moment and keeps its copy")
		return false
	}
	c.done(s, "removed %s (%s)")
	return false
}

// privPrefix names the private directory a cleanup moves each file into
// right before unlinking it: nccl-ncclwiz-rm-PID-START-RANDOM, mode 0700.
const privPrefix = shm.CleanupDirPrefix

// private returns the cleanup's private directory, made on first use in
// the shm directory (same filesystem, so a rename moves the inode itself).
func (c *cleaner) private() (int, error) {
	if c.privfd >= 0 {
		return c.privfd, nil
	}
	start := uint64(0)
	if p, err := proctab.ReadStat(&host.Host{Root: "/"}, os.Getpid()); err == nil {
		start = p.StartTicks
	}
	for range 8 {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		name := fmt.Sprintf("%s%d-%d-%x", privPrefix, os.Getpid(), start, rnd)
		if err := unix.Mkdirat(c.dirfd, name, 0o700); err != nil {
			if errors.Is(err, unix.EEXIST) {
				continue
			}
			return -1, fmt.Errorf("cannot make ncclwiz's private directory in %s (%v)", c.dir, err)
		}
		fd, err := unix.Openat(c.dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			_ = unix.Unlinkat(c.dirfd, name, unix.AT_REMOVEDIR)
			return -1, fmt.Errorf("cannot open ncclwiz's private directory %s (%v)", name, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || int(st.Uid) != unix.Geteuid() || st.Mode&0o077 != 0 {
			_ = unix.Close(fd)
			return -1, fmt.Errorf("ncclwiz's private directory %s is not private", name)
		}
		c.privfd, c.privName = fd, name
		return fd, nil
	}
	return -1, errors.New("cannot find a free name for ncclwiz's private directory")
}

// closePrivate removes the private directory; a file that could not be put
// back keeps it, and the outcome says where.
func (c *cleaner) closePrivate() {
	if c.privfd < 0 {
		return
	}
	_ = unix.Close(c.privfd)
	c.privfd = -1
	if err := unix.Unlinkat(c.dirfd, c.privName, unix.AT_REMOVEDIR); err != nil {
		c.skip(fmt.Sprintf("ncclwiz's private directory %s was kept: %v", path.Join(c.dir, c.privName), err))
	}
}

// restore puts what was moved into the private directory back under its
// name; the error always says what happened.
func (c *cleaner) restore(name, why string) error {
	if err := unix.Renameat2(c.privfd, name, c.dirfd, name, unix.RENAME_NOREPLACE); err != nil {
		return fmt.Errorf("%s, and it could not be put back (%v): it is now %s", why, err, path.Join(c.dir, c.privName, textsafe.Name(name)))
	}
	return errors.New(why + "; put back untouched")
}

// restoreStale empties the private directories of cleanups that were
// killed (their process is gone): each file goes back under its name, to
// be judged again by the next scan, and the directory is removed.
func restoreStale(h *host.Host, dirfd int, dir string) []string {
	ents, err := h.ReadDir(dir)
	if err != nil {
		return nil
	}
	var notes []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), privPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		f := strings.SplitN(rest, "-", 3)
		if len(f) != 3 {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		start, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		// A cleanup running now (an exported script without /proc writes
		// start time 0: then the PID alone must be gone).
		if p, err := proctab.ReadStat(&host.Host{Root: "/"}, pid); err == nil && !p.Zombie() && (p.StartTicks == start || start == 0) {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(dirfd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) != nil || int(st.Uid) != unix.Geteuid() || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		fd, err := unix.Openat(dirfd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		d := os.NewFile(uintptr(fd), e.Name())
		names, _ := d.Readdirnames(-1)
		back := 0
		for _, n := range names {
			if unix.Renameat2(fd, n, dirfd, n, unix.RENAME_NOREPLACE) == nil {
				back++
			}
		}
		d.Close()
		if unix.Unlinkat(dirfd, e.Name(), unix.AT_REMOVEDIR) == nil {
			notes = append(notes, fmt.Sprintf("put back %s that a killed cleanup (pid %d) had moved into %s; the next scan judges them again",
				units.Count(back, "file"), pid, textsafe.Name(e.Name())))
		}
	}
	return notes
}

// scanAlone handles a file no lease can prove (not its owner and no
// CAP_LEASE, no lease support, a fixture tree): only a scan that saw every
// process and thread may prove it, and it is queued for fallback.
func (c *cleaner) scanAlone(i int, s shm.Segment, proof *shm.Proof, lr shm.LeaseResult) bool {
	name := textsafe.Name(s.Name)
	cur, err := c.current(s)
	if err != nil {
		c.skip(name + ": " + err.Error())
		return false
	}
	if st, why := proof.Judge(i, cur, lr, c.h.Now()); st != shm.Orphaned {
		c.skip(name + ": not proven unused (" + textsafe.Sanitize(why) + ")")
		return false
	}
	if c.o.DryRun {
		c.done(s, "would remove %s (%s): proven unused just now by a scan of every process")
		return false
	}
	return true
}

// fallback removes the queued files that only a /proc scan can prove: each
// is moved aside (so nothing can open it by its name), one more scan
// covers them all, and each is unlinked if still unheld, else put back.
// Once a file is moved it is finished whatever happens, so the second scan
// ignores an interrupt.
func (c *cleaner) fallback(ctx context.Context, batch []shm.Segment, queued []int) {
	if len(queued) == 0 || ctx.Err() != nil {
		for _, i := range queued {
			c.skip(textsafe.Name(batch[i].Name) + ": interrupted before it was proven; not touched")
		}
		return
	}
	var moved []shm.Segment
	var orig []shm.Segment
	for _, i := range queued {
		s := batch[i]
		name := textsafe.Name(s.Name)
		if err := sameFile(c.dirfd, s.Name, s); err != nil {
			c.skip(name + ": " + err.Error())
			continue
		}
		q := quarantineName(s)
		if err := unix.Renameat2(c.dirfd, s.Name, c.dirfd, q, unix.RENAME_NOREPLACE); err != nil {
			c.skip(name + ": could not be moved aside to prove it (" + err.Error() + "); kept")
			continue
		}
		if err := sameFile(c.dirfd, q, s); err != nil {
			c.skip(c.putBack(s, q, "a different file was moved aside").Error())
			continue
		}
		m := s
		m.Name = q
		m.Path = path.Join(c.dir, q)
		m.RealPath = c.h.Path(m.Path)
		moved = append(moved, m)
		orig = append(orig, s)
	}
	if len(moved) == 0 {
		return
	}
	proof, err := shm.ProveBatch(context.WithoutCancel(ctx), c.h, moved)
	for k, m := range moved {
		s := orig[k]
		name := textsafe.Name(s.Name)
		if err != nil {
			c.skip(name + ": " + c.putBack(s, m.Name, "no longer provably unused ("+reason(err, "scan failed")+")").Error())
			continue
		}
		if hs := proof.Holders[k]; len(hs) > 0 {
			c.skip(name + ": " + c.putBack(s, m.Name, fmt.Sprintf("pid %d (%s) opened it meanwhile", hs[0].PID, textsafe.Sanitize(hs[0].Comm))).Error())
			continue
		}
		cur, cerr := c.current(m)
		if cerr != nil {
			c.skip(name + ": " + c.putBack(s, m.Name, cerr.Error()).Error())
			continue
		}
		if st, why := proof.Judge(k, cur, shm.LeaseResult{}, c.h.Now()); st != shm.Orphaned {
			c.skip(name + ": " + c.putBack(s, m.Name, "no longer provably unused ("+textsafe.Sanitize(why)+")").Error())
			continue
		}
		if err := unix.Unlinkat(c.dirfd, m.Name, 0); err != nil {
			c.skip(name + ": " + c.putBack(s, m.Name, "unlink failed: "+err.Error()).Error())
			continue
		}
		c.done(s, "removed %s (%s)")
	}
}

// current is s as it is now in the directory (same file checked), for the
// last judgement: a file modified since the scan may belong to a new job.
func (c *cleaner) current(s shm.Segment) (shm.Segment, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(c.dirfd, s.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return s, errors.New("already gone")
		}
		return s, fmt.Errorf("stat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != s.Ino || uint64(st.Dev) != s.Dev {
		return s, errors.New("it changed since it was scanned (not the same file); left alone")
	}
	if st.Nlink > 1 {
		return s, errors.New("it has other hard links now; left alone")
	}
	if int(st.Uid) != s.UID {
		return s, fmt.Errorf("its owner changed (uid %d, planned %d); left alone", st.Uid, s.UID)
	}
	s.ModTime = time.Unix(st.Mtim.Unix())
	s.Mode = fs.FileMode(st.Mode & 0o777)
	return s, nil
}

func (c *cleaner) skip(why string) { c.out.Skipped = append(c.out.Skipped, why) }

// done records a removal (or, in a dry run, one that would happen).
func (c *cleaner) done(s shm.Segment, format string) {
	c.removed++
	c.freed += s.Allocated
	line := fmt.Sprintf(format, path.Join(c.dir, textsafe.Name(s.Name)), shm.Human(uint64(s.Allocated)))
	if c.listed < changedListed {
		c.out.Changed = append(c.out.Changed, line)
		c.listed++
	}
	if c.total <= proofBatch && !c.o.DryRun {
		c.o.progress("removed %s (%s)", textsafe.Name(s.Name), shm.Human(uint64(s.Allocated)))
	}
}

func reason(err error, def string) string {
	if err == nil {
		return def
	}
	return textsafe.Sanitize(err.Error())
}

// quarantineName is where a segment the scan alone must prove waits
// between its two scans. It starts with "nccl-" so that, should ncclwiz be
// killed right there, the next scan finds it as an orphan again.
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

// putBack moves a file from its quarantine name back to its own; the
// error always says what happened.
func (c *cleaner) putBack(s shm.Segment, q, why string) error {
	if err := unix.Renameat2(c.dirfd, q, c.dirfd, s.Name, unix.RENAME_NOREPLACE); err != nil {
		return fmt.Errorf("%s, and it could not be moved back (%v): it is now %s", why, err, path.Join(c.dir, q))
	}
	return errors.New(why + "; put back")
}
