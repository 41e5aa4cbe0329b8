package netcheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/sysinfo"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

const (
	ibRoot   = "/sys/class/infiniband"
	srcIBHCA = "NCCL docs, Environment Variables › NCCL_IB_HCA; nccl src/transport/net_ib/init.cc"
	// maxGIDs bounds the GID table read per port (tables hold 128-256 entries).
	maxGIDs = 256
)

// IBPort is one port of an RDMA device, from sysfs.
type IBPort struct {
	Device    string `json:"device"`
	Port      int    `json:"port"`
	State     string `json:"state"`      // ACTIVE, DOWN, INIT, ARMED …
	PhysState string `json:"phys_state"` // LinkUp, Polling, Disabled …
	Rate      string `json:"rate"`
	LinkLayer string `json:"link_layer"` // InfiniBand, or Ethernet (RoCE)
	// GIDs counts non-zero GID table entries; RoCEv2 lists the RoCE v2
	// GIDs as addresses (IPv4-mapped for IPv4).
	GIDs   int      `json:"gids"`
	RoCEv2 []string `json:"rocev2_gids,omitempty"`
	// RoutableV2 counts RoCE v2 GIDs that are not link-local (from an
	// IPv4 or global IPv6 address of the port's interface).
	RoutableV2 int      `json:"rocev2_routable"`
	NetDevs    []string `json:"netdevs,omitempty"`
	gidAt      map[int]gidEntry
}

type gidEntry struct {
	addr netip.Addr
	typ  string
}

// Active reports whether NCCL would use the port (IBV_PORT_ACTIVE).
func (p IBPort) Active() bool { return p.State == "ACTIVE" }

// Name is dev:port as NCCL_IB_HCA writes it.
func (p IBPort) Name() string { return p.Device + ":" + strconv.Itoa(p.Port) }

// IBDevice is one RDMA device (HCA).
type IBDevice struct {
	Name    string   `json:"name"`
	HCAType string   `json:"hca_type,omitempty"`
	FWVer   string   `json:"fw_ver,omitempty"`
	Ports   []IBPort `json:"ports"`
}

// ReadRDMA lists /sys/class/infiniband. A machine without RDMA returns an
// error that wraps fs.ErrNotExist.
func ReadRDMA(h *host.Host) ([]IBDevice, error) {
	ents, err := h.ReadDir(ibRoot)
	if err != nil {
		return nil, err
	}
	var out []IBDevice
	for _, e := range ents {
		d := IBDevice{Name: e.Name()}
		base := ibRoot + "/" + d.Name
		d.HCAType = readTrim(h, base+"/hca_type")
		d.FWVer = readTrim(h, base+"/fw_ver")
		ports, err := h.ReadDir(base + "/ports")
		if err != nil {
			d.Ports = []IBPort{}
			out = append(out, d)
			continue
		}
		for _, pe := range ports {
			n, err := strconv.Atoi(pe.Name())
			if err != nil {
				continue
			}
			d.Ports = append(d.Ports, readPort(h, d.Name, n))
		}
		sort.Slice(d.Ports, func(i, j int) bool { return d.Ports[i].Port < d.Ports[j].Port })
		d.Ports = list(d.Ports)
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func readTrim(h *host.Host, p string) string {
	b, err := h.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// stateName turns "4: ACTIVE" into "ACTIVE".
func stateName(s string) string {
	if _, v, ok := strings.Cut(s, ":"); ok {
		return strings.TrimSpace(v)
	}
	return strings.TrimSpace(s)
}

func readPort(h *host.Host, dev string, n int) IBPort {
	base := fmt.Sprintf("%s/%s/ports/%d", ibRoot, dev, n)
	p := IBPort{Device: dev, Port: n,
		State:     stateName(readTrim(h, base+"/state")),
		PhysState: stateName(readTrim(h, base+"/phys_state")),
		Rate:      readTrim(h, base+"/rate"),
		LinkLayer: readTrim(h, base+"/link_layer"),
		gidAt:     map[int]gidEntry{},
	}
	ents, err := h.ReadDir(base + "/gids")
	if err != nil {
		return p
	}
	ndev := map[string]bool{}
	for _, e := range ents {
		i, err := strconv.Atoi(e.Name())
		if err != nil || i >= maxGIDs {
			continue
		}
		a, err := netip.ParseAddr(readTrim(h, fmt.Sprintf("%s/gids/%d", base, i)))
		if err != nil || a.IsUnspecified() {
			continue
		}
		g := gidEntry{addr: a, typ: readTrim(h, fmt.Sprintf("%s/gid_attrs/types/%d", base, i))}
		p.gidAt[i] = g
		p.GIDs++
		if nd := readTrim(h, fmt.Sprintf("%s/gid_attrs/ndevs/%d", base, i)); nd != "" {
			ndev[nd] = true
		}
		if strings.EqualFold(g.typ, "RoCE v2") {
			p.RoCEv2 = append(p.RoCEv2, a.Unmap().String())
			if !a.IsLinkLocalUnicast() {
				p.RoutableV2++
			}
		}
	}
	if nets, err := h.ReadDir(ibRoot + "/" + dev + "/device/net"); err == nil {
		for _, e := range nets {
			ndev[e.Name()] = true
		}
	}
	for n := range ndev {
		p.NetDevs = append(p.NetDevs, n)
	}
	sort.Strings(p.NetDevs)
	return p
}

func runRDMA(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	devs, err := ReadRDMA(h)
	ibDisable, disSrc, _ := ncclSetting(h, "NCCL_IB_DISABLE")
	hca, hcaSrc, hcaSet := ncclSetting(h, "NCCL_IB_HCA")
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(devs) == 0) {
		f := checks.Finding{Severity: checks.OK, Title: "No RDMA devices (no /sys/class/infiniband): NCCL uses TCP sockets between machines", Guide: "ib-roce"}
		out := []checks.Finding{f}
		if hcaSet && strings.TrimSpace(ibDisable) != "1" {
			out = append(out, checks.Finding{Severity: checks.Warn, Guide: "ib-roce",
				Title:    fmt.Sprintf("NCCL_IB_HCA=%s%s is set, but this machine has no RDMA devices", hca, from(hcaSrc)),
				Detail:   "The value was probably copied from a machine with InfiniBand or RoCE. NCCL finds no IB device here and uses sockets; drop the setting to avoid confusion.",
				Evidence: map[string]any{"value": hca}})
		}
		if n, src, ok := ncclSetting(h, "NCCL_NET"); ok && strings.EqualFold(strings.TrimSpace(n), "IB") {
			out = append(out, checks.Finding{Severity: checks.Error, Guide: "ib-roce",
				Title:  fmt.Sprintf("NCCL_NET=%s%s forces InfiniBand, which this machine does not have", n, from(src)),
				Detail: "With the network module forced to IB and no RDMA device, NCCL cannot set up its network transport. Unset NCCL_NET (NCCL picks IB when present, sockets otherwise)."})
		}
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read RDMA devices: %w", err)
	}

	var ports, active []IBPort
	for _, d := range devs {
		ports = append(ports, d.Ports...)
		for _, p := range d.Ports {
			if p.Active() {
				active = append(active, p)
			}
		}
	}
	var fs []checks.Finding
	summary := checks.Finding{Severity: checks.OK, Guide: "ib-roce", Evidence: map[string]any{"devices": devs}}
	var desc []string
	for _, p := range ports {
		kind := p.LinkLayer
		if kind == "Ethernet" {
			kind = "RoCE"
		}
		desc = append(desc, strings.TrimSpace(fmt.Sprintf("%s %s %s %s", p.Name(), kind, p.State, rateShort(p.Rate))))
	}
	summary.Title = fmt.Sprintf("%s, %d ACTIVE: %s", units.Count(len(ports), "RDMA port"), len(active), strings.Join(desc, "; "))
	fs = append(fs, summary)

	disabled := strings.TrimSpace(ibDisable) == "1"
	fs = append(fs, portFindings(ports, active)...)

	switch {
	case len(ports) > 0 && len(active) == 0 && !disabled:
		f := checks.Finding{Severity: checks.Warn, Guide: "ib-roce",
			Title: "RDMA devices are present but no port is ACTIVE",
			Detail: "NCCL only uses ACTIVE ports; here it logs 'NET/IB : No device found.' and falls back to TCP sockets. In a multi-node job every node must make the same choice: " +
				"fix the links (see the port states above) or set NCCL_IB_DISABLE=1 on every node so all of them use sockets.",
			Evidence: map[string]any{"ports": portNames(ports)}, Fixes: []string{"env.export"}}
		f.Evidence["recommended_env"] = map[string]string{"NCCL_IB_DISABLE": "1"}
		f.Evidence["recommended_env_reason"] = map[string]string{"NCCL_IB_DISABLE": "every RDMA port on this machine is down; use sockets on every node until the links are fixed"}
		fs = append(fs, f)
	case len(ports) > 0 && len(active) == 0 && disabled:
		fs = append(fs, checks.Finding{Severity: checks.Info, Guide: "ib-roce",
			Title: "No RDMA port is ACTIVE and NCCL_IB_DISABLE=1" + from(disSrc) + ": NCCL uses sockets, consistently"})
	case len(active) > 0 && disabled:
		f := checks.Finding{Severity: checks.Warn, Guide: "ib-roce",
			Title: fmt.Sprintf("NCCL_IB_DISABLE=1%s although %s ACTIVE", from(disSrc), units.Count(len(active), "RDMA port is", "RDMA ports are")),
			Detail: "Traffic between machines goes over TCP sockets instead of InfiniBand/RoCE, typically several times slower. " +
				"If the setting was copied from another machine or a past workaround, enable RDMA again (NCCL_IB_DISABLE=0 or unset it) on every node.",
			Evidence: map[string]any{"active_ports": portNames(active)}, Fixes: []string{"env.export"}}
		f.Evidence["recommended_env"] = map[string]string{"NCCL_IB_DISABLE": "0"}
		f.Evidence["recommended_env_reason"] = map[string]string{"NCCL_IB_DISABLE": "RDMA ports " + strings.Join(portNames(active), ", ") + " are ACTIVE here"}
		fs = append(fs, f)
	}
	if hcaSet && !disabled {
		fs = append(fs, hcaFindings(hca, hcaSrc, devs, active)...)
	}
	if !disabled {
		// GIDs matter on the ports NCCL will use.
		used := active
		if hcaSet {
			l := ParseIfList(hca, maxIBDevs)
			used = nil
			for _, p := range active {
				if l.Selects(p.Device, p.Port) {
					used = append(used, p)
				}
			}
		}
		fs = append(fs, roceFindings(h, used)...)
	}
	fs = append(fs, memlockFinding(h, len(active) > 0)...)
	if len(active) > 0 && !disabled {
		fs = append(fs, gdrFinding(h)...)
	}
	return fs, nil
}

func from(src string) string {
	if src == "" || src == "environment" {
		return ""
	}
	return " (from " + src + ")"
}

func rateShort(r string) string {
	r = strings.TrimSpace(r)
	if i := strings.Index(r, " ("); i > 0 {
		return r[:i]
	}
	return r
}

func portNames(ps []IBPort) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name()
	}
	return out
}

// portFindings explains ports that are not ACTIVE where it tells the user
// something: INIT/ARMED (no subnet manager) always, DOWN ports only when a
// sibling is ACTIVE (an unused second port is normal).
func portFindings(ports, active []IBPort) []checks.Finding {
	var out []checks.Finding
	for _, p := range ports {
		if p.Active() {
			continue
		}
		ev := map[string]any{"port": p.Name(), "state": p.State, "phys_state": p.PhysState, "link_layer": p.LinkLayer}
		switch {
		case (p.State == "INIT" || p.State == "ARMED") && p.PhysState == "LinkUp":
			out = append(out, checks.Finding{Severity: checks.Warn, Guide: "ib-roce", Evidence: ev,
				Title:  fmt.Sprintf("%s: the link is up but the port is %s: no subnet manager has configured it", p.Name(), p.State),
				Detail: "InfiniBand ports become ACTIVE only after a subnet manager (SM) assigns them; NCCL ignores ports in INIT. Check with sudo sminfo and make sure an SM runs on the fabric (opensm service or the switch's SM) (NCCL networking troubleshooting › Subnet Manager)."})
		case len(active) > 0:
			out = append(out, checks.Finding{Severity: checks.Info, Guide: "ib-roce", Evidence: ev,
				Title: fmt.Sprintf("%s is %s (physical state %s); NCCL skips it", p.Name(), p.State, orDash(p.PhysState)),
				Detail: "Normal for an unused port. If it should be cabled, " + physAdvice(p.PhysState) +
					" If other nodes use this rail, traffic on it falls back to the remaining ports."})
		}
	}
	return out
}

func physAdvice(ps string) string {
	switch ps {
	case "Polling":
		return "it is looking for a peer: check the cable and the switch port."
	case "Disabled":
		return "it is administratively disabled (on the HCA or the switch)."
	case "LinkErrorRecovery":
		return "the link is flapping: check or replace the cable."
	}
	return "check the cable, the switch port and ibstat."
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// hcaFindings validates NCCL_IB_HCA against the devices and ports here.
func hcaFindings(val, src string, devs []IBDevice, active []IBPort) []checks.Finding {
	l := ParseIfList(val, maxIBDevs)
	name := "NCCL_IB_HCA=" + val + from(src)
	var sel []IBPort
	for _, p := range active {
		if l.Selects(p.Device, p.Port) {
			sel = append(sel, p)
		}
	}
	ev := map[string]any{"value": val, "selected": portNames(sel)}
	var out []checks.Finding
	// Entries that name nothing, ports that do not exist, prefixes that catch more.
	var notes []string
	for _, e := range l.Entries {
		var hits []string
		portOK := e.Port < 0
		for _, d := range devs {
			if l.entryMatches(ifEntry{Prefix: e.Prefix, Port: -1}, d.Name, -1) {
				hits = append(hits, d.Name)
				for _, p := range d.Ports {
					if p.Port == e.Port {
						portOK = true
					}
				}
			}
		}
		switch {
		case len(hits) == 0:
			notes = append(notes, fmt.Sprintf("%s matches no RDMA device here (devices: %s)", e.Prefix, strings.Join(devNames(devs), ", ")))
		case !portOK:
			notes = append(notes, fmt.Sprintf("%s:%d names a port that %s does not have", e.Prefix, e.Port, strings.Join(hits, ", ")))
		case !l.Exact && len(hits) > 1 && contains(hits, e.Prefix):
			out = append(out, checks.Finding{Severity: checks.Info, Guide: "ib-roce", Evidence: map[string]any{"entry": e.Prefix, "matches": hits},
				Title:  fmt.Sprintf("NCCL_IB_HCA entry %s is a prefix: it also selects %s", e.Prefix, strings.Join(without(hits, e.Prefix), ", ")),
				Detail: "Without a leading =, NCCL treats each entry as a prefix, so mlx5_1 also matches mlx5_10 to mlx5_19. Write =" + e.Prefix + " for that device alone (" + srcIBHCA + ")."})
		}
	}
	healthy := "=" + strings.Join(portNames(active), ",")
	recommend := func(f checks.Finding) checks.Finding {
		if len(active) == 0 {
			return f
		}
		f.Evidence["recommended_env"] = map[string]string{"NCCL_IB_HCA": healthy}
		f.Evidence["recommended_env_reason"] = map[string]string{"NCCL_IB_HCA": "exactly the ACTIVE ports of this machine"}
		f.Fixes = []string{"env.export"}
		return f
	}
	layers := map[string]bool{}
	for _, p := range sel {
		layers[p.LinkLayer] = true
	}
	switch {
	case len(sel) == 0 && len(active) > 0:
		f := checks.Finding{Severity: checks.Error, Guide: "ib-roce", Evidence: ev,
			Title:  name + " selects no ACTIVE RDMA port",
			Detail: "NCCL finds no usable IB device ('NET/IB : No device found.') and silently falls back to TCP sockets, while other nodes may use RDMA. ACTIVE ports here: " + strings.Join(portNames(active), ", ") + ". " + strings.Join(notes, "; ")}
		out = append(out, recommend(f))
	case len(layers) > 1:
		f := checks.Finding{Severity: checks.Warn, Guide: "ib-roce", Evidence: ev,
			Title:  name + " mixes InfiniBand and RoCE ports: " + strings.Join(portNames(sel), ", "),
			Detail: "NCCL refuses to combine link types in one communicator and asks to 'select only one link type using NCCL_IB_HCA' (nccl src/transport/net_ib). List only InfiniBand or only Ethernet (RoCE) ports."}
		out = append(out, f)
	case len(notes) > 0:
		f := checks.Finding{Severity: checks.Warn, Guide: "ib-roce", Evidence: ev,
			Title:  name + ": " + notes[0],
			Detail: "NCCL ignores entries that match nothing; it uses " + strings.Join(portNames(sel), ", ") + ". " + strings.Join(notes, "; ") + "."}
		out = append(out, recommend(f))
	case len(sel) > 0:
		out = append(out, checks.Finding{Severity: checks.OK, Guide: "ib-roce", Evidence: ev,
			Title: name + " selects " + strings.Join(portNames(sel), ", ") + " (ACTIVE)"})
	}
	return out
}

func devNames(ds []IBDevice) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return out
}

func without(xs []string, x string) []string {
	var out []string
	for _, y := range xs {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}

// roceFindings checks RoCE ports' GIDs and NCCL_IB_GID_INDEX.
func roceFindings(h *host.Host, active []IBPort) []checks.Finding {
	var out []checks.Finding
	gidIdx, gidSrc, gidSet := ncclSetting(h, "NCCL_IB_GID_INDEX")
	idx, idxErr := strconv.Atoi(strings.TrimSpace(gidIdx))
	for _, p := range active {
		switch p.LinkLayer {
		case "Ethernet":
			if p.RoutableV2 == 0 {
				what := "no RoCE v2 GID"
				if len(p.RoCEv2) > 0 {
					what = "only link-local RoCE v2 GIDs"
				}
				out = append(out, checks.Finding{Severity: checks.Warn, Guide: "ib-roce",
					Evidence: map[string]any{"port": p.Name(), "netdevs": list(p.NetDevs), "gids": p.GIDs, "rocev2_gids": list(p.RoCEv2)},
					Title:    fmt.Sprintf("RoCE port %s has %s: its interface %s has no IP address", p.Name(), what, orDash(strings.Join(p.NetDevs, ", "))),
					Detail: "RoCE v2 GIDs come from the IP addresses of the port's network interface. Without an IPv4 or global IPv6 address there is no routable GID, and connections to other nodes fail " +
						"('Call to ibv_modify_qp failed with error Invalid argument', NCCL networking troubleshooting). Give the interface an address on the RoCE network."})
			}
			if gidSet && idxErr == nil && idx >= 0 {
				g, ok := p.gidAt[idx]
				switch {
				case !ok:
					out = append(out, checks.Finding{Severity: checks.Error, Guide: "ib-roce",
						Evidence: map[string]any{"port": p.Name(), "gid_index": idx},
						Title:    fmt.Sprintf("NCCL_IB_GID_INDEX=%d%s points at an empty GID on %s", idx, from(gidSrc), p.Name()),
						Detail:   "Queue pairs cannot be connected with an empty GID ('Call to ibv_modify_qp failed'). Since NCCL 2.21 the GID is chosen automatically: unset NCCL_IB_GID_INDEX."})
				case !strings.EqualFold(g.typ, "RoCE v2"):
					out = append(out, checks.Finding{Severity: checks.Warn, Guide: "ib-roce",
						Evidence: map[string]any{"port": p.Name(), "gid_index": idx, "gid": g.addr.String(), "type": g.typ},
						Title:    fmt.Sprintf("NCCL_IB_GID_INDEX=%d%s selects a %s GID on %s", idx, from(gidSrc), orDash(g.typ), p.Name()),
						Detail:   "NCCL uses RoCE v2 by default (NCCL_IB_ROCE_VERSION_NUM=2); a v1 GID only works if every peer uses v1. Since NCCL 2.21 the GID is chosen automatically: unset NCCL_IB_GID_INDEX."})
				}
			}
		case "InfiniBand":
			if p.GIDs == 0 {
				out = append(out, checks.Finding{Severity: checks.Warn, Guide: "ib-roce", Evidence: map[string]any{"port": p.Name()},
					Title:  fmt.Sprintf("InfiniBand port %s is ACTIVE but its GID table is empty", p.Name()),
					Detail: "An ACTIVE InfiniBand port normally has a link-local GID (fe80::<port GUID>) at index 0. Check ibstat; the driver or the subnet manager may be in a bad state."})
			}
		}
	}
	return out
}

// memlockFinding: RDMA registers (pins) memory, which RLIMIT_MEMLOCK caps.
func memlockFinding(h *host.Host, activeRDMA bool) []checks.Finding {
	lim, err := sysinfo.ReadLimits(h)
	if err != nil {
		return nil
	}
	l, ok := lim["Max locked memory"]
	if !ok {
		return nil
	}
	const unlimited = ^uint64(0)
	if l.Soft == unlimited {
		return []checks.Finding{{Severity: checks.OK, Guide: "memlock", Title: "Locked-memory limit (ulimit -l) is unlimited, as RDMA needs"}}
	}
	ev := map[string]any{"memlock_soft_bytes": l.Soft, "memlock_hard": limitText(l.Hard)}
	f := checks.Finding{Severity: checks.Info, Guide: "memlock", Evidence: ev,
		Title: fmt.Sprintf("Locked-memory limit (ulimit -l) is %s", human(l.Soft))}
	if !activeRDMA {
		f.Detail = "Only matters once RDMA ports are ACTIVE: NCCL then pins its buffers with ibv_reg_mr."
		return []checks.Finding{f}
	}
	f.Severity = checks.Warn
	f.Title += "; RDMA needs it unlimited"
	f.Detail = "NCCL registers (pins) its network buffers with InfiniBand/RoCE; with a finite limit this fails with 'Call to ibv_reg_mr failed' or 'Call to ibv_create_qp failed'. " +
		"The NCCL docs ask for '* soft memlock unlimited' and '* hard memlock unlimited' in /etc/security/limits.conf (then log in again or restart the job's daemons); containers need docker run --ulimit memlock=-1."
	if l.Hard == unlimited {
		f.Detail += " The hard limit is already unlimited here, so `ulimit -l unlimited` in the job script is enough, without root."
	}
	f.Fixes = []string{"limits.memlock"}
	return []checks.Finding{f}
}

func limitText(v uint64) string {
	if v == ^uint64(0) {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}

func human(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", b)
}

// gdrFinding checks the GPUDirect RDMA path: nvidia-peermem (or the old
// nv_peer_mem), or DMA-BUF with the open kernel modules on Linux >= 5.12.
func gdrFinding(h *host.Host) []checks.Finding {
	b, err := h.ReadFile("/proc/modules")
	if err != nil {
		return nil
	}
	mods := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			mods[f[0]] = true
		}
	}
	if !mods["nvidia"] {
		return nil // no NVIDIA driver loaded: nothing to pair RDMA with
	}
	ev := map[string]any{"nvidia_peermem": mods["nvidia_peermem"], "nv_peer_mem": mods["nv_peer_mem"]}
	if mods["nvidia_peermem"] || mods["nv_peer_mem"] {
		return []checks.Finding{{Severity: checks.OK, Guide: "ib-roce", Evidence: ev, Title: "GPUDirect RDMA: nvidia-peermem is loaded"}}
	}
	ver := readTrim(h, "/proc/driver/nvidia/version")
	rel := readTrim(h, "/proc/sys/kernel/osrelease")
	open := strings.Contains(ver, "Open Kernel Module")
	ev["open_kernel_module"], ev["kernel"] = open, rel
	if open && kernelAtLeast(rel, 5, 12) {
		return []checks.Finding{{Severity: checks.OK, Guide: "ib-roce", Evidence: ev,
			Title: "GPUDirect RDMA: nvidia-peermem is not loaded, but DMA-BUF is available (open kernel modules, Linux " + rel + ")"}}
	}
	return []checks.Finding{{Severity: checks.Warn, Guide: "ib-roce", Evidence: ev,
		Title: "GPUDirect RDMA is unavailable: nvidia-peermem is not loaded",
		Detail: "Without it (or DMA-BUF, which needs the open NVIDIA kernel modules and Linux 5.12+), NCCL stages every network transfer through host memory, roughly halving multi-node bandwidth. " +
			"Load it with `sudo modprobe nvidia-peermem` (it ships with the driver) and make it load at boot (NCCL docs, GPU troubleshooting › GPU-to-NIC communication)."}}
}

// kernelAtLeast compares the leading "major.minor" of a kernel release.
func kernelAtLeast(rel string, major, minor int) bool {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	mi := atoi(parts[1])
	return ma > major || (ma == major && mi >= minor)
}
