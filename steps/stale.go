package steps

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/host"
)

// staleGrace is how long proc.stale waits after SIGTERM before it considers
// SIGKILL (which it only sends with consent).
const staleGrace = 10 * time.Second

func staleTargets(ctx context.Context, h *host.Host) []procs.StaleRank {
	rs, err := procs.FindStaleRanks(ctx, h)
	if err != nil {
		return nil
	}
	var out []procs.StaleRank
	for _, r := range rs {
		// A zombie has already exited; only its parent can reap it.
		if r.State == "Z" {
			continue
		}
		if r.UID == h.EUID || h.IsRoot() {
			out = append(out, r)
		}
	}
	return out
}

func planStale(ctx context.Context, h *host.Host, w wanted) *Fix {
	if !w.has("proc.stale") {
		return nil
	}
	targets := staleTargets(ctx, h)
	if len(targets) == 0 {
		return nil
	}
	var lines []string
	var pids []string
	for _, t := range targets {
		lines = append(lines, fmt.Sprintf("kill -TERM %d   # %s", t.PID, t.Command()))
		pids = append(pids, strconv.Itoa(t.PID))
	}
	return &Fix{
		ID: "proc.stale", Title: fmt.Sprintf("End %d leftover rank(s) by PID", len(targets)),
		Summary: fmt.Sprintf("Sends SIGTERM to PID %s (each re-checked to be the same process first), waits %s, and sends SIGKILL only if you agree. "+
			"Nothing is matched by name.", strings.Join(pids, ", "), staleGrace),
		Answers: []string{"proc.ranks", "gpu.processes"}, Risk: RiskHigh,
		Steps:   []Step{{Comment: "SIGTERM by PID; SIGKILL only after asking", Lines: lines}},
		Recheck: []string{"proc.ranks", "shm.segments"},
		apply:   applyStale,
	}
}

func applyStale(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
	if h.Act.Signal == nil {
		return Outcome{}, fmt.Errorf("this host cannot signal processes")
	}
	targets := staleTargets(ctx, h)
	out := Outcome{Before: map[string]any{"stale_ranks": len(targets)}}
	var waiting []procs.StaleRank
	for _, t := range targets {
		if !sameProcess(h, t.Proc) {
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d: no longer the same process", t.PID))
			continue
		}
		if err := h.Act.Signal(t.PID, syscall.SIGTERM); err != nil {
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d: %v", t.PID, err))
			continue
		}
		o.progress("sent SIGTERM to pid %d", t.PID)
		waiting = append(waiting, t)
	}
	deadline := time.Now().Add(staleGrace)
	for len(waiting) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		var still []procs.StaleRank
		for _, t := range waiting {
			if sameProcess(h, t.Proc) {
				still = append(still, t)
			} else {
				out.Changed = append(out.Changed, fmt.Sprintf("pid %d ended (SIGTERM): %s", t.PID, t.Command()))
			}
		}
		waiting = still
		if len(waiting) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, t := range waiting {
		q := fmt.Sprintf("pid %d (%s) ignored SIGTERM for %s. Send SIGKILL?", t.PID, t.Command(), staleGrace)
		if !(o.ForceKill || (o.Confirm != nil && o.Confirm(q))) {
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d: still running; SIGKILL not confirmed", t.PID))
			continue
		}
		if !sameProcess(h, t.Proc) {
			out.Changed = append(out.Changed, fmt.Sprintf("pid %d ended: %s", t.PID, t.Command()))
			continue
		}
		if err := h.Act.Signal(t.PID, syscall.SIGKILL); err != nil {
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d: %v", t.PID, err))
			continue
		}
		out.Changed = append(out.Changed, fmt.Sprintf("pid %d killed (SIGKILL): %s", t.PID, t.Command()))
	}
	out.Summary = fmt.Sprintf("ended %d of %d leftover rank(s)", len(out.Changed), len(targets))
	return out, nil
}

// sameProcess reports whether pid still runs the process that was judged
// (same start time), so a recycled PID is never signalled.
func sameProcess(h *host.Host, p procs.Proc) bool {
	cur, err := procs.Read(h, p.PID)
	// An exited child waiting to be reaped (state Z) has ended.
	return err == nil && cur.StartTicks == p.StartTicks && cur.State != "Z"
}
