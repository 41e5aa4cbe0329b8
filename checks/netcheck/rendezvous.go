package netcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
)

// torchrunDefaultPort is torchrun's --master-port default (and the port in
// most "Address already in use" reports).
const torchrunDefaultPort = 29500

// maxDialAddrs bounds how many resolved addresses are tried.
const maxDialAddrs = 3

func runRendezvous(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	st, err := gather(ctx, h)
	if errors.Is(err, host.ErrNoNetwork) {
		// Without an interface list, routes and listeners still say a lot.
		st = &netState{Routes: Routes(h), Family: socketFamily(h)}
		st.Defaults = DefaultRoutes(st.Routes)
		st.Target = findTarget(ctx, h, st)
		st.Scope = scopeOf(h, st)
	} else if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	return rendezvous(ctx, h, st, DialTimeout), nil
}

func rendezvous(ctx context.Context, h *host.Host, st *netState, dialTimeout time.Duration) []checks.Finding {
	t := st.Target
	if t == nil {
		f := checks.Finding{Severity: checks.OK, Title: "No MASTER_ADDR/MASTER_PORT here and no --peer: no rendezvous to test",
			Detail: "torchrun sets MASTER_ADDR and MASTER_PORT for its workers. To test the way to your rank-0 machine, run: ncclwiz check --only net.rendezvous --peer HOST:PORT",
			Guide:  "multi-node-basics"}
		out := []checks.Finding{f}
		if lf := portInUse(ctx, h, torchrunDefaultPort, "torchrun's default --master-port"); lf != nil {
			lf.Severity = checks.Info
			lf.Fixes = nil
			delete(lf.Evidence, "recommended_env")
			delete(lf.Evidence, "recommended_env_reason")
			out = append(out, *lf)
		}
		return out
	}
	var fs []checks.Finding
	label := "--peer " + t.Host
	if t.Source == "MASTER_ADDR" {
		label = "MASTER_ADDR=" + t.Host
	}
	ev := map[string]any{"source": t.Source, "host": t.Host, "port": t.PortRaw}

	if t.Source == "--peer" && t.Port == 0 {
		return []checks.Finding{{Severity: checks.Error, Title: fmt.Sprintf("--peer %q is not HOST:PORT", t.Host),
			Detail: t.ResolveErr.Error(), Guide: "multi-node-basics", Evidence: ev}}
	}
	// The port itself.
	if t.Source == "MASTER_ADDR" {
		switch {
		case t.PortRaw == "":
			fs = append(fs, checks.Finding{Severity: checks.Warn, Title: "MASTER_ADDR is set but MASTER_PORT is not",
				Detail: "init_process_group(init_method='env://') needs both and fails with 'environment variable MASTER_PORT expected, but not set'; torchrun sets both for its workers.",
				Guide:  "rendezvous-timeout", Evidence: ev})
		case t.Port == 0:
			fs = append(fs, checks.Finding{Severity: checks.Error, Title: fmt.Sprintf("MASTER_PORT=%q is not a port number", t.PortRaw),
				Detail: "Use a free TCP port from 1 to 65535, the same on every node (torchrun's default is 29500).", Guide: "rendezvous-timeout", Evidence: ev})
		}
	}
	if t.Host == "" {
		// MASTER_PORT alone: rank 0 would listen on this machine.
		if lf := portInUse(ctx, h, t.Port, "MASTER_PORT"); lf != nil {
			fs = append(fs, *lf)
		} else if t.Port > 0 {
			fs = append(fs, checks.Finding{Severity: checks.OK, Title: fmt.Sprintf("MASTER_PORT=%d is free on this machine", t.Port), Guide: "port-clash", Evidence: ev})
		}
		return fs
	}

	// Name resolution.
	if t.ResolveErr != nil {
		why := t.ResolveErr.Error()
		if errors.Is(t.ResolveErr, context.DeadlineExceeded) {
			why = fmt.Sprintf("no answer from the resolver within %s", ResolveTimeout)
		}
		ev["error"] = why
		return append(fs, checks.Finding{Severity: checks.Error, Title: fmt.Sprintf("%s does not resolve on this machine", label),
			Detail: "Every rank must reach the rank-0 machine by this name; otherwise the job waits at rendezvous until it times out. " +
				"Use an IP address, or a name that resolves on every node (/etc/hosts or DNS). Resolver said: " + why,
			Guide: "rendezvous-timeout", Evidence: ev})
	}
	addrs := make([]string, len(t.Addrs))
	for i, a := range t.Addrs {
		addrs[i] = a.String()
	}
	ev["addresses"] = addrs
	ev["resolve_ms"] = float64(t.ResolveTime.Microseconds()) / 1000

	// The way there, and whether NCCL and Gloo use the same interface.
	fs = append(fs, routeFindings(h, st, label, ev)...)

	// Can we connect?
	if t.Port > 0 {
		fs = append(fs, connectFinding(ctx, h, st, label, ev, dialTimeout))
		// A listener on rank 0's own port is the "Address already in use"
		// of the next launch; with --peer the user tests a running peer.
		if t.Local && t.Source == "MASTER_ADDR" {
			if lf := portInUse(ctx, h, t.Port, "MASTER_PORT"); lf != nil {
				fs = append(fs, *lf)
			}
		}
	}
	return fs
}

func routeFindings(h *host.Host, st *netState, label string, ev map[string]any) []checks.Finding {
	t := st.Target
	ip := t.Addrs[0]
	cp := func() map[string]any {
		m := make(map[string]any, len(ev)+4)
		for k, v := range ev {
			m[k] = v
		}
		return m
	}
	if t.Local {
		e := cp()
		e["interface"] = t.RouteIf
		return []checks.Finding{{Severity: checks.OK, Title: fmt.Sprintf("%s is this machine (%s): rank 0 runs here", labelIP(label, t.Host, ip), t.RouteIf),
			Guide: "multi-node-basics", Evidence: e}}
	}
	if t.NoRoute {
		e := cp()
		return []checks.Finding{{Severity: checks.Error, Title: fmt.Sprintf("No route to %s from this machine", labelIP(label, t.Host, ip)),
			Detail: "The routing table has neither a matching network nor a default route, so connections fail at once with 'Network is unreachable'. " +
				"Check the address, or the interface that should reach the other nodes (is it up, does it have an address?).",
			Guide: "socket-connect", Evidence: e}}
	}
	e := cp()
	e["route_interface"] = t.RouteIf
	e["route_source"] = t.RouteHow
	if t.Gateway.IsValid() {
		e["gateway"] = t.Gateway.String()
	}
	if t.SourceAddr.IsValid() {
		e["source_address"] = t.SourceAddr.String()
	}
	via := ""
	if t.Gateway.IsValid() {
		via = " via gateway " + t.Gateway.String()
	}
	f := checks.Finding{Severity: checks.OK, Guide: "socket-connect", Evidence: e,
		Title: fmt.Sprintf("%s is reached through %s%s", labelIP(label, t.Host, ip), t.RouteIf, via)}
	rif := st.byName(t.RouteIf)
	if rif != nil && (rank(rif.Class) == 2) {
		f.Severity = checks.Info
		f.Detail = fmt.Sprintf("The route leaves through %s, %s. That works if it is how your nodes are meant to talk, but such links are usually slower than the data network.", rif.Name, describe(rif))
	}
	out := []checks.Finding{f}

	// NCCL's and Gloo's choice against the route.
	p := pick{If: rif, Why: fmt.Sprintf("the kernel routes %s through it", label)}
	if rif == nil || !st.usable(rif) {
		p = st.recommend()
	}
	val, src, set := ncclSetting(h, "NCCL_SOCKET_IFNAME")
	var sel []*Iface
	what := "NCCL's automatic choice"
	if set && len(val) > 1 {
		sel = ncclSelect(st.Ifaces, ParseIfList(val, maxSocketIfs), st.Family, genNew, maxSocketIfs)
		what = "NCCL_SOCKET_IFNAME=" + val
		if src != "environment" {
			what += " (from " + src + ")"
		}
	} else {
		commID, _, _ := ncclSetting(h, "NCCL_COMM_ID")
		sel, _ = ncclAuto(st.Ifaces, st.Family, genNew, commID)
	}
	if len(st.Ifaces) > 0 && len(sel) > 0 && rif != nil && sel[0].Name != t.RouteIf {
		mf := checks.Finding{Severity: checks.Warn, Guide: "socket-connect",
			Title: fmt.Sprintf("NCCL would bootstrap over %s, but %s is reached through %s", sel[0].Name, label, t.RouteIf),
			Detail: fmt.Sprintf("With %s, NCCL listens and connects on %s. The other nodes reach this one through %s's network, "+
				"so if %s's network does not connect the nodes, bootstrap connections hang until NCCL's retries run out.", what, st.summary(sel[0]), t.RouteIf, sel[0].Name),
			Evidence: map[string]any{"nccl_interfaces": namesOf(sel), "route_interface": t.RouteIf, "target": ip.String()}}
		if contains(namesOf(sel), t.RouteIf) {
			mf.Severity = checks.Info
			mf.Title = fmt.Sprintf("NCCL would use %s and bootstrap over %s first; %s is reached through %s", strings.Join(namesOf(sel), ", "), sel[0].Name, label, t.RouteIf)
		}
		if rec, why := p.env(true); rec != nil {
			mf.Evidence["recommended_env"] = rec
			mf.Evidence["recommended_env_reason"] = why
			mf.Fixes = []string{"env.export"}
		}
		out = append(out, mf)
	}
	if g, ok := h.LookupEnv("GLOO_SOCKET_IFNAME"); ok && g != "" && rif != nil && !contains(strings.Split(g, ","), t.RouteIf) {
		gf := checks.Finding{Severity: checks.Warn, Guide: "socket-connect",
			Title:    fmt.Sprintf("GLOO_SOCKET_IFNAME=%s, but %s is reached through %s", g, label, t.RouteIf),
			Detail:   "Gloo groups bind to the named interfaces; if their network does not join the nodes, Gloo connections fail.",
			Evidence: map[string]any{"route_interface": t.RouteIf}}
		if p.If != nil {
			gf.Evidence["recommended_env"] = map[string]string{"GLOO_SOCKET_IFNAME": p.If.Name}
			gf.Evidence["recommended_env_reason"] = map[string]string{"GLOO_SOCKET_IFNAME": p.Why}
			gf.Fixes = []string{"env.export"}
		}
		out = append(out, gf)
	}
	return out
}

// labelIP names the target with its address unless the name is the address.
func labelIP(label, name string, ip netip.Addr) string {
	if name == ip.String() {
		return label
	}
	return label + " (" + ip.String() + ")"
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// connectFinding tries a bounded TCP connect to each resolved address
// (at most maxDialAddrs) and reports the first success or the failures.
func connectFinding(ctx context.Context, h *host.Host, st *netState, label string, ev map[string]any, timeout time.Duration) checks.Finding {
	t := st.Target
	var tried []map[string]any
	var firstErr error
	var firstAddr string
	for i, a := range t.Addrs {
		if i >= maxDialAddrs || ctx.Err() != nil {
			break
		}
		addr := net.JoinHostPort(a.String(), strconv.Itoa(t.Port))
		start := time.Now()
		local, err := h.Dial(ctx, addr, timeout)
		el := time.Since(start)
		rec := map[string]any{"address": addr, "ms": float64(el.Microseconds()) / 1000}
		if err == nil {
			rec["result"] = "connected"
			if local != "" {
				rec["local_address"] = local
			}
			tried = append(tried, rec)
			title := fmt.Sprintf("TCP connect to %s (%s) succeeded in %s", addr, label, roundMS(el))
			if lp, e := netip.ParseAddrPort(local); e == nil {
				if o := st.owner(lp.Addr()); o != nil {
					title += " from " + lp.Addr().String() + " on " + o.Name
				}
			}
			return checks.Finding{Severity: checks.OK, Title: title, Guide: "rendezvous-timeout",
				Evidence: map[string]any{"attempts": tried, "timeout_ms": timeout.Milliseconds()}}
		}
		rec["result"] = dialKind(err)
		rec["error"] = err.Error()
		tried = append(tried, rec)
		if firstErr == nil {
			firstErr, firstAddr = err, addr
		}
	}
	e := map[string]any{"attempts": list(tried), "timeout_ms": timeout.Milliseconds()}
	if firstErr == nil { // cancelled before any attempt
		return checks.Finding{Severity: checks.Skipped, Title: "TCP connect test not run: " + ctx.Err().Error(), Evidence: e}
	}
	f := checks.Finding{Guide: "rendezvous-timeout", Evidence: e}
	switch dialKind(firstErr) {
	case "refused":
		f.Severity = checks.Warn
		f.Title = fmt.Sprintf("Nothing listens on %s (%s): connection refused", firstAddr, label)
		f.Detail = "The machine answered, so the network path works, but no program accepts connections on that port. " +
			"Before the job starts this is expected. While ranks wait at rendezvous it means rank 0 has not started, has crashed, or listens on a different MASTER_ADDR/MASTER_PORT."
		if t.Local {
			f.Severity = checks.Info
			f.Title = fmt.Sprintf("Nothing listens on %s yet (this machine is rank 0's)", firstAddr)
			f.Detail = "Fine before launch: rank 0's TCPStore listens here once the job starts. If ranks are already waiting, rank 0 is not running or uses another port."
		}
	case "timeout":
		f.Severity = checks.Error
		f.Title = fmt.Sprintf("No answer from %s (%s) within %s", firstAddr, label, timeout)
		f.Detail = "A reachable machine answers at once, even when nothing listens (connection refused). Silence means packets are dropped: a firewall (host or cloud security group) blocks the port, " +
			"or the address is not reachable from this network. Ranks would wait at rendezvous until the timeout ('DistStoreError: Timed out … waiting for clients')."
		f.Guide = "socket-connect"
	case "unreachable":
		f.Severity = checks.Error
		f.Title = fmt.Sprintf("%s (%s) is unreachable from this machine", firstAddr, label)
		f.Detail = "The kernel or a router reports no way to that host (host or network unreachable). Check the address and the interface that should reach the other nodes."
		f.Guide = "socket-connect"
	case "unavailable":
		f.Severity = checks.Skipped
		f.Title = "TCP connect test not available on this host (" + label + ")"
		f.Detail = firstErr.Error()
	default:
		f.Severity = checks.Error
		f.Title = fmt.Sprintf("TCP connect to %s (%s) failed", firstAddr, label)
		f.Detail = firstErr.Error()
	}
	return f
}

func roundMS(d time.Duration) string {
	if d < time.Millisecond {
		return "<1ms"
	}
	return d.Round(time.Millisecond).String()
}

// dialKind sorts a dial error: refused, timeout, unreachable, unavailable, other.
func dialKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, host.ErrNoNetwork):
		return "unavailable"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other"
}

// portInUse reports a listener on port on this machine, with the PIDs that
// hold it, or nil when the port is free (or cannot be checked).
func portInUse(ctx context.Context, h *host.Host, port int, what string) *checks.Finding {
	if port <= 0 {
		return nil
	}
	socks, err := TCPSockets(h)
	if err != nil {
		return nil
	}
	inodes := map[uint64]bool{}
	var listeners []Socket
	used := map[int]bool{}
	for _, s := range socks {
		used[int(s.Local.Port())] = true
		if s.State == tcpListen && int(s.Local.Port()) == port {
			listeners = append(listeners, s)
			if s.Inode != 0 {
				inodes[s.Inode] = true
			}
		}
	}
	if len(listeners) == 0 {
		return nil
	}
	owners, unreadable := SocketOwners(ctx, h, inodes)
	var procs []Proc
	var rows []map[string]any
	var who []string
	seenPID := map[int]bool{}
	for _, l := range listeners {
		e := map[string]any{"local": l.Local.String(), "uid": l.UID, "inode": l.Inode}
		var pids []int
		for _, p := range owners[l.Inode] {
			pids = append(pids, p.PID)
			if !seenPID[p.PID] {
				seenPID[p.PID] = true
				procs = append(procs, p)
				who = append(who, fmt.Sprintf("PID %d (%s)", p.PID, firstNonEmpty(p.Cmdline, p.Comm)))
			}
		}
		e["pids"] = list(pids)
		rows = append(rows, e)
	}
	if len(who) == 0 {
		u := userName(h, listeners[0].UID)
		why := "its process is not visible from here"
		if unreadable > 0 && !h.IsRoot() {
			why = "run as root to see which process (other users' file descriptors are private)"
		} else if h.IsRoot() {
			why = "no process in this PID namespace holds it (another container sharing this network namespace?)"
		}
		who = append(who, fmt.Sprintf("a socket of user %s (%s)", u, why))
	}
	free := 0
	for p := port + 1; p < port+200 && p < 65536; p++ {
		if !used[p] {
			free = p
			break
		}
	}
	f := &checks.Finding{Severity: checks.Warn, Guide: "port-clash",
		Title: fmt.Sprintf("Port %d (%s) is already in use on this machine by %s", port, what, strings.Join(who, ", ")),
		Detail: fmt.Sprintf("A new job whose rank 0 runs here with port %d fails at once with 'The server socket has failed to bind to [::]:%d (errno: 98 - Address already in use)'. "+
			"If that process is your running job's rank 0, this is expected; if it is left over from an earlier run, end it (by PID) or choose another port, the same on every node.", port, port),
		Evidence: map[string]any{"port": port, "listeners": rows, "processes": list(procs)}}
	if free > 0 {
		f.Evidence["free_port"] = free
		f.Evidence["recommended_env"] = map[string]string{"MASTER_PORT": strconv.Itoa(free)}
		f.Evidence["recommended_env_reason"] = map[string]string{"MASTER_PORT": fmt.Sprintf("port %d is taken on this machine; %d is free here (use the same port on every node, e.g. torchrun --master-port)", port, free)}
		f.Fixes = []string{"env.export"}
	}
	for _, p := range procs {
		if looksLikeTorch(p) {
			f.Fixes = append(f.Fixes, "proc.stale")
			break
		}
	}
	return f
}

func looksLikeTorch(p Proc) bool {
	s := strings.ToLower(p.Comm + " " + p.Cmdline)
	for _, k := range []string{"python", "torchrun", "torch.distributed", "pt_elastic", "accelerate", "deepspeed"} {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

// userName maps a uid through /etc/passwd.
func userName(h *host.Host, uid int) string {
	if b, err := h.ReadFile("/etc/passwd"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, ":")
			if len(f) > 2 && f[2] == strconv.Itoa(uid) {
				return f[0] + " (uid " + f[2] + ")"
			}
		}
	}
	return "uid " + strconv.Itoa(uid)
}
