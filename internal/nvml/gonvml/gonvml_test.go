//go:build cgo

package gonvml_test

import (
	"path/filepath"
	"reflect"
	"testing"

	gn "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/ncclwiz/ncclwiz/internal/nvml"
	"github.com/ncclwiz/ncclwiz/internal/nvml/gonvml"
	"github.com/ncclwiz/ncclwiz/internal/nvml/nvmltest"
)

// snapshot reads every call ncclwiz makes, through one binding.
func snapshot(t *testing.T, lib nvml.Interface) []any {
	t.Helper()
	if r := lib.Init(); r != nvml.SUCCESS {
		t.Fatalf("Init = %v", r)
	}
	defer lib.Shutdown()
	var out []any
	add := func(v ...any) { out = append(out, v) }
	add(lib.SystemGetDriverVersion())
	add(lib.SystemGetCudaDriverVersion())
	n, r := lib.DeviceGetCount()
	add(n, r)
	var devs []nvml.Device
	for i := 0; i < n; i++ {
		d, r := lib.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			t.Fatal(r)
		}
		devs = append(devs, d)
	}
	for _, d := range devs {
		add(d.GetPciInfo())
		add(d.GetName())
		add(d.GetUUID())
		add(d.GetMemoryInfo())
		add(d.GetCudaComputeCapability())
		add(d.GetPersistenceMode())
		add(d.GetMigMode())
		for l := 0; l < 20; l++ {
			add(d.GetNvLinkState(l))
			add(d.GetNvLinkVersion(l))
		}
		add(d.GetMaxPcieLinkGeneration())
		add(d.GetCurrPcieLinkGeneration())
		add(d.GetMaxPcieLinkWidth())
		add(d.GetCurrPcieLinkWidth())
		add(d.GetNumaNodeId())
		add(d.GetMemoryAffinity(128, nvml.AFFINITY_SCOPE_NODE))
		add(d.GetComputeRunningProcesses())
		for _, o := range devs {
			add(d.GetTopologyCommonAncestor(o))
			for _, c := range []nvml.GpuP2PCapsIndex{nvml.P2P_CAPS_INDEX_READ, nvml.P2P_CAPS_INDEX_WRITE, nvml.P2P_CAPS_INDEX_NVLINK} {
				add(d.GetP2PStatus(o, c))
			}
		}
		add(d.GetUtilizationRates())
		add(d.GetPowerUsage())
		add(d.GetEnforcedPowerLimit())
		add(d.GetClockInfo(nvml.CLOCK_SM))
	}
	return out
}

// TestPuregoMatchesGoNVML reads the stand-in driver through NVIDIA's cgo
// binding and through ours: every answer must be the same.
func TestPuregoMatchesGoNVML(t *testing.T) {
	dir := nvmltest.Build(t, "gcc")
	path := filepath.Join(dir, "libnvidia-ml.so.1")
	t.Setenv("FAKENVML_PROCS", "40")
	want := snapshot(t, gonvml.Wrap(gn.New(gn.WithLibraryPath(path))))
	got := snapshot(t, nvml.NewFrom(path))
	if len(got) != len(want) {
		t.Fatalf("%d answers, go-nvml gave %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("answer %d: purego %v, go-nvml %v", i, got[i], want[i])
		}
	}
}
