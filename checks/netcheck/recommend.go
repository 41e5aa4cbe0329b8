package netcheck

import (
	"fmt"
	"sort"
	"strings"
)

// usable reports whether an interface can carry NCCL traffic between
// machines at all: running, not a bridge/bond port, not loopback, with an
// address other than link-local.
func (s *netState) usable(f *Iface) bool {
	if f == nil || !f.Running || f.Master != "" || f.Class == ClassLoopback {
		return false
	}
	_, ok := f.routable(s.Family)
	return ok
}

// routesTarget reports whether f is the way to the rendezvous host.
func (s *netState) routesTarget(f *Iface) bool {
	t := s.Target
	return t != nil && !t.Local && t.RouteIf == f.Name
}

// risk says why NCCL traffic between machines over f would fail or hang,
// or "" when nothing is wrong with it.
func (s *netState) risk(f *Iface) string {
	var why []string
	switch {
	case f.Class == ClassLoopback:
		return "loopback: other machines cannot reach it"
	case !f.HasFlag("UP"):
		why = append(why, "down")
	case !f.HasFlag("LOWER_UP"):
		why = append(why, "no carrier")
	case !f.Running:
		why = append(why, "not running ("+orDash(f.OperState)+")")
	}
	if f.Master != "" {
		why = append(why, "a port of "+f.Master+" (its address belongs on "+f.Master+")")
	}
	if s.routesTarget(f) {
		return strings.Join(why, ", ")
	}
	switch {
	case rank(f.Class) == 2:
		why = append(why, describe(f))
	case f.Class == ClassVeth && !f.DefaultRoute && f.Master == "":
		why = append(why, "a veth pair end without the default route")
	}
	if _, ok := f.routable(s.Family); !ok && len(f.ncclAddrs(s.Family)) > 0 {
		why = append(why, "only a link-local address")
	}
	return strings.Join(why, ", ")
}

// pick is the interface ncclwiz recommends, with its reason.
type pick struct {
	If   *Iface
	Why  string
	Alts []*Iface
}

// recommend chooses the interface the job should use on this machine:
// the route to the rendezvous host if known, else the default route's
// interface, else the best real NIC.
func (s *netState) recommend() pick {
	var p pick
	if t := s.Target; t != nil && !t.Local && t.RouteIf != "" {
		if f := s.byName(t.RouteIf); s.usable(f) {
			p.If, p.Why = f, fmt.Sprintf("the kernel routes %s %s through it", t.Source, t.Host)
		}
	}
	if p.If == nil {
		for _, r := range s.Defaults {
			if f := s.byName(r.Iface); s.usable(f) && rank(f.Class) <= 1 {
				p.If, p.Why = f, "it carries the default route"
				break
			}
		}
	}
	var cands []*Iface
	for i := range s.Ifaces {
		f := &s.Ifaces[i]
		if s.usable(f) && rank(f.Class) <= 1 && (p.If == nil || f.Name != p.If.Name) {
			cands = append(cands, f)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if rank(a.Class) != rank(b.Class) {
			return rank(a.Class) < rank(b.Class)
		}
		if a.SpeedMbps != b.SpeedMbps {
			return a.SpeedMbps > b.SpeedMbps
		}
		return a.Index < b.Index
	})
	if p.If == nil && len(cands) > 0 {
		p.If, cands = cands[0], cands[1:]
		p.Why = "it is the best-suited interface with an address (" + describe(p.If) + ")"
		if p.If.SpeedMbps > 0 {
			p.Why = fmt.Sprintf("it is the fastest real interface with an address (%d Mb/s)", p.If.SpeedMbps)
		}
	}
	p.Alts = cands
	return p
}

// env returns the settings that pin NCCL and Gloo to the pick.
func (p pick) env(gloo bool) (map[string]string, map[string]string) {
	if p.If == nil {
		return nil, nil
	}
	rec := map[string]string{"NCCL_SOCKET_IFNAME": "=" + p.If.Name}
	why := map[string]string{"NCCL_SOCKET_IFNAME": "exactly " + p.If.Name + " on this machine: " + p.Why + " (other nodes may name theirs differently)"}
	if gloo {
		rec["GLOO_SOCKET_IFNAME"] = p.If.Name
		why["GLOO_SOCKET_IFNAME"] = "keep PyTorch's Gloo (CPU collectives, barriers) on the same interface as NCCL"
	}
	return rec, why
}

// summary describes an interface in one phrase: "eth0 (10.0.0.5, UP,LOWER_UP)".
func (s *netState) summary(f *Iface) string {
	var parts []string
	if a, ok := f.routable(s.Family); ok {
		parts = append(parts, a.String())
	} else if as := f.ncclAddrs(s.Family); len(as) > 0 {
		parts = append(parts, as[0].String())
	} else {
		parts = append(parts, "no address")
	}
	parts = append(parts, f.State())
	if f.Class != ClassPhysical {
		parts = append(parts, describe(f))
	}
	return f.Name + " (" + strings.Join(parts, ", ") + ")"
}

func (s *netState) summaries(fs []*Iface) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = s.summary(f)
	}
	return strings.Join(out, ", ")
}

// portable returns an exclusion list that, on this machine, selects exactly
// the pick: useful when node names differ (eth0 here, ens5 there).
func (s *netState) portable(p pick) string {
	if p.If == nil {
		return ""
	}
	prefixes := []string{"docker", "lo", "virbr", "veth", "br-"}
	add := func(x string) {
		for _, y := range prefixes {
			if strings.HasPrefix(x, y) {
				return
			}
		}
		prefixes = append(prefixes, x)
	}
	for i := range s.Ifaces {
		f := &s.Ifaces[i]
		if f.Name == p.If.Name || len(f.ncclAddrs(s.Family)) == 0 {
			continue
		}
		if rank(f.Class) >= 2 || f.Class == ClassVeth || !s.usable(f) {
			add(stem(f.Name))
		}
	}
	l := ParseIfList("^"+strings.Join(prefixes, ","), maxSocketIfs)
	sel := ncclSelect(s.Ifaces, l, s.Family, genOld, maxSocketIfs)
	if len(sel) != 1 || sel[0].Name != p.If.Name {
		return ""
	}
	return l.Raw
}

// stem strips trailing digits and separators: tailscale0 → tailscale, cali12ab → cali12ab.
func stem(name string) string {
	s := strings.TrimRight(name, "0123456789")
	s = strings.TrimRight(s, ".-_")
	if s == "" {
		return name
	}
	return s
}
