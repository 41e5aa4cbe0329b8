package validate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/internal/units"
)

// Expectation is a sourced typical range of all_reduce bus bandwidth for
// large messages (reference nccl-failures.md §6.2).
type Expectation struct {
	ID     string  `json:"id"`
	System string  `json:"system"`
	Low    float64 `json:"low_gbps"`
	High   float64 `json:"high_gbps"`
	Source string  `json:"source"`
	Note   string  `json:"note,omitempty"`
}

// Range renders "370–480 GB/s" or "~116 GB/s".
func (e Expectation) Range() string {
	if e.High <= e.Low {
		return fmt.Sprintf("~%s GB/s", trimFloat(e.Low))
	}
	return fmt.Sprintf("%s–%s GB/s", trimFloat(e.Low), trimFloat(e.High))
}

// The measured ranges. Each names where the figure comes from; the figures
// are peaks at ≥1 GB messages, which is why verdicts apply a tolerance.
var (
	expNVLink4SXM = Expectation{
		ID: "nvlink4-nvswitch", System: "H100/H200 SXM, NVLink 4 through NVSwitch", Low: 370, High: 480,
		Source: "NCCL maintainer, https://github.com/NVIDIA/nccl-tests/issues/212 (~480 GB/s peak on 8 GPUs with NVLS; " +
			"370 GB/s effective NVLink bandwidth with rings); 8x H200 peak 475 GB/s, https://github.com/NVIDIA/nccl-tests/issues/272; " +
			"NCCL src/graph/topo.h SM90_NVLINK_BW 20.6 GB/s x 18 links = 370.8",
		Note: "low end = rings without NVLS; through NVSwitch busbw does not depend much on the GPU count",
	}
	expH800 = Expectation{
		ID: "h800", System: "H800 (reduced NVLink)", Low: 215, High: 215,
		Source: "reported in https://github.com/NVIDIA/nccl/issues/1374",
	}
	expH100Bridge = Expectation{
		ID: "h100-pcie-nvlink-bridge", System: "2x H100 PCIe with an NVLink bridge", Low: 116, High: 116,
		Source: "https://github.com/NVIDIA/nccl/issues/1161",
	}
	expA100 = Expectation{
		ID: "nvlink3-a100", System: "A100 with NVLink 3 (NVSwitch, or an NV12 pair)", Low: 200, High: 235,
		Source: "220 GB/s on 8x A100 SXM, https://github.com/NVIDIA/nccl-tests/issues/228; ~200 GB/s, " +
			"https://github.com/NVIDIA/nccl-tests/issues/149; ~208 GB/s for an NV12 pair, https://github.com/NVIDIA/nccl-tests/issues/178; " +
			"NCCL model SM80_NVLINK_BW 20 GB/s x 12 links = 240 (src/graph/topo.h)",
	}
)

// pciePerLane is NCCL's per-lane PCIe rate in units of 100 Mbps, by
// generation (kvDictPciGen in src/graph/topo.cc, NCCL v2.30.7).
var pciePerLane = map[int]float64{1: 15, 2: 30, 3: 60, 4: 120, 5: 240, 6: 480}

// pcieExpectation is NCCL's own PCIe link model: bw = width x rate / 80
// GB/s (ncclTopoAddPci in src/graph/topo.cc), e.g. Gen3 x16 = 12, Gen4 x16 =
// 24. Gen4 x16 has a measured confirmation (~26 GB/s, 4x RTX 4090 with P2P).
func pcieExpectation(gen, width int) (Expectation, bool) {
	rate, ok := pciePerLane[gen]
	if !ok || width <= 0 {
		return Expectation{}, false
	}
	bw := float64(width) * rate / 80
	e := Expectation{
		ID:     fmt.Sprintf("pcie-gen%d-x%d", gen, width),
		System: fmt.Sprintf("PCIe Gen%d x%d, P2P between GPUs", gen, width),
		Low:    bw, High: bw,
		Source: "NCCL's PCIe model: link_width x per-lane rate / 80 GB/s (src/graph/topo.cc ncclTopoAddPci and kvDictPciGen, v2.30.7; " +
			"Gen3 x16 = 12 = PCI_BW in src/graph/topo.h; Gen4 x16 = 24, '=== System : maxBw 24.0' in https://github.com/NVIDIA/nccl-tests/issues/307)",
		Note: "a model of one link, not a measurement",
	}
	if gen == 4 && width == 16 {
		e.High = 26
		e.Source += "; ~26 GB/s measured on 4x RTX 4090 Gen4 x16 with P2P enabled, https://github.com/tinygrad/open-gpu-kernel-modules/issues/36"
		e.Note = ""
	}
	return e, true
}

// ExpectationTable lists every range the verdicts can use (for the README
// and `ncclwiz test --help`), PCIe models included for Gen3–Gen5 x16.
func ExpectationTable() []Expectation {
	out := []Expectation{expNVLink4SXM, expH800, expH100Bridge, expA100}
	for _, g := range []int{3, 4, 5} {
		e, _ := pcieExpectation(g, 16)
		out = append(out, e)
	}
	return out
}

// system is what the verdicts know about the GPUs one rung uses.
type system struct {
	// Known is false when no GPU snapshot matched the devices in use.
	Known     bool
	Why       string // why unknown
	Devices   []Device
	AllNVLink bool
	AnyNVLink bool
	// CrossSocket is set when some pair's topology is SYS.
	CrossSocket bool
	// Consumer is set for GeForce cards, whose driver usually keeps P2P off.
	Consumer bool
}

// Describe renders e.g. "8x NVIDIA H100 80GB HBM3, NVLink 4 between all pairs".
func (s system) Describe() string {
	if !s.Known {
		if s.Why == "" {
			return "GPU details unknown"
		}
		return "GPU details unknown (" + s.Why + ")"
	}
	if len(s.Devices) == 0 {
		return "no GPU"
	}
	names := map[string]int{}
	var order []string
	for _, d := range s.Devices {
		if names[d.Name] == 0 {
			order = append(order, d.Name)
		}
		names[d.Name]++
	}
	var parts []string
	for _, n := range order {
		parts = append(parts, fmt.Sprintf("%dx %s", names[n], n))
	}
	desc := strings.Join(parts, " + ")
	gen, width := s.pcie()
	switch {
	case len(s.Devices) == 1:
		if gen > 0 {
			desc += fmt.Sprintf(", PCIe Gen%d x%d", gen, width)
		}
	case s.AllNVLink:
		desc += fmt.Sprintf(", NVLink %d between all pairs", s.nvlinkGen())
	case s.AnyNVLink:
		desc += ", NVLink between some pairs only"
	default:
		desc += ", no NVLink"
		if gen > 0 {
			desc += fmt.Sprintf(", PCIe Gen%d x%d", gen, width)
		}
		if s.CrossSocket {
			desc += ", GPUs under different CPU sockets"
		}
	}
	return desc
}

// pcie returns the slowest link among the devices (it bounds a ring).
func (s system) pcie() (gen, width int) {
	for i, d := range s.Devices {
		if d.PCIeGen <= 0 || d.PCIeWidth <= 0 {
			return 0, 0
		}
		if i == 0 || d.PCIeGen < gen {
			gen = d.PCIeGen
		}
		if i == 0 || d.PCIeWidth < width {
			width = d.PCIeWidth
		}
	}
	return gen, width
}

// nvlinkGen is the NVLink generation of the first device: NVML's answer,
// else derived from the compute capability (sm_90 NVLink 4, sm_80 NVLink 3).
func (s system) nvlinkGen() int {
	if len(s.Devices) == 0 {
		return 0
	}
	d := s.Devices[0]
	if d.NVLinkVersion > 0 {
		return d.NVLinkVersion
	}
	switch {
	case strings.HasPrefix(d.CC, "10."):
		return 5
	case strings.HasPrefix(d.CC, "9."):
		return 4
	case d.CC == "8.0" || d.CC == "8.6":
		return 3
	case d.CC == "7.0":
		return 2
	case d.CC == "6.0":
		return 1
	}
	return 0
}

var reNVL = regexp.MustCompile(`\bNVL\b`)

// expectationFor picks the sourced range for the devices and the transport
// NCCL used, or says why none applies.
func expectationFor(s system, transport string) (*Expectation, string) {
	if !s.Known {
		return nil, "GPU details unknown (" + s.Why + "), so no reference range applies"
	}
	switch {
	case transport == "":
		return nil, "NCCL reported no transport"
	case transport == "SHM":
		return nil, "NCCL used shared memory through the CPU; its speed depends on CPU and memory, and the reference gives only indicative figures (https://github.com/NVIDIA/nccl/issues/1817)"
	case strings.HasPrefix(transport, "NET") || transport == "COLLNET":
		return nil, "NCCL used the network (" + transport + "); its speed depends on the NIC, and no single-node reference range exists"
	}
	name := ""
	if len(s.Devices) > 0 {
		name = s.Devices[0].Name
	}
	gen := s.nvlinkGen()
	switch {
	case s.AllNVLink && strings.Contains(name, "H800"):
		e := expH800
		return &e, ""
	case s.AllNVLink && strings.Contains(name, "H100") && strings.Contains(name, "PCIe") && len(s.Devices) == 2:
		e := expH100Bridge
		return &e, ""
	case s.AllNVLink && gen == 4 && (strings.Contains(name, "H100") || strings.Contains(name, "H200")) &&
		!strings.Contains(name, "PCIe") && !reNVL.MatchString(name):
		e := expNVLink4SXM
		return &e, ""
	case s.AllNVLink && gen == 3 && strings.Contains(name, "A100"):
		e := expA100
		return &e, ""
	case s.AllNVLink:
		return nil, fmt.Sprintf("the reference has no measured figure for %s with NVLink %d", name, gen)
	case s.AnyNVLink:
		return nil, "only some GPU pairs are NVLink-connected, so rings also cross PCIe; no reference range applies"
	case s.CrossSocket:
		return nil, "the GPUs sit under different CPU sockets (SYS): bandwidth depends on the inter-socket link, and no reference range applies"
	}
	pg, pw := s.pcie()
	e, ok := pcieExpectation(pg, pw)
	if !ok {
		return nil, "PCIe generation and width are unknown"
	}
	return &e, ""
}

// buildSystem selects the devices a rung with ranks ranks uses: the first
// ranks of the visible devices (LOCAL_RANK r uses CUDA device r; nccl-tests
// -g N uses devices 0..N-1).
func buildSystem(snap *Snapshot, visible []int, visErr string, ranks int) system {
	if snap == nil || snap.State != "ok" {
		why := "no GPU snapshot"
		if snap != nil {
			why = snap.State
			if snap.Detail != "" {
				why += ": " + snap.Detail
			}
		}
		return system{Why: why}
	}
	if visErr != "" {
		return system{Why: visErr}
	}
	if ranks > len(visible) {
		return system{Why: fmt.Sprintf("%d ranks but %s", ranks, units.Count(len(visible), "visible GPU"))}
	}
	s := system{Known: true}
	pos := visible[:ranks]
	for _, p := range pos {
		s.Devices = append(s.Devices, snap.Devices[p])
		if strings.Contains(snap.Devices[p].Name, "GeForce") {
			s.Consumer = true
		}
	}
	if len(pos) < 2 {
		return s
	}
	allNV, anyNV := true, false
	topoKnown := len(snap.Topology) == len(snap.Devices)
	for i, a := range pos {
		for _, b := range pos[i+1:] {
			link := ""
			if topoKnown && a < len(snap.Topology) && b < len(snap.Topology[a]) {
				link = snap.Topology[a][b]
			}
			nv := strings.HasPrefix(link, "NV")
			if !topoKnown {
				// Without a matrix, every GPU having active links is the
				// best evidence (NVSwitch boxes connect all of them).
				nv = snap.Devices[a].NVLinkActive > 0 && snap.Devices[b].NVLinkActive > 0
			}
			if nv {
				anyNV = true
			} else {
				allNV = false
			}
			switch link {
			case "SYS":
				s.CrossSocket = true
			case "?":
				return system{Why: fmt.Sprintf("NVML could not tell how GPUs %d and %d connect", snap.Devices[a].Index, snap.Devices[b].Index)}
			}
		}
	}
	s.AllNVLink, s.AnyNVLink = allNV, anyNV
	return s
}

// visibleDevices maps CUDA_VISIBLE_DEVICES onto positions in snap.Devices
// with CUDA's rules: indices or GPU-UUID prefixes, and the list ends at the
// first entry that names no device.
func visibleDevices(snap *Snapshot, cvd string, set bool) ([]int, string) {
	if snap == nil || snap.State != "ok" {
		return nil, ""
	}
	if !set {
		out := make([]int, len(snap.Devices))
		for i := range out {
			out[i] = i
		}
		return out, ""
	}
	var out []int
	seen := map[int]bool{}
	for _, raw := range strings.Split(cvd, ",") {
		tok := strings.TrimSpace(raw)
		if tok == "" {
			break
		}
		p := -1
		if n, err := strconv.Atoi(tok); err == nil {
			for i, d := range snap.Devices {
				if d.Index == n {
					p = i
				}
			}
		} else if strings.HasPrefix(tok, "GPU-") {
			for i, d := range snap.Devices {
				if d.UUID != "" && strings.HasPrefix(d.UUID, tok) {
					p = i
				}
			}
		} else if strings.HasPrefix(tok, "MIG-") {
			return nil, "CUDA_VISIBLE_DEVICES names MIG instances; their interconnect is not modelled"
		}
		if p < 0 || seen[p] {
			break
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, ""
}

func trimFloat(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}
