package steps

import (
	"context"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/host"
)

// findStaleRanks asks the stale-rank detector which processes are leftover
// ranks. It is the only place that knows which package detects them.
func findStaleRanks(ctx context.Context, h *host.Host) ([]rank, error) {
	rs, err := procs.FindStaleRanks(ctx, h)
	if err != nil {
		return nil, err
	}
	out := make([]rank, 0, len(rs))
	for _, r := range rs {
		cmd := r.Command()
		if v, ok := r.Env["RANK"]; ok {
			cmd += " (rank " + v + ")"
		}
		out = append(out, rank{PID: r.PID, PPID: r.PPID, UID: r.UID, Command: cmd, Reason: r.Reason,
			Segments: r.Segments, Zombie: r.State == "Z"})
	}
	return out, nil
}
