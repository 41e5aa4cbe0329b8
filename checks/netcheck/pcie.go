package netcheck

import (
	"context"
	"encoding/binary"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

const srcACS = "NCCL docs, GPU troubleshooting › PCI Access Control Services (ACS); NVIDIA/nccl#631"

var bdfRe = regexp.MustCompile(`^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// GPU is an NVIDIA GPU on the PCI bus, with the bridges above it.
type GPU struct {
	BDF       string   `json:"bdf"`
	Group     string   `json:"iommu_group,omitempty"`
	GroupType string   `json:"iommu_group_type,omitempty"` // identity, DMA, DMA-FQ, blocked
	Bridges   []string `json:"bridges,omitempty"`          // upstream bridges, root port first
}

// ACS is the Access Control Services state of one bridge.
type ACS struct {
	BDF      string `json:"bdf"`
	Readable bool   `json:"readable"`
	Present  bool   `json:"present"`
	Control  uint16 `json:"control"`
	Text     string `json:"acsctl,omitempty"`
}

// ACS control bits, named as lspci names them.
var acsBits = []struct {
	bit  uint16
	name string
}{{0x01, "SrcValid"}, {0x02, "TransBlk"}, {0x04, "ReqRedir"}, {0x08, "CmpltRedir"}, {0x10, "UpstreamFwd"}, {0x20, "EgressCtrl"}, {0x40, "DirectTrans"}}

// acsRedirect are the bits that send peer-to-peer traffic up to the root
// complex instead of across the switch.
const acsRedirect = 0x04 | 0x08 | 0x20

// Redirects reports whether the bridge redirects peer-to-peer requests.
func (a ACS) Redirects() bool { return a.Present && a.Control&acsRedirect != 0 }

func acsText(ctrl uint16) string {
	parts := make([]string, len(acsBits))
	for i, b := range acsBits {
		s := "-"
		if ctrl&b.bit != 0 {
			s = "+"
		}
		parts[i] = b.name + s
	}
	return strings.Join(parts, " ")
}

// ParseACS finds the ACS extended capability (ID 0x000D) in a PCI config
// space dump and returns its control register. Unprivileged reads of
// sysfs config stop at 64 or 256 bytes, so short input means "unreadable".
func ParseACS(cfg []byte) (ctrl uint16, present, readable bool) {
	if len(cfg) <= 0x100 {
		return 0, false, false
	}
	off := 0x100
	for i := 0; i < 96 && off >= 0x100 && off+8 <= len(cfg); i++ {
		hdr := binary.LittleEndian.Uint32(cfg[off:])
		if hdr == 0 || hdr == 0xffffffff {
			break
		}
		if hdr&0xffff == 0x000d {
			return binary.LittleEndian.Uint16(cfg[off+6:]), true, true
		}
		next := int(hdr>>20) & 0xffc
		if next == 0 || next == off {
			break
		}
		off = next
	}
	return 0, false, true
}

// pcieState is what host.pcie reads.
type pcieState struct {
	Cmdline     string
	IOMMUParams []string
	Groups      int
	Units       []string
	GPUs        []GPU
	ACS         []ACS
	VM          string // why we think this is a VM, or ""
}

var iommuParamRe = regexp.MustCompile(`^(intel_iommu|amd_iommu|iommu|iommu\.passthrough|iommu\.strict|pcie_acs_override|pci)=`)

func readPCIe(h *host.Host) pcieState {
	var s pcieState
	s.Cmdline = readTrim(h, "/proc/cmdline")
	for _, f := range strings.Fields(s.Cmdline) {
		if iommuParamRe.MatchString(f) {
			s.IOMMUParams = append(s.IOMMUParams, f)
		}
	}
	if ents, err := h.ReadDir("/sys/kernel/iommu_groups"); err == nil {
		s.Groups = len(ents)
	}
	if ents, err := h.ReadDir("/sys/class/iommu"); err == nil {
		for _, e := range ents {
			s.Units = append(s.Units, e.Name())
		}
	}
	s.VM = detectVM(h)
	devs, err := h.ReadDir("/sys/bus/pci/devices")
	if err != nil {
		return s
	}
	bridges := map[string]bool{}
	for _, d := range devs {
		base := "/sys/bus/pci/devices/" + d.Name()
		if readTrim(h, base+"/vendor") != "0x10de" {
			continue
		}
		class := readTrim(h, base+"/class")
		if !strings.HasPrefix(class, "0x0300") && !strings.HasPrefix(class, "0x0302") {
			continue
		}
		g := GPU{BDF: d.Name()}
		if l, err := h.Readlink(base + "/iommu_group"); err == nil {
			g.Group = path.Base(l)
			g.GroupType = readTrim(h, "/sys/kernel/iommu_groups/"+g.Group+"/type")
		}
		if l, err := h.Readlink(base); err == nil {
			parts := strings.Split(l, "/")
			for _, p := range parts[:max(len(parts)-1, 0)] {
				if bdfRe.MatchString(p) {
					g.Bridges = append(g.Bridges, p)
					bridges[p] = true
				}
			}
		}
		s.GPUs = append(s.GPUs, g)
	}
	sort.Slice(s.GPUs, func(i, j int) bool { return s.GPUs[i].BDF < s.GPUs[j].BDF })
	var bl []string
	for b := range bridges {
		bl = append(bl, b)
	}
	sort.Strings(bl)
	for _, b := range bl {
		a := ACS{BDF: b}
		if cfg, err := h.ReadFile("/sys/bus/pci/devices/" + b + "/config"); err == nil {
			a.Control, a.Present, a.Readable = ParseACS(cfg)
			if a.Present {
				a.Text = acsText(a.Control)
			}
		}
		s.ACS = append(s.ACS, a)
	}
	return s
}

// detectVM looks for the CPU's hypervisor flag and DMI vendor strings.
func detectVM(h *host.Host) string {
	if b, err := h.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "flags") {
				for _, f := range strings.Fields(line) {
					if f == "hypervisor" {
						return "the CPU reports the hypervisor flag"
					}
				}
				break
			}
		}
	}
	for _, p := range []string{"/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name"} {
		v := readTrim(h, p)
		for _, k := range []string{"QEMU", "KVM", "VMware", "Xen", "Amazon EC2", "Google Compute Engine", "Microsoft Corporation", "OpenStack"} {
			if strings.Contains(v, k) {
				return "DMI says " + v
			}
		}
	}
	return ""
}

// translating reports whether the IOMMU remaps the GPUs' DMA (as opposed
// to passthrough/identity), and how ncclwiz knows.
func (s pcieState) translating() (bool, string) {
	if s.Groups == 0 {
		return false, "no IOMMU groups: the IOMMU is off"
	}
	types := map[string]bool{}
	for _, g := range s.GPUs {
		if g.GroupType != "" {
			types[g.GroupType] = true
		}
	}
	if len(types) > 0 {
		if types["DMA"] || types["DMA-FQ"] {
			return true, "the GPUs' IOMMU groups use DMA translation"
		}
		return false, "the GPUs' IOMMU groups are in identity (passthrough) mode"
	}
	for _, p := range s.IOMMUParams {
		if p == "iommu=pt" || p == "iommu.passthrough=1" || p == "iommu.passthrough=on" {
			return false, "the kernel command line has " + p
		}
	}
	return true, fmt.Sprintf("%d IOMMU groups and no iommu=pt on the kernel command line", s.Groups)
}

func runPCIe(_ context.Context, h *host.Host) ([]checks.Finding, error) {
	s := readPCIe(h)
	trans, how := s.translating()
	ev := map[string]any{"iommu_groups": s.Groups, "iommu_units": list(s.Units), "kernel_iommu_params": list(s.IOMMUParams), "gpus": list(s.GPUs), "acs": list(s.ACS)}
	if s.VM != "" {
		ev["virtual_machine"] = s.VM
	}
	iommu := "IOMMU off"
	if s.Groups > 0 {
		iommu = fmt.Sprintf("IOMMU on (%d groups, %s)", s.Groups, map[bool]string{true: "translating", false: "passthrough"}[trans])
	}
	where := "bare metal"
	if s.VM != "" {
		where = "virtual machine"
	}
	summary := checks.Finding{Severity: checks.OK, Guide: "p2p-acs-iommu", Evidence: ev,
		Title: fmt.Sprintf("%s; %s on the PCI bus; %s", iommu, units.Count(len(s.GPUs), "NVIDIA GPU"), where)}
	if len(s.GPUs) == 0 {
		summary.Detail = "No NVIDIA GPU is visible on the PCI bus here, so GPU peer-to-peer settings do not apply."
		return []checks.Finding{summary}, nil
	}
	fs := []checks.Finding{summary}
	p2pOff, p2pSrc, _ := ncclSetting(h, "NCCL_P2P_DISABLE")
	workaround := strings.TrimSpace(p2pOff) == "1"
	multi := len(s.GPUs) > 1

	var redirect, unreadable []ACS
	for _, a := range s.ACS {
		switch {
		case !a.Readable:
			unreadable = append(unreadable, a)
		case a.Redirects():
			redirect = append(redirect, a)
		}
	}
	risk := false
	if s.VM != "" {
		fs = append(fs, checks.Finding{Severity: checks.Info, Guide: "p2p-acs-iommu", Evidence: map[string]any{"virtual_machine": s.VM},
			Title: "This is a virtual machine: ACS and the IOMMU are the hypervisor's business",
			Detail: "VMs need ACS to stay on, so do not try to disable it here. GPU peer-to-peer inside a VM works only if the hypervisor passes the GPUs through with ATS; " +
				"if P2P hangs, NCCL_P2P_DISABLE=1 is the way out (intra-node traffic then goes through host memory) (" + srcACS + ")."})
	}
	if s.VM == "" && multi && trans {
		risk = true
		f := checks.Finding{Severity: checks.Warn, Guide: "p2p-acs-iommu", Evidence: map[string]any{"reason": how, "kernel_iommu_params": list(s.IOMMUParams)},
			Title: "The IOMMU translates GPU DMA (" + how + "): PCIe peer-to-peer between GPUs can hang or crawl",
			Detail: "With VT-d/AMD-Vi translating, the kernel enables ACS on PCIe bridges and GPU-to-GPU PCIe traffic is redirected through the CPU root complex: " +
				"NCCL jobs then hang right after 'via P2P/IPC' or run far slower. GPUs joined by NVLink/NVSwitch are not affected. " + remedies(false)}
		if workaround {
			f.Severity = checks.Info
			f.Title += "; NCCL_P2P_DISABLE=1" + from(p2pSrc) + " already works around it"
		}
		fs = append(fs, f)
	}
	if s.VM == "" && multi && len(redirect) > 0 {
		risk = true
		var lines []string
		var cmds []string
		for _, a := range redirect {
			lines = append(lines, a.BDF+": "+a.Text)
			cmds = append(cmds, "sudo setpci -s "+a.BDF+" ECAP_ACS+0x6.w=0000")
		}
		f := checks.Finding{Severity: checks.Warn, Guide: "p2p-acs-iommu",
			Evidence: map[string]any{"bridges": lines, "commands": cmds},
			Title:    fmt.Sprintf("ACS redirects peer-to-peer traffic on %s above the GPUs", units.Count(len(redirect), "PCIe bridge")),
			Detail: "These bridges send GPU-to-GPU requests up to the root complex (ReqRedir/CmpltRedir/EgressCtrl set), the known cause of NCCL P2P hangs on bare metal. " +
				"Bridges: " + strings.Join(lines, "; ") + ". " + remedies(true)}
		if workaround {
			f.Severity = checks.Info
			f.Title += "; NCCL_P2P_DISABLE=1" + from(p2pSrc) + " already works around it"
		}
		fs = append(fs, f)
	}
	if s.VM == "" && multi && len(unreadable) > 0 {
		f := checks.Finding{Severity: checks.Info, Guide: "p2p-acs-iommu", Evidence: map[string]any{"bridges": acsNames(unreadable)},
			Title:  fmt.Sprintf("ACS state of %s above the GPUs needs root to read", units.Count(len(unreadable), "PCIe bridge")),
			Detail: "ACS lives in PCI extended configuration space, which only root can read. Run `sudo ncclwiz check --only host.pcie`, or `sudo lspci -vvv | grep ACSCtl` and look for ReqRedir+ / SrcValid+ (" + srcACS + ")."}
		fs = append(fs, f)
	}
	if workaround && !risk && len(unreadable) == 0 && s.VM == "" {
		fs = append(fs, checks.Finding{Severity: checks.Info, Guide: "p2p-acs-iommu",
			Title: "NCCL_P2P_DISABLE=1" + from(p2pSrc) + " is set, but nothing here calls for it",
			Detail: "The IOMMU is " + map[bool]string{true: "translating", false: "off or in passthrough"}[trans] + " and no bridge above the GPUs redirects peer-to-peer traffic. " +
				"The setting forces intra-node traffic through host memory and may have been copied from another machine. Try a run without it (ncclwiz validate checks P2P step by step)."})
	}
	return fs, nil
}

func acsNames(as []ACS) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.BDF
	}
	return out
}

// remedies lists the standard ways out, safest first, with what each costs.
func remedies(acs bool) string {
	r := []string{
		"NCCL_P2P_DISABLE=1 for the job: safe and immediate; GPUs on one machine then exchange data through host memory, which is slower",
		"iommu=pt on the kernel command line (reboot): keeps the IOMMU for VMs and VFIO but stops translating host devices' DMA, so a faulty device is less contained",
		"disabling VT-d/AMD-Vi in the BIOS (or intel_iommu=off): removes DMA protection entirely and breaks VFIO passthrough and SR-IOV",
	}
	if acs {
		r = append(r, "clearing ACS on each listed bridge with `sudo setpci -s <bdf> ECAP_ACS+0x6.w=0000`: immediate but lost at reboot, and devices behind the bridge are no longer isolated from each other (never do this on a host that passes devices to VMs)")
	}
	r = append(r, "updating the NVIDIA driver: some P2P hangs were fixed in newer drivers")
	var b strings.Builder
	b.WriteString("Remedies, safest first: ")
	for i, x := range r {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strconv.Itoa(i+1) + ") " + x)
	}
	b.WriteString(" (" + srcACS + ").")
	return b.String()
}
