//go:build !nonvml

package nvml_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ncclwiz/ncclwiz/internal/nvml"
	"github.com/ncclwiz/ncclwiz/internal/nvml/nvmltest"
)

// TestBindingReadsFakeDriver asks the stand-in library (compiled against
// NVIDIA's nvml.h) through the purego binding and checks every value the
// checks read, per device, so a wrong struct layout or a swapped argument
// shows up as a wrong number.
func TestBindingReadsFakeDriver(t *testing.T) {
	dir := nvmltest.Build(t, "gcc")
	lib := nvml.NewFrom(filepath.Join(dir, "libnvidia-ml.so.1"))
	if r := lib.Init(); r != nvml.SUCCESS {
		t.Fatalf("Init = %v", r)
	}
	defer lib.Shutdown()
	if v, r := lib.SystemGetDriverVersion(); r != nvml.SUCCESS || v != "580.65.06" {
		t.Errorf("driver = %q, %v", v, r)
	}
	if v, r := lib.SystemGetCudaDriverVersion(); r != nvml.SUCCESS || v != 13000 {
		t.Errorf("cuda = %d, %v", v, r)
	}
	n, r := lib.DeviceGetCount()
	if r != nvml.SUCCESS || n != 2 {
		t.Fatalf("count = %d, %v", n, r)
	}
	d0, _ := lib.DeviceGetHandleByIndex(0)
	d1, r := lib.DeviceGetHandleByIndex(1)
	if r != nvml.SUCCESS {
		t.Fatal(r)
	}
	if _, r := lib.DeviceGetHandleByIndex(2); r != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("handle 2 = %v, want INVALID_ARGUMENT", r)
	}
	p, _ := d1.GetPciInfo()
	if p.BusID != "00000009:11:00.0" || p.Domain != 9 || p.Bus != 0x11 || p.PciDeviceID != 0x234210DE {
		t.Errorf("pci = %+v", p)
	}
	if s, _ := d1.GetName(); s != "NVIDIA GH200 480GB (fake 1)" {
		t.Errorf("name = %q", s)
	}
	if s, _ := d0.GetUUID(); s != "GPU-fa4e0000-0000-0000-0000-000000000000" {
		t.Errorf("uuid = %q", s)
	}
	if m, _ := d1.GetMemoryInfo(); m.Total != 102005473280 || m.Used != 2<<30 || m.Free != m.Total-m.Used {
		t.Errorf("memory = %+v", m)
	}
	if a, b, _ := d1.GetCudaComputeCapability(); a != 9 || b != 1 {
		t.Errorf("cc = %d.%d", a, b)
	}
	if s, _ := d0.GetPersistenceMode(); s != nvml.FEATURE_ENABLED {
		t.Errorf("persistence = %v", s)
	}
	if c, pend, _ := d1.GetMigMode(); c != 0 || pend != 1 {
		t.Errorf("mig = %d %d", c, pend)
	}
	active := 0
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		st, r := d1.GetNvLinkState(l)
		if r != nvml.SUCCESS {
			break
		}
		if st == nvml.FEATURE_ENABLED {
			active++
		}
	}
	if active != 16 {
		t.Errorf("active links of GPU 1 = %d, want 16", active)
	}
	if g, _ := d1.GetCurrPcieLinkGeneration(); g != 2 {
		t.Errorf("curr gen = %d", g)
	}
	if w, _ := d1.GetCurrPcieLinkWidth(); w != 4 {
		t.Errorf("curr width = %d", w)
	}
	if nd, _ := d1.GetNumaNodeId(); nd != 9 {
		t.Errorf("numa = %d", nd)
	}
	if set, r := d1.GetMemoryAffinity(128, nvml.AFFINITY_SCOPE_NODE); r != nvml.SUCCESS || !reflect.DeepEqual(set, []uint64{2, 0}) {
		t.Errorf("memory affinity = %v, %v", set, r)
	}
	procs, r := d1.GetComputeRunningProcesses()
	if r != nvml.SUCCESS || !reflect.DeepEqual(procs, []nvml.ProcessInfo{{Pid: 4000, UsedGpuMemory: 1 << 28}, {Pid: 4001, UsedGpuMemory: 2 << 28}}) {
		t.Errorf("procs = %+v, %v", procs, r)
	}
	if l, _ := d0.GetTopologyCommonAncestor(d1); l != nvml.TOPOLOGY_SYSTEM {
		t.Errorf("topology = %v", l)
	}
	if s, _ := d0.GetP2PStatus(d1, nvml.P2P_CAPS_INDEX_WRITE); s != nvml.P2P_STATUS_DISABLED_BY_REGKEY {
		t.Errorf("p2p write = %v", s)
	}
	if u, _ := d1.GetUtilizationRates(); u != (nvml.Utilization{Gpu: 63, Memory: 4}) {
		t.Errorf("util = %+v", u)
	}
	if w, _ := d1.GetPowerUsage(); w != 96000 {
		t.Errorf("power = %d", w)
	}
	if c, _ := d1.GetClockInfo(nvml.CLOCK_SM); c != 1970 {
		t.Errorf("clock = %d", c)
	}
}

// TestBindingManyProcesses: more processes than the first buffer holds
// takes the INSUFFICIENT_SIZE retry.
func TestBindingManyProcesses(t *testing.T) {
	dir := nvmltest.Build(t, "gcc")
	t.Setenv("FAKENVML_PROCS", "100")
	lib := nvml.NewFrom(filepath.Join(dir, "libnvidia-ml.so.1"))
	if r := lib.Init(); r != nvml.SUCCESS {
		t.Fatal(r)
	}
	defer lib.Shutdown()
	d, _ := lib.DeviceGetHandleByIndex(1)
	procs, r := d.GetComputeRunningProcesses()
	if r != nvml.SUCCESS || len(procs) != 100 || procs[99].Pid != 4099 {
		t.Fatalf("%d procs, %v", len(procs), r)
	}
}

func TestBindingFailures(t *testing.T) {
	if r := nvml.NewFrom("/nonexistent/libnvidia-ml.so.1").Init(); r != nvml.ERROR_LIBRARY_NOT_FOUND {
		t.Errorf("missing library: Init = %v", r)
	}
	dir := nvmltest.Build(t, "gcc")
	t.Setenv("FAKENVML_FAIL_INIT", "18")
	lib := nvml.NewFrom(filepath.Join(dir, "libnvidia-ml.so.1"))
	if r := lib.Init(); r != nvml.ERROR_LIB_RM_VERSION_MISMATCH || r.Error() != "Driver/library version mismatch" {
		t.Errorf("Init = %v (%q)", r, r.Error())
	}
}
