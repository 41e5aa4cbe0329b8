package steps

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// staleGrace is how long proc.stale waits after SIGTERM before it asks
// about SIGKILL.
const staleGrace = 10 * time.Second

// rank is a leftover rank as proc.stale sees it: found by the stale-rank
// detector, pinned to one process by its start time.
type rank struct {
	PID, PPID, UID  int
	Command, Reason string
	GPUMemory       uint64
	Segments        []string
	Start           uint64 // start ticks (field 22 of /proc/PID/stat)
	Zombie          bool
	// PIDNS is its PID namespace (a container has its own); Job names the
	// job it was a rank of (run id, rendezvous or session), for scoping.
	PIDNS, Job string
}

func (r rank) holds() string {
	var parts []string
	if r.GPUMemory > 0 {
		parts = append(parts, shm.Human(r.GPUMemory)+" of GPU memory")
	}
	if n := len(r.Segments); n > 0 {
		parts = append(parts, units.Count(n, "shared-memory segment"))
	}
	if len(parts) == 0 {
		return "no GPU memory or segments seen"
	}
	return "holds " + strings.Join(parts, " and ")
}

// sameProcess reports whether pid still runs the process that was judged
// (same start time, so a recycled PID is never hit) and has not exited.
func sameProcess(ctx context.Context, h *host.Host, r rank) bool {
	p, err := proctab.ReadProcess(ctx, h, r.PID, proctab.Options{})
	return err == nil && p.StartTicks == r.Start && !p.Exited()
}

// staleTargets returns the leftover ranks proc.stale may end: the user's
// own (any user's as root), not zombies, pinned by start time.
func staleTargets(ctx context.Context, h *host.Host) (targets []rank, skipped []string, err error) {
	found, err := findStaleRanks(ctx, h)
	if err != nil {
		return nil, nil, err
	}
	self := syscall.Getpid()
	for _, r := range found {
		switch {
		case r.PID <= 1 || r.PID == self:
			continue
		case r.Zombie:
			skipped = append(skipped, fmt.Sprintf("pid %d is a zombie: it has already exited; only its parent (pid %d) can reap it", r.PID, r.PPID))
			continue
		case r.UID != h.EUID && !h.IsRoot():
			skipped = append(skipped, fmt.Sprintf("pid %d belongs to uid %d; only that user or root may end it", r.PID, r.UID))
			continue
		}
		if !sameProcess(ctx, h, r) {
			continue // ended meanwhile
		}
		targets = append(targets, r)
	}
	return targets, skipped, nil
}

func planStale(ctx context.Context, h *host.Host, r *request) *Fix {
	targets, skipped, err := staleTargets(ctx, h)
	if err != nil {
		return r.note("proc.stale", "cannot list processes: "+err.Error())
	}
	targets, skipped = scopeStale(h, targets, skipped, r.opts.AllUsers)
	if len(targets) == 0 {
		why := "no leftover rank of yours is running"
		if len(skipped) > 0 {
			why += " (" + strings.Join(skipped, "; ") + ")"
		}
		return r.note("proc.stale", why)
	}
	f := choosableStale(h, targets, skipped)
	r.ending = f.stalePIDs
	return f
}

// staleFix builds proc.stale for these targets.
func staleFix(h *host.Host, targets []rank, skipped []string) *Fix {
	var lines, pids []string
	needsRoot := false
	for _, t := range targets {
		lines = append(lines, fmt.Sprintf("kill -TERM %d   # %s; %s; %s", t.PID, clipText(t.Command, 80), t.holds(), t.Reason))
		pids = append(pids, strconv.Itoa(t.PID))
		needsRoot = needsRoot || t.UID != h.EUID
	}
	f := &Fix{
		ID:    "proc.stale",
		Title: fmt.Sprintf("End %s by PID (%s)", units.Count(len(targets), "leftover rank"), strings.Join(pids, ", ")),
		Summary: fmt.Sprintf("Sends SIGTERM to PID %s — each first re-checked to be the very process judged (same start time), so a recycled PID is never hit — "+
			"then waits up to %s for it to exit. A rank that ignores SIGTERM gets SIGKILL only if you agree to that separately. Nothing is matched by name.",
			strings.Join(pids, ", "), staleGrace),
		Guide: "stale-ranks", Risk: RiskHigh, NeedsRoot: needsRoot,
		Steps:    []Step{{Comment: "by PID; SIGKILL only after asking", Lines: lines, Root: needsRoot}},
		Recheck:  []string{"gpu.processes", "proc.ranks", "shm.segments"},
		Warnings: skipped,
	}
	f.stale = targets
	f.apply = func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
		return applyStale(ctx, h, targets, o)
	}
	f.script = func(s *script) { scriptStale(s, targets) }
	return f
}

func applyStale(ctx context.Context, h *host.Host, targets []rank, o ApplyOptions) (Outcome, error) {
	out := Outcome{Before: map[string]any{"stale_ranks": len(targets)}}
	if h.Act.Signal == nil && !o.DryRun {
		return out, errors.New("this host cannot signal processes")
	}
	ended := 0
	var waiting []rank
	if o.Preview != nil {
		var dropped []string
		targets, dropped = restrictToPreview(ctx, h, targets, o.Preview)
		out.Skipped = append(out.Skipped, dropped...)
	}
	// Judge again right before signalling: the launcher, age and CPU
	// evidence must still hold for the very process (same start time) that
	// was previewed. A rank that started working again is left alone.
	now, err := findStaleRanks(ctx, h)
	if err != nil {
		return out, fmt.Errorf("judge the ranks again before signalling: %w", err)
	}
	still := map[int]rank{}
	for _, r := range now {
		still[r.PID] = r
	}
	for i, t := range targets {
		if ctx.Err() != nil {
			// Interrupted (Ctrl-C, SIGTERM, output closed): the rank in hand
			// was finished; the others are not signalled.
			for _, r := range targets[i:] {
				out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d: interrupted before it was signalled; left alone", r.PID))
			}
			break
		}
		if !sameProcess(ctx, h, t) {
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d: already ended", t.PID))
			continue
		}
		if r, ok := still[t.PID]; !ok || r.Start != t.Start {
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d: %s", t.PID, whyDropped(ctx, h, PinnedPID{PID: t.PID, Start: t.Start})))
			continue
		}
		if o.DryRun {
			out.Changed = append(out.Changed, fmt.Sprintf("would send SIGTERM to pid %d (%s; %s)", t.PID, clipText(t.Command, 60), t.holds()))
			continue
		}
		if err := h.Act.Signal(t.PID, syscall.SIGTERM); err != nil {
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d: SIGTERM failed: %v", t.PID, err))
			continue
		}
		o.progress("sent SIGTERM to pid %d", t.PID)
		waiting = append(waiting, t)
	}
	if o.DryRun {
		out.Summary = fmt.Sprintf("would send SIGTERM to %s; nothing changed", units.Count(len(out.Changed), "process", "processes"))
		return out, nil
	}
	grace := o.Grace
	if grace <= 0 {
		grace = staleGrace
	}
	deadline := time.Now().Add(grace)
	for len(waiting) > 0 {
		var still []rank
		for _, t := range waiting {
			if sameProcess(ctx, h, t) {
				still = append(still, t)
				continue
			}
			ended++
			out.Changed = append(out.Changed, fmt.Sprintf("pid %d ended after SIGTERM: %s", t.PID, clipText(t.Command, 60)))
		}
		waiting = still
		if len(waiting) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, t := range waiting {
		if ctx.Err() != nil {
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d still running after SIGTERM; interrupted, so no SIGKILL was sent", t.PID))
			continue
		}
		q := fmt.Sprintf("pid %d (%s) ignored SIGTERM for %s. Send SIGKILL (it cannot clean up)?", t.PID, clipText(t.Command, 60), grace)
		dNote := inKernelWait(h, t)
		if dNote != "" {
			// SIGTERM did not end it because it cannot handle a signal now:
			// SIGKILL may not either, and the user must know before agreeing.
			q = fmt.Sprintf("pid %d (%s) did not end %s after SIGTERM: %s. Send SIGKILL anyway (it ends only if the wait is killable)?", t.PID, clipText(t.Command, 60), grace, dNote)
		}
		if !o.Kill && (o.Confirm == nil || !o.Confirm(q)) {
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d still running: SIGKILL not agreed (kill -KILL %d by hand, or --kill)", t.PID, t.PID))
			continue
		}
		if !sameProcess(ctx, h, t) {
			ended++
			out.Changed = append(out.Changed, fmt.Sprintf("pid %d ended: %s", t.PID, clipText(t.Command, 60)))
			continue
		}
		if err := h.Act.Signal(t.PID, syscall.SIGKILL); err != nil {
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d: SIGKILL failed: %v", t.PID, err))
			continue
		}
		o.progress("sent SIGKILL to pid %d", t.PID)
		for i := 0; i < 50 && sameProcess(ctx, h, t); i++ {
			time.Sleep(20 * time.Millisecond)
		}
		if sameProcess(ctx, h, t) {
			// Never reported as killed while it still runs: a task in D
			// dies only when its kernel wait returns.
			why := "it may still be exiting"
			if d := inKernelWait(h, t); d != "" {
				why = d
			}
			out.Skipped = append(out.Skipped, fmt.Sprintf("pid %d still running 1 s after SIGKILL: %s", t.PID, why))
			continue
		}
		ended++
		out.Changed = append(out.Changed, fmt.Sprintf("pid %d killed (SIGKILL): %s", t.PID, clipText(t.Command, 60)))
	}
	out.After = map[string]any{"ended": ended}
	out.Summary = fmt.Sprintf("ended %d of %s", ended, units.Count(len(targets), "leftover rank"))
	return out, nil
}

// inKernelWait says why a signal cannot end t now when its main thread is
// in uninterruptible sleep (D), or "".
func inKernelWait(h *host.Host, t rank) string {
	p, err := proctab.ReadStat(h, t.PID)
	if err != nil || p.StartTicks != t.Start || p.State != "D" {
		return ""
	}
	return "it is in uninterruptible sleep (D): " + procs.KernelWait(procs.ReadWchan(h, t.PID)) + "; " + procs.Unkillable
}

// clipText sanitises and shortens text from the machine for one line.
func clipText(s string, n int) string {
	return textwrap.Clip(textsafe.Clean(s), n)
}
