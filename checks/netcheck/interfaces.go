package netcheck

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
)

const srcIfname = "NCCL docs, Environment Variables › NCCL_SOCKET_IFNAME; nccl src/misc/socket.cc ncclFindInterfaces"

func runInterfaces(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	st, err := gather(ctx, h)
	if errors.Is(err, host.ErrNoNetwork) {
		return []checks.Finding{{Severity: checks.Skipped, Title: "Network interfaces: not known for this host",
			Detail: "This host description lists no network interfaces (a fixture or simulation without an `interfaces:` list)."}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	p := st.recommend()
	fs := []checks.Finding{interfaceSummary(st, p)}
	fs = append(fs, socketIfname(h, st, p)...)
	fs = append(fs, glooIfname(ctx, h, st, p)...)
	return fs, nil
}

func interfaceSummary(st *netState, p pick) checks.Finding {
	var rows []map[string]any
	for i := range st.Ifaces {
		f := &st.Ifaces[i]
		addrs := make([]string, 0, len(f.Prefixes))
		for _, a := range f.Prefixes {
			addrs = append(addrs, a.String())
		}
		e := map[string]any{"name": f.Name, "class": f.Class, "state": f.State(), "operstate": f.OperState,
			"addrs": addrs, "default_route": f.DefaultRoute}
		if f.MTU > 0 {
			e["mtu"] = f.MTU
		}
		if f.Kind != "" {
			e["kind"] = f.Kind
		}
		if f.Master != "" {
			e["master"] = f.Master
		}
		if f.SpeedMbps > 0 {
			e["speed_mbps"] = f.SpeedMbps
		}
		if r := st.risk(f); r != "" {
			e["unsuitable"] = r
		}
		rows = append(rows, e)
	}
	ev := map[string]any{"interfaces": list(rows)}
	var defaults []string
	for _, r := range st.Defaults {
		d := r.Iface
		if r.Gateway.IsValid() {
			d += " via " + r.Gateway.String()
		}
		defaults = append(defaults, d)
	}
	ev["default_routes"] = list(defaults)
	if st.Scope.Why != "" {
		ev["job_scope"] = scopeText(st.Scope)
	}
	title := fmt.Sprintf("%d interfaces", len(st.Ifaces))
	if len(st.Defaults) > 0 {
		title += "; default route via " + st.Defaults[0].Iface
	} else {
		title += "; no default route"
	}
	if p.If != nil {
		ev["recommended_interface"] = p.If.Name
		ev["recommended_because"] = p.Why
		title += "; best for NCCL: " + p.If.Name
		if len(p.Alts) > 0 {
			ev["other_candidates"] = namesOf(p.Alts)
		}
	} else {
		title += "; none suits traffic between machines"
	}
	return checks.Finding{Severity: checks.OK, Title: title, Evidence: ev, Guide: "multi-node-basics"}
}

func scopeText(s jobScope) string {
	switch {
	case s.Known && s.Multi:
		return "multi-node (" + s.Why + ")"
	case s.Known:
		return "single node (" + s.Why + ")"
	case s.Why != "":
		return "unknown (" + s.Why + ")"
	}
	return "unknown"
}

// socketIfname judges NCCL_SOCKET_IFNAME, or NCCL's automatic choice when unset.
func socketIfname(h *host.Host, st *netState, p pick) []checks.Finding {
	val, src, set := ncclSetting(h, "NCCL_SOCKET_IFNAME")
	where := ""
	if src != "" && src != "environment" {
		where = " (from " + src + ")"
	}
	var fs []checks.Finding
	if set && val == "" {
		set = false // an empty assignment is the same as unset, to NCCL and to people
	}
	if set && len(val) == 1 {
		fs = append(fs, checks.Finding{Severity: checks.Warn, Title: fmt.Sprintf("NCCL_SOCKET_IFNAME=%q%s is ignored", val, where),
			Detail: "NCCL only reads NCCL_SOCKET_IFNAME when it is longer than one character, so it selects interfaces automatically. " + srcIfname + ".",
			Guide:  "socket-interface", Evidence: map[string]any{"value": val, "source": src}})
		set = false
	}
	if !set {
		return append(fs, autoSelection(h, st, p))
	}
	return append(fs, userSelection(st, p, val, src, where))
}

func withRecommendation(f checks.Finding, st *netState, p pick) checks.Finding {
	rec, why := p.env(true)
	if rec == nil {
		f.Detail += " No interface here is fit for traffic between machines; give one an address or bring it up."
		return f
	}
	if f.Evidence == nil {
		f.Evidence = map[string]any{}
	}
	f.Evidence["recommended_env"] = rec
	f.Evidence["recommended_env_reason"] = why
	f.Fixes = []string{"env.export"}
	f.Detail += fmt.Sprintf(" Use NCCL_SOCKET_IFNAME==%s (the leading = asks for this exact name; %s).", p.If.Name, p.Why)
	if alt := st.portable(p); alt != "" {
		f.Evidence["portable_alternative"] = alt
		f.Detail += fmt.Sprintf(" If your nodes name their interfaces differently, NCCL_SOCKET_IFNAME=%s selects the same interface here and works across names.", alt)
	}
	return f
}

func userSelection(st *netState, p pick, val, src, where string) checks.Finding {
	l := ParseIfList(val, maxSocketIfs)
	selNew := ncclSelect(st.Ifaces, l, st.Family, genNew, maxSocketIfs)
	selOld := ncclSelect(st.Ifaces, l, st.Family, genOld, maxSocketIfs)
	ev := map[string]any{"value": val, "source": src, "selected_nccl_2_28_plus": namesOf(selNew), "selected_before_2_28": namesOf(selOld)}
	if st.Family != 0 {
		ev["socket_family"] = fmt.Sprintf("IPv%d only (NCCL_SOCKET_FAMILY)", st.Family)
	}
	syntax := l.Syntax()
	if len(syntax) > 0 {
		ev["syntax_problems"] = syntax
	}
	name := fmt.Sprintf("NCCL_SOCKET_IFNAME=%s%s", val, where)
	f := checks.Finding{Guide: "socket-interface", Evidence: ev}
	multiOrUnknown := st.Scope.Multi || !st.Scope.Known

	var risky, fine []*Iface
	for _, x := range selOld {
		if st.risk(x) != "" {
			risky = append(risky, x)
		} else {
			fine = append(fine, x)
		}
	}
	allLoop := len(selOld) > 0
	for _, x := range selOld {
		if x.Class != ClassLoopback {
			allLoop = false
		}
	}
	switch {
	case len(selOld) == 0:
		f.Severity = checks.Error
		f.Title = name + " matches no interface with an address here"
		f.Detail = "NCCL stops at init with 'Bootstrap : no socket interface found' (or 'NET/Socket : no interface found'). " +
			"The value was probably copied from another machine: interface names differ between machines and between a container and its host. " +
			explainNoMatch(st, l) + " Syntax: a name is a prefix (eth matches eth0, eth1), =eth0 is exact, ^docker,lo excludes (" + srcIfname + ")."
		f = withRecommendation(f, st, p)
	case len(selNew) == 0:
		f.Severity = checks.Error
		f.Title = name + " matches only interfaces that are down: " + strings.Join(namesOf(selOld), ", ")
		f.Detail = "NCCL 2.28 and later skip interfaces that are not running and fail with 'no socket interface found'; older releases use them anyway, and connections through them time out or hang. Matched: " +
			st.summaries(selOld) + "."
		f = withRecommendation(f, st, p)
	case allLoop:
		f.Severity = checks.Warn
		f.Title = name + " selects loopback only"
		f.Detail = "Loopback works only while every rank runs on this machine; ranks on other machines cannot connect, and the job hangs in init until a timeout."
		if st.Scope.Multi {
			f.Severity = checks.Error
			f.Title = name + " selects loopback, but the job spans machines"
			f.Detail = "This is a multi-node job (" + st.Scope.Why + "): ranks on other machines cannot reach this node's loopback address, so bootstrap connections time out or hang."
		}
		f = withRecommendation(f, st, p)
	case len(fine) == 0:
		f.Severity = checks.Warn
		if multiOrUnknown {
			f.Severity = checks.Error
		}
		f.Title = name + " selects only unsuitable interfaces: " + riskList(st, risky)
		f.Detail = "Other machines cannot reach these addresses (or the links are down), so NCCL's bootstrap and socket connections between nodes time out or hang. " +
			"On one machine alone it can still work, because every address is local."
		f = withRecommendation(f, st, p)
	case len(risky) > 0:
		f.Severity = checks.Warn
		if !multiOrUnknown {
			f.Severity = checks.Info
		}
		f.Title = name + " also selects " + riskList(st, risky)
		f.Detail = "NCCL may use every interface that matches for its socket transport, and bootstraps over the first (" + selOld[0].Name + "). " +
			"Connections over an unsuitable interface hang or fail between machines (NCCL networking troubleshooting: 'interfaces UP but not able to communicate between nodes … fail during the init functions or even hang')."
		for _, x := range risky {
			if !x.Running {
				f.Detail += " NCCL 2.28 and later skip interfaces that are down; older releases use them."
				break
			}
		}
		f = withRecommendation(f, st, p)
	default:
		f.Severity = checks.OK
		f.Title = name + " selects " + st.summaries(selNew)
		if len(syntax) > 0 {
			f.Severity = checks.Warn
			f.Title = name + ": " + syntax[0]
		}
	}
	if len(syntax) > 0 && f.Severity != checks.OK {
		f.Detail += " Also: " + strings.Join(syntax, "; ") + "."
	}
	return f
}

func riskList(st *netState, fs []*Iface) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name + " (" + st.risk(f) + ")"
	}
	return strings.Join(out, ", ")
}

// explainNoMatch says, per entry, why nothing matched.
func explainNoMatch(st *netState, l IfList) string {
	var parts []string
	if l.Exclude {
		parts = append(parts, "The exclusion list leaves no interface with an address.")
	} else {
		for _, e := range l.Entries {
			var hits []string
			for i := range st.Ifaces {
				if l.entryMatches(e, st.Ifaces[i].Name, -1) {
					hits = append(hits, st.Ifaces[i].Name)
				}
			}
			if len(hits) == 0 {
				parts = append(parts, fmt.Sprintf("No interface here is named %s%s.", map[bool]string{true: "", false: "like "}[l.Exact], e.Prefix))
			} else {
				parts = append(parts, fmt.Sprintf("%s matches %s, which has no usable address%s.", e.Prefix, strings.Join(hits, ", "), familyNote(st)))
			}
		}
	}
	parts = append(parts, "Interfaces here: "+st.summaries(allIfaces(st))+".")
	return strings.Join(parts, " ")
}

func familyNote(st *netState) string {
	if st.Family != 0 {
		return fmt.Sprintf(" for IPv%d (NCCL_SOCKET_FAMILY)", st.Family)
	}
	return ""
}

func allIfaces(st *netState) []*Iface {
	out := make([]*Iface, len(st.Ifaces))
	for i := range st.Ifaces {
		out[i] = &st.Ifaces[i]
	}
	return out
}

// autoSelection judges NCCL's own choice when NCCL_SOCKET_IFNAME is unset.
func autoSelection(h *host.Host, st *netState, p pick) checks.Finding {
	commID, _, _ := ncclSetting(h, "NCCL_COMM_ID")
	selNew, whyNew := ncclAuto(st.Ifaces, st.Family, genNew, commID)
	selOld, whyOld := ncclAuto(st.Ifaces, st.Family, genOld, commID)
	ev := map[string]any{"selected_nccl_2_28_plus": namesOf(selNew), "rule_nccl_2_28_plus": whyNew,
		"selected_before_2_28": namesOf(selOld), "rule_before_2_28": whyOld}
	f := checks.Finding{Guide: "socket-interface", Evidence: ev}
	var risky []*Iface
	seen := map[string]bool{}
	for _, x := range append(append([]*Iface(nil), selNew...), selOld...) {
		if !seen[x.Name] && st.risk(x) != "" {
			seen[x.Name] = true
			risky = append(risky, x)
		}
	}
	gens := func() string {
		if sameNames(selNew, selOld) {
			return "NCCL picks " + st.summaries(selNew)
		}
		return fmt.Sprintf("NCCL 2.28+ picks %s; older releases pick %s", orNone(st, selNew), orNone(st, selOld))
	}
	switch {
	case len(selNew) == 0 && len(selOld) == 0:
		f.Severity = checks.Error
		f.Title = "NCCL_SOCKET_IFNAME is unset and NCCL finds no interface with an address"
		f.Detail = "NCCL will stop at init with 'Bootstrap : no socket interface found'. Interfaces here: " + st.summaries(allIfaces(st)) + "."
		f = withRecommendation(f, st, p)
	case len(risky) > 0:
		f.Severity = checks.Info
		if st.Scope.Multi {
			f.Severity = checks.Warn
		}
		f.Title = "NCCL_SOCKET_IFNAME is unset; NCCL's automatic choice includes " + riskList(st, risky)
		f.Detail = gens() + ". NCCL's automatic selection filters by name only (" + srcIfname + "; NVIDIA/nccl#913 asked for more and was declined), " +
			"so such interfaces can carry bootstrap or socket traffic; between machines that hangs or fails. On a single machine it is harmless."
		if !st.Scope.Known {
			f.Detail += " Pin the interface before running across machines."
		}
		if st.Scope.Known && !st.Scope.Multi {
			f.Detail += " This looks like a single-node job (" + st.Scope.Why + ")."
			break
		}
		f = withRecommendation(f, st, p)
	default:
		f.Severity = checks.OK
		f.Title = "NCCL_SOCKET_IFNAME is unset; " + gens()
		if len(selNew) > 0 && selNew[0].Class == ClassLoopback && st.Scope.Multi {
			f.Severity = checks.Error
			f.Title = "NCCL_SOCKET_IFNAME is unset and NCCL would fall back to loopback, but the job spans machines"
			f.Detail = "No other interface has an address NCCL accepts. Ranks on other machines cannot reach loopback."
			f = withRecommendation(f, st, p)
		}
	}
	return f
}

func orNone(st *netState, fs []*Iface) string {
	if len(fs) == 0 {
		return "nothing"
	}
	return st.summaries(fs)
}

// glooIfname judges GLOO_SOCKET_IFNAME, or Gloo's default (the address the
// host name resolves to) when unset.
func glooIfname(ctx context.Context, h *host.Host, st *netState, p pick) []checks.Finding {
	val, set := h.LookupEnv("GLOO_SOCKET_IFNAME")
	f := checks.Finding{Guide: "socket-interface"}
	if set && strings.TrimSpace(val) != "" {
		// Gloo takes exact interface names, comma-separated; no prefixes,
		// no ^ or = (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp).
		var missing, bad []string
		for _, n := range strings.Split(val, ",") {
			x := st.byName(n)
			switch {
			case x == nil:
				missing = append(missing, fmt.Sprintf("%q", n))
			case len(x.ncclAddrs(0)) == 0:
				bad = append(bad, n+" (no address)")
			case st.risk(x) != "":
				bad = append(bad, n+" ("+st.risk(x)+")")
			}
		}
		f.Evidence = map[string]any{"value": val}
		switch {
		case len(missing) > 0:
			f.Severity = checks.Error
			f.Title = fmt.Sprintf("GLOO_SOCKET_IFNAME=%s names interfaces that do not exist here: %s", val, strings.Join(missing, ", "))
			f.Detail = "PyTorch's Gloo backend needs exact interface names (no prefixes, no ^ or =) and fails to create its device when a name is missing."
		case len(bad) > 0:
			f.Severity = checks.Warn
			f.Title = fmt.Sprintf("GLOO_SOCKET_IFNAME=%s uses unsuitable interfaces: %s", val, strings.Join(bad, ", "))
			f.Detail = "Gloo connections between machines over these interfaces fail or hang."
		default:
			f.Severity = checks.OK
			f.Title = "GLOO_SOCKET_IFNAME=" + val + " names existing, usable interfaces"
			return []checks.Finding{f}
		}
		if p.If != nil {
			f.Evidence["recommended_env"] = map[string]string{"GLOO_SOCKET_IFNAME": p.If.Name}
			f.Evidence["recommended_env_reason"] = map[string]string{"GLOO_SOCKET_IFNAME": "the interface NCCL should use on this machine: " + p.Why}
			f.Fixes = []string{"env.export"}
		}
		return []checks.Finding{f}
	}
	// Unset: Gloo binds to the address the host name resolves to, and falls
	// back to loopback when it resolves to nothing.
	name := hostname(h)
	if name == "" {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	addrs, err := h.Resolve(rctx, name)
	if errors.Is(err, host.ErrNoNetwork) {
		return nil
	}
	f.Evidence = map[string]any{"hostname": name, "resolves_to": list(addrs)}
	// Gloo binds to the first resolved address it can bind, i.e. the first
	// one that belongs to this machine.
	var first netip.Addr
	var owner *Iface
	for _, a := range addrs {
		ip, e := netip.ParseAddr(a)
		if e != nil {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLoopback() {
			first = ip
			break
		}
		if o := st.owner(ip); o != nil {
			first, owner = ip, o
			break
		}
	}
	switch {
	case err != nil || !first.IsValid() || first.IsLoopback():
		what := fmt.Sprintf("resolves to %s", strings.Join(addrs, ", "))
		switch {
		case err != nil:
			what = "does not resolve"
		case !first.IsValid():
			what = "resolves to no address of this machine (" + strings.Join(addrs, ", ") + ")"
		}
		f.Severity = checks.Info
		f.Title = fmt.Sprintf("GLOO_SOCKET_IFNAME is unset and the host name %s %s: Gloo would use loopback", name, what)
		f.Detail = "Without GLOO_SOCKET_IFNAME, PyTorch's Gloo binds to the address of the machine's host name and falls back to loopback (with the warning 'Unable to resolve hostname to a (local) address'). " +
			"Debian-style /etc/hosts maps the host name to 127.0.1.1. That is fine on one machine; across machines, Gloo groups (CPU collectives, some barriers) fail to connect."
		if st.Scope.Multi && p.If != nil {
			f.Severity = checks.Warn
			f.Evidence["recommended_env"] = map[string]string{"GLOO_SOCKET_IFNAME": p.If.Name}
			f.Evidence["recommended_env_reason"] = map[string]string{"GLOO_SOCKET_IFNAME": "the host name resolves to loopback here; " + p.Why}
			f.Fixes = []string{"env.export"}
		}
	case owner != nil && st.risk(owner) != "":
		f.Severity = checks.Info
		if st.Scope.Multi {
			f.Severity = checks.Warn
		}
		f.Title = fmt.Sprintf("GLOO_SOCKET_IFNAME is unset and the host name %s resolves to %s on %s (%s)", name, first, owner.Name, st.risk(owner))
		f.Detail = "Gloo binds to the host name's address; between machines, connections over this interface fail."
		if p.If != nil && st.Scope.Multi {
			f.Evidence["recommended_env"] = map[string]string{"GLOO_SOCKET_IFNAME": p.If.Name}
			f.Evidence["recommended_env_reason"] = map[string]string{"GLOO_SOCKET_IFNAME": p.Why}
			f.Fixes = []string{"env.export"}
		}
	default:
		f.Severity = checks.OK
		f.Title = fmt.Sprintf("GLOO_SOCKET_IFNAME is unset; Gloo would use %s (%s, the address of host name %s)", first, owner.Name, name)
	}
	return []checks.Finding{f}
}
