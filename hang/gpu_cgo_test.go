//go:build cgo

package hang

import (
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/ncclwiz/ncclwiz/host"
)

// TestGPUUse asks go-nvml's simulated DGX A100 about three ranks: two on
// GPUs at full utilisation and low power (NCCL spinning), one on a busy GPU.
func TestGPUUse(t *testing.T) {
	srv := dgxa100.New()
	procs := map[int]uint32{0: 501, 1: 502, 2: 503}
	for i, d := range srv.Devices {
		md, idx := d.(*server.Device), i
		md.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			if pid, ok := procs[idx]; ok {
				return []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: 30 << 30}}, nvml.SUCCESS
			}
			return nil, nvml.SUCCESS
		}
		md.GetUUIDFunc = func() (string, nvml.Return) { return "GPU-fake-" + string(rune('0'+idx)), nvml.SUCCESS }
		md.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 100}, nvml.SUCCESS }
		md.GetPowerUsageFunc = func() (uint32, nvml.Return) {
			if idx == 2 {
				return 380_000, nvml.SUCCESS
			}
			return 90_000, nvml.SUCCESS
		}
		md.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 400_000, nvml.SUCCESS }
		md.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 1410, nvml.SUCCESS }
	}
	h := host.Local(host.LocalOptions{})
	h.NVML = srv
	got := gpuUse(h, []int{501, 502, 503, 999})
	if len(got) != 3 || got[502].Index != 1 || got[503].PowerWatts != 380 || got[501].MemoryBytes != 30<<30 || got[501].SMClockMHz != 1410 {
		t.Fatalf("gpu use %+v", got)
	}
	var ss []RankSample
	for i, pid := range []int{501, 502, 503} {
		g := got[pid]
		s := sample(i, "R", "")
		s.PID, s.GPU = pid, &g
		ss = append(ss, s)
	}
	jd := Judge(ss, Facts{Backend: "nccl"})
	ev := jd.Evidence
	// Two GPUs spin in NCCL waiting for the third, whose kernels compute:
	// the straggler is rank 2.
	if fmt.Sprint(jd.Suspects) != "[2]" || jd.Verdict != VerdictSuspect {
		t.Errorf("verdict %s %v, want suspect [2]: %+v", jd.Verdict, jd.Suspects, ev)
	}
	spinning := 0
	for _, e := range ev {
		if strings.Contains(e.Text, "spinning while it waits") {
			spinning++
		}
	}
	if spinning != 2 {
		t.Fatalf("%d GPUs judged spinning, want 2: %+v", spinning, ev)
	}
}
