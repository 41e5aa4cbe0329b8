package validate

import (
	"strings"
	"testing"
)

func TestExpectationFor(t *testing.T) {
	mixed := h100(4)
	mixed.Topology = topo(4, "NV18")
	mixed.Topology[0][3], mixed.Topology[3][0] = "SYS", "SYS"
	crossSocket := pcieSnapshot(4, "NVIDIA L40S", 4, 16, "NODE")
	crossSocket.Topology[1][2], crossSocket.Topology[2][1] = "SYS", "SYS"
	slowLink := pcieSnapshot(2, "NVIDIA L40S", 4, 16, "PIX")
	slowLink.Devices[1].PCIeWidth = 8
	noTopo := a100(8)
	noTopo.Topology = nil

	cases := []struct {
		name      string
		snap      *Snapshot
		ranks     int
		transport string
		id        string // "" = not judged
		low       float64
		why       string
	}{
		{"8x H100 SXM over NVSwitch", h100(8), 8, "P2P", "nvlink4-nvswitch", 370, ""},
		{"4 of 8 H100 (busbw through NVSwitch)", h100(8), 4, "P2P", "nvlink4-nvswitch", 370, ""},
		{"8x H200", nvSnapshot(8, "NVIDIA H200", "9.0", 18, 4), 8, "P2P", "nvlink4-nvswitch", 370, ""},
		{"H100 NVLink generation from the compute capability", nvSnapshot(8, "NVIDIA H100 80GB HBM3", "9.0", 18, 0), 8, "P2P", "nvlink4-nvswitch", 370, ""},
		{"8x H800", nvSnapshot(8, "NVIDIA H800", "9.0", 8, 4), 8, "P2P", "h800", 215, ""},
		{"2x H100 PCIe with a bridge", nvSnapshot(2, "NVIDIA H100 PCIe", "9.0", 12, 4), 2, "P2P", "h100-pcie-nvlink-bridge", 116, ""},
		{"H100 NVL has no figure", nvSnapshot(2, "NVIDIA H100 NVL", "9.0", 18, 4), 2, "P2P", "", 0, "no measured figure"},
		{"8x A100 SXM", a100(8), 8, "P2P", "nvlink3-a100", 200, ""},
		{"A100 without a topology matrix (links active)", noTopo, 8, "P2P", "nvlink3-a100", 200, ""},
		{"A800 has no figure", nvSnapshot(8, "NVIDIA A800-SXM4-80GB", "8.0", 8, 3), 8, "P2P", "", 0, "no measured figure"},
		{"V100 has no figure", nvSnapshot(8, "Tesla V100-SXM2-32GB", "7.0", 6, 2), 8, "P2P", "", 0, "NVLink 2"},
		{"NVLink between some pairs only", mixed, 4, "P2P", "", 0, "only some GPU pairs"},
		{"PCIe Gen4 x16 (L40S)", pcieSnapshot(4, "NVIDIA L40S", 4, 16, "NODE"), 4, "P2P", "pcie-gen4-x16", 24, ""},
		{"PCIe Gen3 x16 (V100 PCIe)", pcieSnapshot(4, "Tesla V100-PCIE-32GB", 3, 16, "PIX"), 4, "P2P", "pcie-gen3-x16", 12, ""},
		{"PCIe Gen5 x16", pcieSnapshot(2, "NVIDIA H100 PCIe", 5, 16, "PXB"), 2, "P2P", "pcie-gen5-x16", 48, ""},
		{"the slowest link bounds the ring", slowLink, 2, "P2P", "pcie-gen4-x8", 12, ""},
		{"consumer box with patched P2P", pcieSnapshot(4, "NVIDIA GeForce RTX 4090", 4, 16, "PHB"), 4, "P2P", "pcie-gen4-x16", 24, ""},
		{"consumer box through shared memory", pcieSnapshot(2, "NVIDIA GeForce RTX 4090", 4, 16, "PHB"), 2, "SHM", "", 0, "shared memory"},
		{"GPUs under different sockets", crossSocket, 4, "P2P", "", 0, "different CPU sockets"},
		{"network only", h100(8), 8, "NET/Socket", "", 0, "network"},
		{"no transport lines", h100(8), 8, "", "", 0, "no transport"},
		{"no snapshot", &Snapshot{State: "no-driver"}, 8, "P2P", "", 0, "GPU details unknown (no-driver)"},
		{"PCIe details unknown", pcieSnapshot(2, "NVIDIA L4", 0, 0, "PIX"), 2, "P2P", "", 0, "PCIe generation and width are unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vis, verr := visibleDevices(c.snap, "", false)
			sys := buildSystem(c.snap, vis, verr, c.ranks)
			e, why := expectationFor(sys, c.transport)
			switch {
			case c.id == "" && e != nil:
				t.Fatalf("want no range, got %+v", e)
			case c.id != "" && (e == nil || e.ID != c.id || e.Low != c.low):
				t.Fatalf("want %s (low %v), got %+v (%s)", c.id, c.low, e, why)
			case c.id == "" && !strings.Contains(why, c.why):
				t.Fatalf("reason %q lacks %q", why, c.why)
			}
			if e != nil && (e.Source == "" || !strings.Contains(e.Source, "http") && !strings.Contains(e.Source, "src/graph")) {
				t.Errorf("range without a source: %+v", e)
			}
		})
	}
}

// Every range in the table cites where it comes from (reference §6.2).
func TestExpectationTableSources(t *testing.T) {
	for _, e := range ExpectationTable() {
		if e.Source == "" || e.Low <= 0 || e.High < e.Low || e.System == "" {
			t.Errorf("incomplete: %+v", e)
		}
	}
	g4, _ := pcieExpectation(4, 16)
	if g4.Low != 24 || g4.High != 26 || !strings.Contains(g4.Source, "tinygrad/open-gpu-kernel-modules/issues/36") {
		t.Errorf("Gen4 x16: %+v", g4)
	}
	if _, ok := pcieExpectation(7, 16); ok {
		t.Error("an unknown generation has no model")
	}
}

func TestVisibleDevices(t *testing.T) {
	s := h100(4)
	cases := []struct {
		cvd  string
		set  bool
		want []int
		err  string
	}{
		{"", false, []int{0, 1, 2, 3}, ""},
		{"2,0", true, []int{2, 0}, ""},
		{"GPU-1003", true, []int{3}, ""},
		{"1, 9, 2", true, []int{1}, ""}, // CUDA stops at the first invalid entry
		{"0,0", true, []int{0}, ""},
		{"", true, nil, ""},
		{"MIG-4f2c", true, nil, "MIG"},
	}
	for _, c := range cases {
		got, err := visibleDevices(s, c.cvd, c.set)
		if strings.Join(strs(got), ",") != strings.Join(strs(c.want), ",") || (c.err == "") != (err == "") || !strings.Contains(err, c.err) {
			t.Errorf("%q: got %v %q, want %v %q", c.cvd, got, err, c.want, c.err)
		}
	}
	sys := buildSystem(s, []int{2, 3}, "", 2)
	if !sys.Known || sys.Devices[0].Index != 2 || !sys.AllNVLink {
		t.Errorf("%+v", sys)
	}
	if d := buildSystem(s, []int{0}, "", 2); d.Known || !strings.Contains(d.Why, "2 ranks but 1 visible") {
		t.Errorf("%+v", d)
	}
}

func TestDescribe(t *testing.T) {
	vis, _ := visibleDevices(h100(8), "", false)
	if got := buildSystem(h100(8), vis, "", 8).Describe(); got != "8x NVIDIA H100 80GB HBM3, NVLink 4 between all pairs" {
		t.Errorf("%q", got)
	}
	c := pcieSnapshot(2, "NVIDIA GeForce RTX 4090", 4, 16, "PHB")
	vis, _ = visibleDevices(c, "", false)
	if got := buildSystem(c, vis, "", 2).Describe(); got != "2x NVIDIA GeForce RTX 4090, no NVLink, PCIe Gen4 x16" {
		t.Errorf("%q", got)
	}
	if got := buildSystem(nil, nil, "", 2).Describe(); got != "GPU details unknown (no GPU snapshot)" {
		t.Errorf("%q", got)
	}
}

func strs(xs []int) []string {
	var out []string
	for _, x := range xs {
		out = append(out, trimFloat(float64(x)))
	}
	return out
}
