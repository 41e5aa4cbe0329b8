package netcheck

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/envcheck"
	"github.com/ncclwiz/ncclwiz/host"
)

// Bounds of the network probes: a check never waits longer than this for
// one answer, so a blackholed peer or a dead DNS server cannot hang a run.
const (
	ResolveTimeout = 2 * time.Second
	DialTimeout    = 2 * time.Second
)

// Interface classes, from most to least suitable for NCCL traffic between
// nodes. NCCL itself only filters by name (docker*, lo, and virbr* since
// 2.28), so ncclwiz classifies with the kernel's link kind and type too.
const (
	ClassPhysical = "physical"
	ClassIPoIB    = "ipoib"
	ClassBond     = "bond"
	ClassVLAN     = "vlan"
	ClassBridge   = "bridge"
	ClassVeth     = "veth"
	ClassDummy    = "dummy"
	ClassVirtual  = "virtual"
	ClassDocker   = "docker" // container-runtime bridges: docker0, br-<id>, podman0, lxcbr0 …
	ClassVirbr    = "virbr"  // libvirt NAT bridges
	ClassCNI      = "cni"    // Kubernetes overlays: cni0, flannel.1, cali*, tunl0, cilium_*, lxc* …
	ClassVPN      = "vpn"    // tun/tap, WireGuard, Tailscale, ZeroTier, IP tunnels
	ClassLoopback = "loopback"
)

// Iface is an interface with what ncclwiz concluded about it.
type Iface struct {
	host.NetInterface
	Class string
	// Running is IFF_RUNNING: administratively up and operationally up
	// (or unknown, as for dummy devices and lo).
	Running   bool
	Prefixes  []netip.Prefix
	SpeedMbps int
	// DefaultRoute is set when a default route leaves through it.
	DefaultRoute bool
}

// State renders the link state the way `ip -br link` does.
func (i Iface) State() string {
	if !i.HasFlag("UP") {
		return "DOWN"
	}
	s := "UP"
	if i.HasFlag("LOWER_UP") {
		s += ",LOWER_UP"
	} else {
		s += ",NO-CARRIER"
	}
	if i.HasFlag("DORMANT") {
		s += ",DORMANT"
	}
	return s
}

// ncclAddrs are the addresses NCCL considers: IPv4 and IPv6 except ::1.
func (i Iface) ncclAddrs(family int) []netip.Addr {
	var out []netip.Addr
	for _, p := range i.Prefixes {
		a := p.Addr()
		if (family == 4 && !a.Is4()) || (family == 6 && a.Is4()) || a == netip.IPv6Loopback() {
			continue
		}
		out = append(out, a)
	}
	return out
}

// routable returns the first address that is not link-local.
func (i Iface) routable(family int) (netip.Addr, bool) {
	for _, a := range i.ncclAddrs(family) {
		if !a.IsLinkLocalUnicast() && !a.IsLoopback() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// rank orders classes: 0 real NICs, 1 neutral virtual devices, 2 container,
// VM, overlay and VPN devices, 3 loopback.
func rank(class string) int {
	switch class {
	case ClassPhysical, ClassIPoIB, ClassBond, ClassVLAN:
		return 0
	case ClassBridge, ClassVeth, ClassDummy, ClassVirtual:
		return 1
	case ClassLoopback:
		return 3
	}
	return 2
}

var (
	dockerPrefixes = []string{"docker", "podman", "cni-podman", "lxcbr", "lxdbr", "incusbr", "nerdctl"}
	cniPrefixes    = []string{"cni", "flannel", "cali", "tunl", "vxlan.calico", "vxlan-v6.calico", "cilium", "lxc", "weave", "kube-", "nodelocaldns", "antrea", "ovn-k8s", "genev_sys", "vxlan_sys", "cbr0", "kilo"}
	vpnPrefixes    = []string{"tun", "tap", "wg", "tailscale", "zt", "ppp", "nordlynx", "ipsec", "vti", "gre", "sit", "ip6tnl", "ip6gre", "utun"}
	vpnKinds       = map[string]bool{"tun": true, "wireguard": true, "ipip": true, "gre": true, "gretap": true, "ip6gre": true, "ip6gretap": true, "ip6tnl": true, "sit": true, "vti": true, "vti6": true, "xfrm": true}
	// ARPHRD types of tunnels: NONE (tun, WireGuard), TUNNEL, TUNNEL6, SIT, IPGRE, IP6GRE, PPP.
	vpnTypes = map[int]bool{65534: true, 768: true, 769: true, 776: true, 778: true, 823: true, 512: true}
)

func hasAnyPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// dockerNetwork matches the bridges of user-defined docker networks, br-<12 hex>.
func dockerNetwork(name string) bool {
	if len(name) != 15 || !strings.HasPrefix(name, "br-") {
		return false
	}
	for _, c := range name[3:] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// Classify names the class of an interface. virtual reports what sysfs says
// (the device lives under /sys/devices/virtual), nil when unknown.
func Classify(ni host.NetInterface, virtual *bool) string {
	name := ni.Name
	switch {
	case ni.HasFlag("LOOPBACK") || ni.Type == 772 || name == "lo":
		return ClassLoopback
	case ni.Type == 32 || ni.Kind == "ipoib":
		return ClassIPoIB
	case hasAnyPrefix(name, dockerPrefixes) || dockerNetwork(name):
		return ClassDocker
	case strings.HasPrefix(name, "virbr"):
		return ClassVirbr
	case hasAnyPrefix(name, cniPrefixes):
		return ClassCNI
	case vpnKinds[ni.Kind] || vpnTypes[ni.Type] || hasAnyPrefix(name, vpnPrefixes):
		return ClassVPN
	case ni.Kind == "veth" || strings.HasPrefix(name, "veth"):
		return ClassVeth
	case ni.Kind == "bridge":
		return ClassBridge
	case ni.Kind == "bond" || ni.Kind == "team":
		return ClassBond
	case ni.Kind == "vlan" || ni.Kind == "macvlan" || ni.Kind == "ipvlan" || ni.Kind == "macvtap":
		return ClassVLAN
	case ni.Kind == "dummy":
		return ClassDummy
	case ni.Kind != "":
		return ClassVirtual
	case virtual != nil && *virtual && ni.Parent == "":
		return ClassVirtual
	}
	return ClassPhysical
}

// describe says in a few words what a class is, for titles.
func describe(i *Iface) string {
	switch i.Class {
	case ClassDocker:
		return "a container bridge"
	case ClassVirbr:
		return "a libvirt VM bridge"
	case ClassCNI:
		return "a Kubernetes overlay device"
	case ClassVPN:
		return "a VPN/tunnel device"
	case ClassVeth:
		if i.Master != "" {
			return "a container's veth on bridge " + i.Master
		}
		return "a veth pair end"
	case ClassLoopback:
		return "loopback"
	case ClassIPoIB:
		return "IP over InfiniBand"
	}
	return i.Class
}

// netState is what every network check starts from.
type netState struct {
	Ifaces   []Iface
	Routes   []Route
	Defaults []Route
	// Family is NCCL_SOCKET_FAMILY: 0 any, 4 or 6.
	Family int
	Scope  jobScope
	Target *target
}

func (s *netState) byName(name string) *Iface {
	for i := range s.Ifaces {
		if s.Ifaces[i].Name == name {
			return &s.Ifaces[i]
		}
	}
	return nil
}

// owner returns the interface holding address a.
func (s *netState) owner(a netip.Addr) *Iface {
	a = a.Unmap()
	for i := range s.Ifaces {
		for _, p := range s.Ifaces[i].Prefixes {
			if p.Addr() == a {
				return &s.Ifaces[i]
			}
		}
	}
	return nil
}

// isLocal reports whether a is this host (loopback or one of its addresses).
func (s *netState) isLocal(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsUnspecified() || s.owner(a) != nil
}

// target is the rendezvous endpoint: --peer, else MASTER_ADDR:MASTER_PORT.
type target struct {
	Host, Source string // Source: "--peer" or "MASTER_ADDR"
	Port         int    // 0 when MASTER_PORT is unset or invalid
	PortRaw      string
	Addrs        []netip.Addr
	ResolveErr   error
	ResolveTime  time.Duration
	Local        bool
	// Route is the interface the kernel uses to reach Addrs[0], and how
	// ncclwiz knows ("kernel" from a real source-address lookup, "table"
	// from /proc/net/route).
	RouteIf, RouteHow string
	Gateway           netip.Addr
	SourceAddr        netip.Addr
	NoRoute           bool
}

// jobScope says whether the job spans several machines.
type jobScope struct {
	Multi, Known bool
	Why          string
}

// nclSetting is the value NCCL sees for name: the environment first, then
// $NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf.
func ncclSetting(h *host.Host, name string) (value, source string, ok bool) {
	// The read is bounded and never blocks (saferead); the check's own
	// timeout covers a hung filesystem.
	ss, _ := envcheck.Collect(context.Background(), h)
	for _, s := range ss {
		if s.Name == name && !s.Shadowed {
			return s.Value, s.Source, true
		}
	}
	return "", "", false
}

func socketFamily(h *host.Host) int {
	v, _, _ := ncclSetting(h, "NCCL_SOCKET_FAMILY")
	switch v { // NCCL compares exactly (strcmp)
	case "AF_INET":
		return 4
	case "AF_INET6":
		return 6
	}
	return 0
}

// gather reads interfaces, routes, the job's scope and the rendezvous
// target (resolving it, bounded by ResolveTimeout).
func gather(ctx context.Context, h *host.Host) (*netState, error) {
	nis, err := h.Interfaces()
	if err != nil {
		return nil, err
	}
	st := &netState{Routes: Routes(h), Family: socketFamily(h)}
	st.Defaults = DefaultRoutes(st.Routes)
	defaults := map[string]bool{}
	for _, r := range st.Defaults {
		defaults[r.Iface] = true
	}
	for _, ni := range nis {
		var virtual *bool
		if l, err := h.Readlink("/sys/class/net/" + ni.Name); err == nil {
			v := strings.Contains(l, "/devices/virtual/")
			virtual = &v
		}
		f := Iface{NetInterface: ni, Class: Classify(ni, virtual), DefaultRoute: defaults[ni.Name]}
		op := strings.ToLower(ni.OperState)
		f.Running = ni.HasFlag("RUNNING") || (ni.HasFlag("UP") && ni.HasFlag("LOWER_UP") && (op == "up" || op == "unknown"))
		for _, a := range ni.Addrs {
			if p, err := netip.ParsePrefix(a); err == nil {
				f.Prefixes = append(f.Prefixes, p)
			} else if ad, err := netip.ParseAddr(a); err == nil {
				f.Prefixes = append(f.Prefixes, netip.PrefixFrom(ad, ad.BitLen()))
			}
		}
		if b, err := h.ReadFile("/sys/class/net/" + ni.Name + "/speed"); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
				f.SpeedMbps = n
			}
		}
		st.Ifaces = append(st.Ifaces, f)
	}
	st.Target = findTarget(ctx, h, st)
	st.Scope = scopeOf(h, st)
	return st, nil
}

// findTarget reads --peer or MASTER_ADDR/MASTER_PORT, resolves the host and
// finds the interface the kernel routes it through.
func findTarget(ctx context.Context, h *host.Host, st *netState) *target {
	t := &target{}
	switch {
	case h.Peer != "":
		hs, port, err := host.SplitPeer(h.Peer)
		if err != nil {
			t.Host, t.Source, t.ResolveErr = h.Peer, "--peer", err
			return t
		}
		t.Host, t.Port, t.PortRaw, t.Source = hs, port, strconv.Itoa(port), "--peer"
	default:
		addr, okA := h.LookupEnv("MASTER_ADDR")
		port, okP := h.LookupEnv("MASTER_PORT")
		if !okA && !okP {
			return nil
		}
		t.Host, t.PortRaw, t.Source = strings.TrimSpace(addr), strings.TrimSpace(port), "MASTER_ADDR"
		if p, err := strconv.Atoi(t.PortRaw); err == nil && p > 0 && p < 65536 {
			t.Port = p
		}
		if t.Host == "" {
			return t // MASTER_PORT alone: a single-node launch on this host
		}
	}
	rctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	start := time.Now()
	addrs, err := h.Resolve(rctx, t.Host)
	t.ResolveTime = time.Since(start)
	if err != nil {
		t.ResolveErr = err
		return t
	}
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil {
			t.Addrs = append(t.Addrs, ip.Unmap())
		}
	}
	if len(t.Addrs) == 0 {
		t.ResolveErr = fmt.Errorf("%s resolved to no usable address", t.Host)
		return t
	}
	// Prefer the family NCCL is told to use; otherwise keep resolver order.
	if st.Family != 0 {
		sort.SliceStable(t.Addrs, func(i, j int) bool {
			return t.Addrs[i].Is4() == (st.Family == 4) && t.Addrs[j].Is4() != (st.Family == 4)
		})
	}
	ip := t.Addrs[0]
	if st.isLocal(ip) {
		t.Local = true
		if o := st.owner(ip); o != nil {
			t.RouteIf = o.Name
		} else {
			t.RouteIf = "lo"
		}
		t.RouteHow = "local address"
		return t
	}
	if r, ok := Lookup(st.Routes, ip); ok {
		t.RouteIf, t.Gateway, t.RouteHow = r.Iface, r.Gateway, "routing table"
	} else {
		t.NoRoute = true
	}
	// The kernel's own choice covers policy routing, which the main table
	// alone does not show.
	if src, err := h.SourceFor(ip.String()); err == nil {
		if sa, err := netip.ParseAddr(src); err == nil {
			t.SourceAddr = sa.Unmap()
			if o := st.owner(t.SourceAddr); o != nil {
				t.RouteIf, t.RouteHow, t.NoRoute = o.Name, "kernel", false
			}
		}
	}
	return t
}

// scopeOf decides whether the job spans several machines, from the
// launcher's variables and the rendezvous address.
func scopeOf(h *host.Host, st *netState) jobScope {
	num := func(k string) (int, bool) {
		v, ok := h.LookupEnv(k)
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		return n, err == nil
	}
	if w, ok := num("WORLD_SIZE"); ok {
		if l, ok := num("LOCAL_WORLD_SIZE"); ok && l > 0 {
			if w > l {
				return jobScope{true, true, fmt.Sprintf("WORLD_SIZE=%d > LOCAL_WORLD_SIZE=%d", w, l)}
			}
			return jobScope{false, true, fmt.Sprintf("WORLD_SIZE=%d = LOCAL_WORLD_SIZE", w)}
		}
	}
	for _, k := range []string{"SLURM_JOB_NUM_NODES", "SLURM_NNODES"} {
		if n, ok := num(k); ok {
			return jobScope{n > 1, true, fmt.Sprintf("%s=%d", k, n)}
		}
	}
	if w, ok := num("OMPI_COMM_WORLD_SIZE"); ok {
		if l, ok := num("OMPI_COMM_WORLD_LOCAL_SIZE"); ok && l > 0 {
			return jobScope{w > l, true, fmt.Sprintf("OMPI_COMM_WORLD_SIZE=%d, OMPI_COMM_WORLD_LOCAL_SIZE=%d", w, l)}
		}
	}
	if v, ok := h.LookupEnv("PET_NNODES"); ok { // torchrun --nnodes as an env var
		max := v[strings.LastIndex(v, ":")+1:]
		if n, err := strconv.Atoi(strings.TrimSpace(max)); err == nil {
			return jobScope{n > 1, true, "PET_NNODES=" + v}
		}
	}
	if t := st.Target; t != nil && len(t.Addrs) > 0 {
		if !t.Local {
			return jobScope{true, true, fmt.Sprintf("%s %s is another machine", t.Source, t.Host)}
		}
		return jobScope{false, false, fmt.Sprintf("%s %s is this machine", t.Source, t.Host)}
	}
	return jobScope{}
}

// hostname is the kernel's host name (what PyTorch's Gloo resolves).
func hostname(h *host.Host) string {
	if b, err := h.ReadFile("/proc/sys/kernel/hostname"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}
