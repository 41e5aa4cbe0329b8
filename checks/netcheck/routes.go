package netcheck

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/host"
)

// Route is one entry of the main routing table (/proc/net/route for IPv4,
// /proc/net/ipv6_route for IPv6).
type Route struct {
	Iface   string
	Dst     netip.Prefix
	Gateway netip.Addr // invalid when the destination is on-link
	Metric  uint32
}

// Route flags (linux/route.h, linux/ipv6_route.h).
const (
	rtfUp      = 0x1
	rtfGateway = 0x2
	rtfReject  = 0x200
	rtf6Local  = 0x80000000
)

// ParseRoute4 parses /proc/net/route. Addresses are 32-bit words in host
// (little-endian on every platform NCCL runs on) byte order.
func ParseRoute4(b []byte) []Route {
	var out []Route
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 8 {
			continue
		}
		dst, ok1 := hexIP4(f[1])
		gw, ok2 := hexIP4(f[2])
		mask, ok3 := hexIP4(f[7])
		flags, err := strconv.ParseUint(f[3], 16, 32)
		metric, err2 := strconv.ParseUint(f[6], 10, 32)
		if !ok1 || !ok2 || !ok3 || err != nil || err2 != nil || flags&rtfUp == 0 || flags&rtfReject != 0 {
			continue
		}
		bits := maskBits(mask.As4())
		if bits < 0 {
			continue
		}
		r := Route{Iface: f[0], Dst: netip.PrefixFrom(dst, bits).Masked(), Metric: uint32(metric)}
		if flags&rtfGateway != 0 {
			r.Gateway = gw
		}
		out = append(out, r)
	}
	return out
}

func hexIP4(s string) (netip.Addr, bool) {
	if len(s) != 8 {
		return netip.Addr{}, false
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return netip.Addr{}, false
	}
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], binary.LittleEndian.Uint32(b))
	return netip.AddrFrom4(a), true
}

func maskBits(m [4]byte) int {
	v := binary.BigEndian.Uint32(m[:])
	n := 0
	for v&0x80000000 != 0 {
		n++
		v <<= 1
	}
	if v != 0 {
		return -1 // not a contiguous mask
	}
	return n
}

// ParseRoute6 parses /proc/net/ipv6_route: dst, dst_len, src, src_len,
// next hop, metric, refcnt, use, flags (hex), device. Local and reject
// routes are dropped: they are not ways out of this host.
func ParseRoute6(b []byte) []Route {
	var out []Route
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		dst, ok1 := hexIP6(f[0])
		gw, ok2 := hexIP6(f[4])
		plen, err := strconv.ParseUint(f[1], 16, 8)
		metric, err2 := strconv.ParseUint(f[5], 16, 32)
		flags, err3 := strconv.ParseUint(f[8], 16, 32)
		if !ok1 || !ok2 || err != nil || err2 != nil || err3 != nil || plen > 128 {
			continue
		}
		if flags&rtfUp == 0 || flags&rtfReject != 0 || flags&rtf6Local != 0 || f[9] == "lo" {
			continue
		}
		r := Route{Iface: f[9], Dst: netip.PrefixFrom(dst, int(plen)).Masked(), Metric: uint32(metric)}
		if flags&rtfGateway != 0 && !gw.IsUnspecified() {
			r.Gateway = gw
		}
		out = append(out, r)
	}
	return out
}

func hexIP6(s string) (netip.Addr, bool) {
	if len(s) != 32 {
		return netip.Addr{}, false
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return netip.AddrFrom16([16]byte(b)), true
}

// Routes reads both routing tables of the host (missing files are empty).
func Routes(h *host.Host) []Route {
	var out []Route
	if b, err := h.ReadFile("/proc/net/route"); err == nil {
		out = append(out, ParseRoute4(b)...)
	}
	if b, err := h.ReadFile("/proc/net/ipv6_route"); err == nil {
		out = append(out, ParseRoute6(b)...)
	}
	return out
}

// Lookup returns the route the main table uses for ip: the longest prefix,
// then the lowest metric. Policy routing is not modelled; the real host's
// kernel answer (host.SourceFor) takes precedence where available.
func Lookup(routes []Route, ip netip.Addr) (Route, bool) {
	ip = ip.Unmap()
	best, found := Route{}, false
	for _, r := range routes {
		if r.Dst.Addr().Is4() != ip.Is4() || !r.Dst.Contains(ip) {
			continue
		}
		if !found || r.Dst.Bits() > best.Dst.Bits() || (r.Dst.Bits() == best.Dst.Bits() && r.Metric < best.Metric) {
			best, found = r, true
		}
	}
	return best, found
}

// DefaultRoutes returns the interfaces of the default routes, best first
// (IPv4 before IPv6, lowest metric first), without duplicates.
func DefaultRoutes(routes []Route) []Route {
	var v4, v6 []Route
	for _, r := range routes {
		if r.Dst.Bits() != 0 {
			continue
		}
		if r.Dst.Addr().Is4() {
			v4 = append(v4, r)
		} else {
			v6 = append(v6, r)
		}
	}
	sortByMetric(v4)
	sortByMetric(v6)
	return append(v4, v6...)
}

func sortByMetric(rs []Route) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Metric < rs[j].Metric })
}
