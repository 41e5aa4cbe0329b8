package steps

import (
	"context"

	"github.com/ncclwiz/ncclwiz/checks/gpu"
	"github.com/ncclwiz/ncclwiz/host"
)

// findStaleRanks asks the stale-rank detector which processes are leftover
// ranks. It is the only place that knows which package detects them: the
// GPU one, so the preview shows the GPU memory NVML (through the host's
// NVML) reports for each PID, the same number gpu.processes shows.
func findStaleRanks(ctx context.Context, h *host.Host) ([]rank, error) {
	rs, err := gpu.FindStaleRanks(ctx, h)
	if err != nil {
		return nil, err
	}
	out := make([]rank, 0, len(rs))
	for _, r := range rs {
		cmd := r.Command()
		if v := r.Rank(); v != "" {
			cmd += " (rank " + v + ")"
		}
		out = append(out, rank{PID: r.PID, PPID: r.PPID, UID: r.UID(), Command: cmd, Reason: r.Reason(),
			Segments: r.Segments, GPUMemory: r.GPUMemory, Start: r.StartTicks, Zombie: r.Exited(),
			PIDNS: r.PIDNS, Job: jobOf(r.Env, r.SID)})
	}
	return out, nil
}
