package shm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// Caps on lists in evidence; the counts stay exact.
const (
	maxListed    = 200
	maxPIDsShown = 20
)

func runSegments(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	inv, err := Scan(ctx, h)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return []checks.Finding{{Severity: checks.Skipped, Title: shmDir(h) + " does not exist, so there are no segments to look at",
				Detail: "shm.mount explains what that means for NCCL.", Evidence: map[string]any{"dir": shmDir(h)}}}, nil
		}
		return nil, err
	}
	dir := inv.Dir
	if len(inv.Segments) == 0 {
		return []checks.Finding{{Severity: checks.OK, Title: "No NCCL or PyTorch segments in " + dir,
			Evidence: map[string]any{"dir": dir, "total": 0}}}, nil
	}

	var (
		count                                            = map[State]int{}
		ownNCCL, ownOther, others                        []Segment
		ownNCCLBytes, ownOtherBytes, othersBytes, allOrp int64
		inUse, young, unknown, symlinks, irregular       []Segment
		hardlinks, oddNames                              []Segment
	)
	list := make([]map[string]any, 0, min(len(inv.Segments), maxListed))
	now := h.Now()
	for _, s := range inv.Segments {
		count[s.State]++
		switch s.State {
		case Orphaned:
			allOrp += s.Allocated
			switch {
			case s.OtherUser:
				others = append(others, s)
				othersBytes += s.Allocated
			case s.IsNCCL():
				ownNCCL = append(ownNCCL, s)
				ownNCCLBytes += s.Allocated
			default:
				ownOther = append(ownOther, s)
				ownOtherBytes += s.Allocated
			}
		case InUse:
			inUse = append(inUse, s)
		case Young:
			young = append(young, s)
		case Unknown:
			if !s.Symlink && !s.Irregular {
				unknown = append(unknown, s)
			}
		}
		switch {
		case s.Symlink:
			symlinks = append(symlinks, s)
		case s.Irregular:
			irregular = append(irregular, s)
		case s.Nlink > 1:
			hardlinks = append(hardlinks, s)
		}
		if !textsafe.IsClean(s.Name) {
			oddNames = append(oddNames, s)
		}
		if len(list) < maxListed {
			list = append(list, segmentEvidence(s, now))
		}
	}
	ev := map[string]any{
		"dir": dir, "segments": list, "total": len(inv.Segments),
		"in_use": count[InUse], "orphaned": count[Orphaned], "unknown": count[Unknown], "young": count[Young],
		"reclaimable_bytes":     allOrp,
		"reclaimable_own_bytes": ownNCCLBytes + ownOtherBytes,
		"scanned_pids":          inv.ScannedPIDs, "unreadable_pids": len(inv.UnreadablePIDs),
		"pid_namespace": inv.PIDNamespace, "all_holders_visible": inv.Private, "visibility": nonNil(inv.Visibility),
	}
	if len(inv.UnreadablePIDs) > 0 {
		ev["unreadable_pid_list"] = inv.UnreadablePIDs[:min(len(inv.UnreadablePIDs), maxPIDsShown)]
	}
	if len(inv.IgnoredPIDs) > 0 {
		ev["ignored_pids"] = inv.IgnoredPIDs
	}
	if inv.Note != "" {
		ev["note"] = inv.Note
	}
	if len(list) < len(inv.Segments) {
		ev["segments_truncated"] = len(inv.Segments) - len(list)
	}
	var total uint64
	if st, err := h.Statfs(dir); err == nil {
		total = st.Total()
		ev["fs_size_bytes"] = total
	}
	share := func(b int64) uint64 {
		if total == 0 {
			return 0
		}
		return uint64(b) * 100 / total
	}

	var out []checks.Finding
	// The first finding carries the scan's evidence; the others carry
	// their own (or none) so JSON output does not repeat the list.
	add := func(f checks.Finding) {
		if f.Evidence == nil && len(out) == 0 {
			f.Evidence = ev
		}
		out = append(out, f)
	}
	const why = "No live process has them open or mapped. NCCL removes its segments once every peer has attached, " +
		"so leftovers mean a job was killed during NCCL's setup (SIGKILL from a launcher or the OOM killer, a crash, kill -9 of a hung run). " +
		"They keep using RAM, and the next job can fail with 'failed to extend /dev/shm/nccl-…' or a Bus error. "
	const safe = "ncclwiz removes exactly these files, re-proving each one unused (and the same file) right before removing it."
	if n := len(ownNCCL); n > 0 {
		sev, detail := checks.Warn, why+safe
		if p := share(ownNCCLBytes + ownOtherBytes); fillsTmpfs(p) {
			sev = checks.Error
			detail = fmt.Sprintf("Orphaned segments fill %d%% of %s. ", p, dir) + detail
		}
		title := fmt.Sprintf("%s %s %s in %s (left by a crashed job)", units.Count(n, "orphaned NCCL segment"), units.Word(n, "holds", "hold"), Human(uint64(ownNCCLBytes)), dir)
		if m := len(ownOther); m > 0 {
			title = fmt.Sprintf("%s and %s hold %s in %s (left by a crashed job)",
				units.Count(n, "orphaned NCCL segment"), units.Count(m, "other"), Human(uint64(ownNCCLBytes+ownOtherBytes)), dir)
		}
		add(checks.Finding{Severity: sev, Title: title, Detail: detail, Guide: "shm-stale-segments", Fixes: []string{"shm.cleanup"}})
	} else if m := len(ownOther); m > 0 {
		// PyTorch tensors (torch_*) and Python semaphores (sem.*) left by
		// killed DataLoader workers: tidy, not an NCCL failure by themselves.
		sev, detail := checks.Info, "No live process has them open or mapped: left by killed PyTorch or Python multiprocessing workers. They use RAM until removed. "+safe
		if p := share(ownOtherBytes); fillsTmpfs(p) {
			sev, detail = checks.Error, fmt.Sprintf("Orphaned files fill %d%% of %s, leaving little room for NCCL's ~9.2 MiB segments. ", p, dir)+detail
		}
		add(checks.Finding{Severity: sev,
			Title:  fmt.Sprintf("%s %s %s in %s", units.Count(m, "orphaned PyTorch/semaphore file"), units.Word(m, "holds", "hold"), Human(uint64(ownOtherBytes)), dir),
			Detail: detail, Guide: "shm-stale-segments", Fixes: []string{"shm.cleanup"}})
	}
	if n := len(others); n > 0 {
		sev := checks.Info
		detail := "They look unused, but only their owner or root may remove them; ncclwiz leaves other users' files alone. Ask the owner or an administrator."
		if h.IsRoot() {
			detail = "They look unused. As root you may remove them too: ncclwiz fix --apply shm.cleanup --all-users (each is re-proven unused first)."
		}
		if p := share(othersBytes); fillsTmpfs(p) {
			sev = checks.Warn
			detail = fmt.Sprintf("Other users' orphaned segments fill %d%% of %s. ", p, dir) + detail
		}
		add(checks.Finding{Severity: sev,
			Title:  fmt.Sprintf("%s of other users %s %s in %s (uid %s)", units.Count(n, "orphaned segment"), units.Word(n, "holds", "hold"), Human(uint64(othersBytes)), dir, uidList(others)),
			Detail: detail, Guide: "shm-stale-segments"})
	}
	if len(inUse) > 0 {
		pids := map[int]bool{}
		unseen := 0
		for _, s := range inUse {
			for _, hd := range s.Holders {
				pids[hd.PID] = true
			}
			if len(s.Holders) == 0 {
				unseen++
			}
		}
		title := fmt.Sprintf("%s in use by %s; they will not be touched",
			units.Count(len(inUse), "segment"), units.Count(len(pids), "running process", "running processes"))
		detail := "A running job has them open or mapped. If that job is hung or left over from a failed run, gpu.processes and proc.ranks show it; " +
			"end it first, and NCCL (or the cleanup) removes its files."
		if unseen > 0 {
			// The kernel refused a lease, so something holds them, but no
			// /proc file here names it.
			title = fmt.Sprintf("%s in use (%d held where /proc does not show by whom); they will not be touched",
				units.Count(len(inUse), "segment"), unseen)
			detail += " " + heldWhy + "."
		}
		add(checks.Finding{Severity: checks.Info, Title: title, Detail: detail})
	}
	if len(young) > 0 {
		add(checks.Finding{Severity: checks.Info,
			Title:  fmt.Sprintf("%s modified in the last %s", units.Count(len(young), "segment"), shortDur(YoungAge)),
			Detail: "A job may be setting up its communicators right now; they are not counted as orphaned until they are older. Run the check again in a few minutes."})
	}
	if n := len(unknown); n > 0 {
		detail := unknown[0].Reason
		if !inv.Private && inv.Note != "" {
			detail = inv.Note
		}
		var b int64
		for _, s := range unknown {
			b += s.Allocated
		}
		add(checks.Finding{Severity: checks.Info,
			Title:  fmt.Sprintf("%s (%s) could not be proven unused", units.Count(n, "segment"), Human(uint64(b))),
			Detail: detail})
	}
	for _, s := range symlinks {
		// Info, not a warning: the kernel's protected_symlinks and the
		// sticky bit keep NCCL from following another user's link, and
		// ncclwiz never touches it, so it does not block a job.
		add(checks.Finding{Severity: checks.Info,
			Title: fmt.Sprintf("Symlink in %s: %s -> %s", dir, textsafe.Name(s.Name), textsafe.Name(s.LinkTarget)),
			Detail: "NCCL and PyTorch never create symlinks here; a program that opened this name would write to the target instead. " +
				"ncclwiz does not follow it and will not remove it; check who created it (uid shown) and remove it by hand if it is not yours to keep.",
			Evidence: map[string]any{"name": textsafe.Name(s.Name), "target": textsafe.Name(s.LinkTarget), "uid": s.UID}, Guide: "shm-stale-segments"})
	}
	if len(irregular) > 0 {
		add(checks.Finding{Severity: checks.Info,
			Title:  fmt.Sprintf("%s with a segment name %s: %s", units.Count(len(irregular), "entry", "entries"), units.Word(len(irregular), "is not a regular file", "are not regular files"), nameList(irregular)),
			Detail: "Directories, FIFOs or sockets named like NCCL or PyTorch files; ncclwiz leaves them alone."})
	}
	if len(hardlinks) > 0 {
		add(checks.Finding{Severity: checks.Info,
			Title:  fmt.Sprintf("%s %s other hard links: %s", units.Count(len(hardlinks), "segment"), units.Word(len(hardlinks), "has", "have"), nameList(hardlinks)),
			Detail: "Removing the name here would not free the space, and the data is reachable elsewhere; ncclwiz leaves them alone."})
	}
	if len(oddNames) > 0 {
		add(checks.Finding{Severity: checks.Info,
			Title:  fmt.Sprintf("%s %s control or invalid bytes (shown escaped): %s", units.Count(len(oddNames), "name"), units.Word(len(oddNames), "contains", "contain"), nameList(oddNames)),
			Detail: "Such names can hide terminal escape sequences; ncclwiz shows them escaped, never prints them raw and does not remove them automatically."})
	}
	if len(out) == 0 {
		add(checks.Finding{Severity: checks.OK, Title: fmt.Sprintf("%s in %s, none orphaned", units.Count(len(inv.Segments), "segment"), dir)})
	}
	return out, nil
}

// fillsTmpfs is the one rule that escalates a group of orphans: they
// fill half of the tmpfs or more. Each group (own NCCL segments, own other
// files, other users' files) is judged on its own bytes only, so removing
// one group never changes another's severity: other users' orphans read
// the same before and after the user's own cleanup.
func fillsTmpfs(percent uint64) bool { return percent >= 50 }

func segmentEvidence(s Segment, now time.Time) map[string]any {
	e := map[string]any{"name": textsafe.Name(s.Name), "kind": s.Kind, "size": s.Size, "allocated": s.Allocated,
		"uid": s.UID, "age_seconds": int64(now.Sub(s.ModTime).Seconds()), "state": string(s.State), "inode": s.Ino}
	if s.Reason != "" && s.State != InUse {
		e["reason"] = textsafe.Sanitize(s.Reason)
	}
	if len(s.Holders) > 0 {
		hs := make([]string, 0, len(s.Holders))
		for _, hd := range s.Holders {
			hs = append(hs, fmt.Sprintf("%d/%s via %s", hd.PID, textsafe.Sanitize(hd.Comm), hd.Via))
		}
		e["holders"] = hs
	}
	if s.Symlink {
		e["symlink_to"] = textsafe.Name(s.LinkTarget)
	}
	if s.Nlink > 1 {
		e["nlink"] = s.Nlink
	}
	return e
}

func nameList(segs []Segment) string {
	var names []string
	for i, s := range segs {
		if i == 5 {
			names = append(names, fmt.Sprintf("+%d more", len(segs)-5))
			break
		}
		names = append(names, textsafe.Name(s.Name))
	}
	return strings.Join(names, ", ")
}

func uidList(segs []Segment) string {
	seen := map[int]bool{}
	var parts []string
	for _, s := range segs {
		if !seen[s.UID] {
			seen[s.UID] = true
			parts = append(parts, fmt.Sprint(s.UID))
		}
	}
	return strings.Join(parts, ", ")
}

func shortDur(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d minutes", int(d/time.Minute))
	}
	return d.String()
}
