package steps

import (
	"context"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/scenario"
)

// Issue 13 item 7: proc.stale's preview shows the GPU memory NVML reports
// for the PID (the same number gpu.processes shows), through the host's
// NVML: the watchdog-timeout scenario's rank 3 (pid 90214) holds 30 GiB.
func TestStalePreviewShowsGPUMemory(t *testing.T) {
	s, err := scenario.Build("watchdog-timeout")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	fx, ok := ByID(PlanFor(context.Background(), s.Host, nil, []string{"proc.stale"}), "proc.stale")
	if !ok {
		t.Fatal("proc.stale not planned for the scenario's leftover rank")
	}
	preview := strings.Join(fx.Steps[0].Lines, "\n")
	if !strings.Contains(preview, "kill -TERM 90214") || !strings.Contains(preview, "holds 30 GiB of GPU memory") {
		t.Errorf("preview:\n%s", preview)
	}
	if strings.Contains(preview, "no GPU memory") {
		t.Errorf("preview denies the GPU memory:\n%s", preview)
	}
}
