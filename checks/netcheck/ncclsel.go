package netcheck

import (
	"net/netip"
	"strings"
)

// Two generations of NCCL's socket interface selection matter:
//   - before 2.28: every interface with an address is a candidate, up or
//     down; automatic selection skips names starting with docker or lo;
//   - 2.28 and later: only IFF_RUNNING interfaces are candidates, and
//     automatic selection also skips virbr (src/misc/socket.cc
//     ncclFindInterfaces, src/os/linux.cc ncclOsFindInterfaces, checked at
//     tags v2.27.7-1 and v2.28.3-1).
type ncclGen struct {
	Name       string // shown to the user
	NeedsRun   bool
	AutoExcept string
}

var (
	genOld = ncclGen{Name: "NCCL < 2.28", AutoExcept: "^docker,lo"}
	genNew = ncclGen{Name: "NCCL >= 2.28", NeedsRun: true, AutoExcept: "^docker,lo,virbr"}
)

// ncclSelect returns the interfaces NCCL would use for list l, in NCCL's
// order: getifaddrs lists IPv4 addresses (by interface index) before IPv6
// ones, and NCCL keeps the first address of each name, up to max.
func ncclSelect(ifs []Iface, l IfList, family int, g ncclGen, max int) []*Iface {
	var out []*Iface
	seen := map[string]bool{}
	for _, pass := range []int{4, 6} {
		if family != 0 && family != pass {
			continue
		}
		for i := range ifs {
			f := &ifs[i]
			if seen[f.Name] || len(out) >= max {
				continue
			}
			if g.NeedsRun && !f.Running {
				continue
			}
			has := false
			for _, a := range f.ncclAddrs(pass) {
				if a.Is4() == (pass == 4) {
					has = true
					break
				}
			}
			if !has || !l.Selects(f.Name, -1) {
				continue
			}
			seen[f.Name] = true
			out = append(out, f)
		}
	}
	return out
}

// ncclAuto is NCCL's automatic selection when NCCL_SOCKET_IFNAME is unset:
// ib* first, then the subnet of NCCL_COMM_ID, then everything but the
// excluded names, then docker*, then lo (then virbr* on 2.28+). It returns
// the selection and the rule that produced it.
func ncclAuto(ifs []Iface, family int, g ncclGen, commID string) ([]*Iface, string) {
	if sel := ncclSelect(ifs, ParseIfList("ib", maxSocketIfs), family, g, maxSocketIfs); len(sel) > 0 {
		return sel, "ib* interfaces come first"
	}
	if ip, ok := commIDAddr(commID); ok {
		if f := subnetMatch(ifs, ip, g); f != nil {
			return []*Iface{f}, "same subnet as NCCL_COMM_ID"
		}
	}
	steps := []struct{ list, why string }{
		{g.AutoExcept, "any name not starting with " + strings.ReplaceAll(strings.TrimPrefix(g.AutoExcept, "^"), ",", ", ")},
		{"docker", "docker* as a last resort"},
		{"lo", "loopback as a last resort"},
	}
	if g.NeedsRun {
		steps = append(steps, struct{ list, why string }{"virbr", "virbr* as a last resort"})
	}
	for _, s := range steps {
		if sel := ncclSelect(ifs, ParseIfList(s.list, maxSocketIfs), family, g, maxSocketIfs); len(sel) > 0 {
			return sel, s.why
		}
	}
	return nil, "nothing found"
}

// commIDAddr parses NCCL_COMM_ID (ip:port or [ipv6]:port).
func commIDAddr(v string) (netip.Addr, bool) {
	v = strings.TrimSpace(v)
	if len(v) <= 1 {
		return netip.Addr{}, false
	}
	if ap, err := netip.ParseAddrPort(v); err == nil {
		return ap.Addr().Unmap(), true
	}
	if i := strings.LastIndex(v, ":"); i > 0 {
		if a, err := netip.ParseAddr(strings.Trim(v[:i], "[]")); err == nil {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

func subnetMatch(ifs []Iface, ip netip.Addr, g ncclGen) *Iface {
	for i := range ifs {
		f := &ifs[i]
		if g.NeedsRun && !f.Running {
			continue
		}
		for _, p := range f.Prefixes {
			if p.Addr().Is4() == ip.Is4() && p.Masked().Contains(ip) {
				return f
			}
		}
	}
	return nil
}

func namesOf(fs []*Iface) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

func sameNames(a, b []*Iface) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}
