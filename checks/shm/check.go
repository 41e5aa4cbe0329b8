package shm

import (
	"context"
	"fmt"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/textsafe"
)

// maxListed caps the segment list in evidence; counts stay exact.
const maxListed = 200

func runSegments(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	inv, err := Scan(ctx, h)
	if err != nil {
		return nil, err
	}
	dir := inv.Dir
	if len(inv.Segments) == 0 {
		return []checks.Finding{{Severity: checks.OK, Title: "No NCCL or PyTorch segments in " + dir,
			Evidence: map[string]any{"dir": dir}}}, nil
	}
	count := map[State]int{}
	var orphanNCCL, orphanMine []Segment
	var reclaim, reclaimMine int64
	var inUse, unknown, young, symlinks, hardlinks, oddNames, otherUsers []Segment
	list := make([]map[string]any, 0, min(len(inv.Segments), maxListed))
	now := h.Now()
	for _, s := range inv.Segments {
		count[s.State]++
		switch s.State {
		case Orphaned:
			reclaim += s.Allocated
			if s.Kind == "nccl" || s.Kind == "nccl-legacy" {
				orphanNCCL = append(orphanNCCL, s)
			}
			if !s.OtherUser {
				orphanMine = append(orphanMine, s)
				reclaimMine += s.Allocated
			} else {
				otherUsers = append(otherUsers, s)
			}
		case InUse:
			inUse = append(inUse, s)
		case Young:
			young = append(young, s)
		case Unknown:
			unknown = append(unknown, s)
		}
		if s.Symlink {
			symlinks = append(symlinks, s)
		}
		if s.Nlink > 1 && !s.Symlink {
			hardlinks = append(hardlinks, s)
		}
		if !textsafe.IsClean(s.Name) {
			oddNames = append(oddNames, s)
		}
		if len(list) < maxListed {
			e := map[string]any{"name": textsafe.Sanitize(s.Name), "kind": s.Kind, "size": s.Size, "allocated": s.Allocated,
				"uid": s.UID, "age_seconds": int64(now.Sub(s.ModTime).Seconds()), "state": string(s.State)}
			if len(s.Holders) > 0 {
				var hs []string
				for _, hd := range s.Holders {
					hs = append(hs, fmt.Sprintf("%d/%s via %s", hd.PID, textsafe.Sanitize(hd.Comm), hd.Via))
				}
				e["holders"] = hs
			}
			if s.Symlink {
				e["symlink_to"] = textsafe.Sanitize(s.LinkTarget)
			}
			if s.Nlink > 1 {
				e["nlink"] = s.Nlink
			}
			list = append(list, e)
		}
	}
	ev := map[string]any{
		"dir": dir, "segments": list, "total": len(inv.Segments),
		"in_use": count[InUse], "orphaned": count[Orphaned], "unknown": count[Unknown], "young": count[Young],
		"reclaimable_bytes": reclaim, "scanned_pids": inv.ScannedPIDs, "unreadable_pids": len(inv.UnreadablePIDs),
	}
	if len(list) < len(inv.Segments) {
		ev["segments_truncated"] = len(inv.Segments) - len(list)
	}
	var fs []checks.Finding
	// The first finding carries the scan's evidence; the others carry
	// their own (or none) so JSON output does not repeat the list.
	add := func(f checks.Finding) {
		if f.Evidence == nil && len(fs) == 0 {
			f.Evidence = ev
		}
		fs = append(fs, f)
	}
	if len(orphanMine) > 0 {
		sev := checks.Warn
		detail := "No live process has these files open or mapped: they were left by a job that was killed during NCCL's setup " +
			"(SIGKILL, OOM-killer, a crash), and they keep using RAM. The next job can fail with 'failed to extend /dev/shm/nccl-…'. " +
			"ncclwiz can remove exactly these files; it re-proves each one unused right before removing it."
		if st, err := h.Statfs(dir); err == nil && st.Total() > 0 && uint64(reclaimMine)*2 >= st.Total() {
			sev = checks.Error
			detail = fmt.Sprintf("They fill %d%% of %s. ", uint64(reclaimMine)*100/st.Total(), dir) + detail
		}
		what := "NCCL"
		if len(orphanNCCL) < len(orphanMine) {
			what = "shared-memory"
		}
		add(checks.Finding{Severity: sev,
			Title:  fmt.Sprintf("%d orphaned %s segment(s) hold %s in %s (left by a crashed job)", len(orphanMine), what, Human(uint64(reclaimMine)), dir),
			Detail: detail, Guide: "shm-stale-segments", Fixes: []string{"shm.cleanup"}})
	}
	if len(otherUsers) > 0 {
		detail := "They look unused, but only their owner or root may remove them; ncclwiz leaves other users' files alone."
		if h.IsRoot() {
			detail = "They look unused. As root you may remove them too: ncclwiz fix --apply shm.cleanup --all-users (each is re-proven unused first)."
		}
		add(checks.Finding{Severity: checks.Info,
			Title:  fmt.Sprintf("%d orphaned segment(s) belong to other users", len(otherUsers)),
			Detail: detail, Guide: "shm-stale-segments"})
	}
	if len(inUse) > 0 {
		pids := map[int]bool{}
		for _, s := range inUse {
			for _, hd := range s.Holders {
				pids[hd.PID] = true
			}
		}
		add(checks.Finding{Severity: checks.Info,
			Title:  fmt.Sprintf("%d segment(s) in use by %d running process(es); they will not be touched", len(inUse), len(pids)),
			Detail: "A running job holds them. If that job is hung or left over from a failed run, gpu.processes shows it."})
	}
	if len(young) > 0 {
		add(checks.Finding{Severity: checks.Info,
			Title:  fmt.Sprintf("%d segment(s) were created in the last %s", len(young), YoungAge),
			Detail: "A job may be starting up right now; they are not counted as orphaned until they are older."})
	}
	if n := len(unknown) - len(symlinks); n > 0 {
		why := inv.Note
		if why == "" {
			why = fmt.Sprintf("%d process(es) could not be inspected without root, so these cannot be proven unused.", len(inv.UnreadablePIDs))
		}
		add(checks.Finding{Severity: checks.Info, Title: fmt.Sprintf("%d segment(s) could not be proven unused", n), Detail: why})
	}
	for _, s := range symlinks {
		add(checks.Finding{Severity: checks.Info,
			Title:    fmt.Sprintf("Symlink in %s: %s -> %s", dir, textsafe.Sanitize(s.Name), textsafe.Sanitize(s.LinkTarget)),
			Detail:   "NCCL never creates symlinks here. ncclwiz does not follow it and will not remove it; whoever created it should.",
			Evidence: map[string]any{"name": textsafe.Sanitize(s.Name), "target": textsafe.Sanitize(s.LinkTarget), "uid": s.UID}, Guide: "shm-stale-segments"})
	}
	if len(hardlinks) > 0 {
		var names []string
		for _, s := range hardlinks {
			names = append(names, textsafe.Sanitize(s.Name))
		}
		add(checks.Finding{Severity: checks.Info, Title: fmt.Sprintf("%d segment(s) have other hard links: %s", len(hardlinks), strings.Join(names, ", ")),
			Detail: "Removing the name here would not free the space, and the data is reachable elsewhere; ncclwiz leaves them alone."})
	}
	if len(oddNames) > 0 {
		var names []string
		for _, s := range oddNames {
			names = append(names, textsafe.Sanitize(s.Name))
		}
		add(checks.Finding{Severity: checks.Info, Title: fmt.Sprintf("%d name(s) contain control or invalid bytes (shown escaped): %s", len(oddNames), strings.Join(names, ", ")),
			Detail: "Such names can hide terminal escape sequences; ncclwiz shows them escaped and never prints them raw."})
	}
	if len(fs) == 0 {
		add(checks.Finding{Severity: checks.OK, Title: fmt.Sprintf("%d segment(s) in %s, none orphaned", len(inv.Segments), dir)})
	}
	return fs, nil
}
