package netcheck

import (
	"context"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

var (
	up      = []string{"UP", "BROADCAST", "MULTICAST", "LOWER_UP"}
	noCarr  = []string{"UP", "BROADCAST", "MULTICAST"}
	loIf    = host.NetInterface{Name: "lo", Index: 1, Type: 772, MTU: 65536, Flags: []string{"UP", "LOOPBACK", "LOWER_UP"}, OperState: "unknown", Addrs: []string{"127.0.0.1/8", "::1/128"}}
	route10 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" +
		"eth0\t0000000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n" +
		"docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n" +
		"virbr0\t007AA8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
)

// dockerHost is a bare-metal GPU box with docker and libvirt installed: the
// case of seeds 002/004 (NCCL picking a bridge or a veth).
func dockerHost(t *testing.T, env map[string]string, extra map[string]any) *host.Host {
	t.Helper()
	ifs := []host.NetInterface{
		loIf,
		{Name: "eth0", Index: 2, Type: 1, MTU: 9000, Flags: up, OperState: "up", Addrs: []string{"10.0.0.5/24", "fe80::5/64"}, Parent: "pci:0000:3b:00.0"},
		{Name: "docker0", Index: 3, Type: 1, MTU: 1500, Kind: "bridge", Flags: up, OperState: "up", Addrs: []string{"172.17.0.1/16"}},
		{Name: "vethab12", Index: 4, Type: 1, MTU: 1500, Kind: "veth", Master: "docker0", Flags: up, OperState: "up", Addrs: []string{"fe80::a8/64"}},
		{Name: "virbr0", Index: 5, Type: 1, MTU: 1500, Kind: "bridge", Flags: noCarr, OperState: "down", Addrs: []string{"192.168.122.1/24"}},
	}
	files := map[string]any{
		"/proc/net/route":           route10,
		"/proc/sys/kernel/hostname": "gpu01\n",
		"/etc/hosts":                "127.0.0.1 localhost\n10.0.0.5 gpu01\n10.0.0.9 gpu02\n",
		"/sys/class/net/eth0/speed": "100000\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	return ft.Tree(t, files, host.FixtureSpec{Env: env, Interfaces: ifs})
}

func runIfaces(t *testing.T, h *host.Host) []checks.Finding {
	t.Helper()
	fs, err := runInterfaces(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	vetFindings(t, fs)
	return fs
}

func TestInterfaceSummaryAndClasses(t *testing.T) {
	fs := runIfaces(t, dockerHost(t, nil, nil))
	s := findTitle(fs, "5 interfaces; default route via eth0; best for NCCL: eth0")
	if s == nil {
		t.Fatalf("summary:%s", titles(fs))
	}
	want := map[string]string{"lo": ClassLoopback, "eth0": ClassPhysical, "docker0": ClassDocker, "vethab12": ClassVeth, "virbr0": ClassVirbr}
	for _, e := range s.Evidence["interfaces"].([]map[string]any) {
		if want[e["name"].(string)] != e["class"] {
			t.Errorf("%s: class %v, want %s", e["name"], e["class"], want[e["name"].(string)])
		}
		if e["name"] == "virbr0" && (e["state"] != "UP,NO-CARRIER" || e["unsuitable"] != "no carrier, a libvirt VM bridge") {
			t.Errorf("virbr0 state: %v", e)
		}
		if e["name"] == "eth0" && (e["speed_mbps"] != 100000 || e["default_route"] != true) {
			t.Errorf("eth0: %v", e)
		}
	}
}

func TestSocketIfname(t *testing.T) {
	multi := map[string]string{"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}
	single := map[string]string{"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name  string
		env   map[string]string
		files map[string]any
		title string
		sev   checks.Severity
		rec   bool
	}{
		{"unset, unknown scope", nil, nil, "NCCL_SOCKET_IFNAME is unset; NCCL's automatic choice includes vethab12", checks.Info, true},
		{"unset, multi-node", multi, nil, "NCCL's automatic choice includes", checks.Warn, true},
		{"unset, single node", single, nil, "NCCL's automatic choice includes", checks.Info, false},
		{"copied name", with(nil, "NCCL_SOCKET_IFNAME", "ens34"), nil, "NCCL_SOCKET_IFNAME=ens34 matches no interface with an address here", checks.Error, true},
		{"docker only", with(nil, "NCCL_SOCKET_IFNAME", "docker"), nil, "selects only unsuitable interfaces: docker0 (a container bridge)", checks.Error, true},
		{"docker only, single node", with(single, "NCCL_SOCKET_IFNAME", "docker"), nil, "selects only unsuitable interfaces", checks.Warn, true},
		{"exclusion list missing virbr", with(nil, "NCCL_SOCKET_IFNAME", "^docker,lo,veth"), nil, "NCCL_SOCKET_IFNAME=^docker,lo,veth also selects virbr0", checks.Warn, true},
		{"exact", with(nil, "NCCL_SOCKET_IFNAME", "=eth0"), nil, "NCCL_SOCKET_IFNAME==eth0 selects eth0 (10.0.0.5, UP,LOWER_UP)", checks.OK, false},
		{"prefix", with(nil, "NCCL_SOCKET_IFNAME", "eth"), nil, "NCCL_SOCKET_IFNAME=eth selects eth0", checks.OK, false},
		{"loopback, unknown scope", with(nil, "NCCL_SOCKET_IFNAME", "lo"), nil, "NCCL_SOCKET_IFNAME=lo selects loopback only", checks.Warn, true},
		{"loopback, multi-node", with(multi, "NCCL_SOCKET_IFNAME", "lo"), nil, "selects loopback, but the job spans machines", checks.Error, true},
		{"loopback, rendezvous elsewhere", with(nil, "NCCL_SOCKET_IFNAME", "lo", "MASTER_ADDR", "10.0.0.9", "MASTER_PORT", "29500"), nil, "selects loopback, but the job spans machines", checks.Error, true},
		{"one character", with(nil, "NCCL_SOCKET_IFNAME", "e"), nil, `NCCL_SOCKET_IFNAME="e" is ignored`, checks.Warn, false},
		{"empty is unset", with(nil, "NCCL_SOCKET_IFNAME", ""), nil, "NCCL_SOCKET_IFNAME is unset; NCCL's automatic choice includes", checks.Info, true},
		{"space in list", with(nil, "NCCL_SOCKET_IFNAME", "eth0, docker0"), nil, `contains spaces`, checks.Warn, false},
		{"=^ order", with(nil, "NCCL_SOCKET_IFNAME", "=^docker"), nil, "NCCL_SOCKET_IFNAME==^docker matches no interface", checks.Error, true},
		{"IPv6 forced", with(nil, "NCCL_SOCKET_IFNAME", "=docker0", "NCCL_SOCKET_FAMILY", "AF_INET6"), nil, "matches no interface with an address here", checks.Error, false},
		{"from /etc/nccl.conf", nil, map[string]any{"/etc/nccl.conf": "NCCL_SOCKET_IFNAME=ens34\n"}, "NCCL_SOCKET_IFNAME=ens34 (from /etc/nccl.conf) matches no interface", checks.Error, true},
		{"environment beats nccl.conf", with(nil, "NCCL_SOCKET_IFNAME", "=eth0"), map[string]any{"/etc/nccl.conf": "NCCL_SOCKET_IFNAME=ens34\n"}, "NCCL_SOCKET_IFNAME==eth0 selects eth0", checks.OK, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := runIfaces(t, dockerHost(t, tt.env, tt.files))
			f := findTitle(fs, tt.title)
			if f == nil {
				t.Fatalf("no finding %q:%s", tt.title, titles(fs))
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %s, want %s (%s)", f.Severity, tt.sev, f.Title)
			}
			rec := recEnv(f)
			if tt.rec != (rec != nil) {
				t.Fatalf("recommendation %v, want one: %v", rec, tt.rec)
			}
			if tt.rec && (rec["NCCL_SOCKET_IFNAME"] != "=eth0" || rec["GLOO_SOCKET_IFNAME"] != "eth0") {
				t.Errorf("recommended %v, want =eth0 / eth0", rec)
			}
			if tt.rec && f.Evidence["portable_alternative"] != "^docker,lo,virbr,veth,br-" {
				t.Errorf("portable alternative %v", f.Evidence["portable_alternative"])
			}
		})
	}
}

func TestNoMatchNamesWhatExists(t *testing.T) {
	fs := runIfaces(t, dockerHost(t, map[string]string{"NCCL_SOCKET_IFNAME": "ens34,ib"}, nil))
	f := findTitle(fs, "matches no interface")
	for _, want := range []string{"No interface here is named like ens34", "No interface here is named like ib", "eth0 (10.0.0.5, UP,LOWER_UP)", "Bootstrap : no socket interface found"} {
		if f == nil || !strings.Contains(f.Detail, want) {
			t.Errorf("detail lacks %q: %v", want, f)
		}
	}
}

func TestNCCLSelectionOrderAndGenerations(t *testing.T) {
	h := dockerHost(t, nil, nil)
	st, err := gather(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	newSel, _ := ncclAuto(st.Ifaces, 0, genNew, "")
	oldSel, _ := ncclAuto(st.Ifaces, 0, genOld, "")
	if got := strings.Join(namesOf(newSel), ","); got != "eth0,vethab12" {
		t.Errorf("NCCL 2.28+ auto = %s (down virbr0 skipped, veth kept for its link-local address)", got)
	}
	if got := strings.Join(namesOf(oldSel), ","); got != "eth0,virbr0,vethab12" {
		t.Errorf("NCCL < 2.28 auto = %s (IPv4 holders first, then IPv6)", got)
	}
	v4, _ := ncclAuto(st.Ifaces, 4, genOld, "")
	if got := strings.Join(namesOf(v4), ","); got != "eth0,virbr0" {
		t.Errorf("AF_INET auto = %s", got)
	}
	// NCCL_COMM_ID's subnet wins over the generic rule.
	cid, why := ncclAuto(st.Ifaces, 0, genOld, "192.168.122.10:5000")
	if len(cid) != 1 || cid[0].Name != "virbr0" || !strings.Contains(why, "NCCL_COMM_ID") {
		t.Errorf("COMM_ID subnet: %v %s", namesOf(cid), why)
	}
}

func TestRecommendationShapes(t *testing.T) {
	tests := []struct {
		name   string
		ifs    []host.NetInterface
		route  string
		env    map[string]string
		want   string
		reason string
	}{
		{"container eth0 is a veth with the default route",
			[]host.NetInterface{loIf, {Name: "eth0", Index: 7, Kind: "veth", Flags: up, OperState: "up", Addrs: []string{"172.17.0.2/16"}}},
			"Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\neth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
			nil, "eth0", "default route"},
		{"host bridge carries the uplink",
			[]host.NetInterface{loIf, {Name: "eno1", Index: 2, Flags: up, OperState: "up", Master: "br0", Parent: "pci:0000:01:00.0"},
				{Name: "br0", Index: 3, Kind: "bridge", Flags: up, OperState: "up", Addrs: []string{"10.1.0.5/24"}}},
			"Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\nbr0\t00000000\t0100010A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
			nil, "br0", "default route"},
		{"rank-0 machine is on the fast network without the default route",
			[]host.NetInterface{loIf, {Name: "eno1", Index: 2, Flags: up, OperState: "up", Addrs: []string{"192.168.1.20/24"}},
				{Name: "ens1f0", Index: 3, Flags: up, OperState: "up", Addrs: []string{"10.50.0.20/16"}}},
			"Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\neno1\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\neno1\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\nens1f0\t0000320A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n",
			map[string]string{"MASTER_ADDR": "10.50.0.1", "MASTER_PORT": "29500"}, "ens1f0", "routes MASTER_ADDR 10.50.0.1"},
		{"no default route: the real NIC, not the VPN",
			[]host.NetInterface{loIf, {Name: "tailscale0", Index: 2, Type: 65534, Kind: "tun", Flags: []string{"UP", "POINTOPOINT", "LOWER_UP"}, OperState: "unknown", Addrs: []string{"100.64.0.3/32"}},
				{Name: "enp5s0", Index: 3, Flags: up, OperState: "up", Addrs: []string{"10.9.0.3/24"}}},
			"", nil, "enp5s0", "best-suited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]any{"/proc/net/route": tt.route}
			h := ft.Tree(t, files, host.FixtureSpec{Interfaces: tt.ifs, Env: tt.env})
			st, err := gather(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			p := st.recommend()
			if p.If == nil || p.If.Name != tt.want || !strings.Contains(p.Why, tt.reason) {
				t.Fatalf("pick %+v, want %s because %s", p, tt.want, tt.reason)
			}
			vetFindings(t, runIfaces(t, h))
		})
	}
}

func TestAutoSelectionWithIPoIB(t *testing.T) {
	ifs := []host.NetInterface{loIf,
		{Name: "eth0", Index: 2, Flags: up, OperState: "up", Addrs: []string{"10.0.0.5/24"}},
		{Name: "ib0", Index: 3, Type: 32, Flags: up, OperState: "up", Addrs: []string{"192.168.100.5/24"}}}
	h := ft.Tree(t, map[string]any{"/proc/net/route": route10}, host.FixtureSpec{Interfaces: ifs})
	fs := runIfaces(t, h)
	f := findTitle(fs, "NCCL_SOCKET_IFNAME is unset; NCCL picks ib0")
	if f == nil || f.Severity != checks.OK || f.Evidence["rule_nccl_2_28_plus"] != "ib* interfaces come first" {
		t.Fatalf("IPoIB preference:%s", titles(fs))
	}
}

func TestGloo(t *testing.T) {
	multi := map[string]string{"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}
	tests := []struct {
		name  string
		env   map[string]string
		hosts string
		title string
		sev   checks.Severity
		rec   string
	}{
		{"missing name", map[string]string{"GLOO_SOCKET_IFNAME": "ens34"}, "", `GLOO_SOCKET_IFNAME=ens34 names interfaces that do not exist here: "ens34"`, checks.Error, "eth0"},
		{"container bridge", map[string]string{"GLOO_SOCKET_IFNAME": "eth0,docker0"}, "", "GLOO_SOCKET_IFNAME=eth0,docker0 uses unsuitable interfaces: docker0", checks.Warn, "eth0"},
		{"fine", map[string]string{"GLOO_SOCKET_IFNAME": "eth0"}, "", "GLOO_SOCKET_IFNAME=eth0 names existing, usable interfaces", checks.OK, ""},
		{"hostname on loopback, multi-node", multi, "127.0.0.1 localhost\n127.0.1.1 gpu01\n", "host name gpu01 resolves to 127.0.1.1: Gloo would use loopback", checks.Warn, "eth0"},
		{"hostname on loopback, one machine", nil, "127.0.1.1 gpu01\n", "Gloo would use loopback", checks.Info, ""},
		{"hostname unresolvable, multi-node", multi, "127.0.0.1 localhost\n", "host name gpu01 does not resolve", checks.Warn, "eth0"},
		{"hostname on a foreign address", multi, "10.0.0.77 gpu01\n", "resolves to no address of this machine", checks.Warn, "eth0"},
		{"hostname on eth0", nil, "", "Gloo would use 10.0.0.5 (eth0, the address of host name gpu01)", checks.OK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var extra map[string]any
			if tt.hosts != "" {
				extra = map[string]any{"/etc/hosts": tt.hosts}
			}
			fs := runIfaces(t, dockerHost(t, tt.env, extra))
			f := findTitle(fs, tt.title)
			if f == nil {
				t.Fatalf("no %q:%s", tt.title, titles(fs))
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %s, want %s", f.Severity, tt.sev)
			}
			if got := recEnv(f)["GLOO_SOCKET_IFNAME"]; got != tt.rec {
				t.Errorf("recommended GLOO_SOCKET_IFNAME=%q, want %q", got, tt.rec)
			}
		})
	}
}

func TestInterfacesWithoutData(t *testing.T) {
	h := ft.Tree(t, map[string]any{"/proc/net/route": route10}, host.FixtureSpec{})
	fs := runIfaces(t, h)
	if len(fs) != 1 || fs[0].Severity != checks.Skipped || !strings.Contains(fs[0].Detail, "interfaces:") {
		t.Fatalf("fixture without interfaces:%s", titles(fs))
	}
	// A host built by hand (no network seam at all) says the same.
	fs, err := runInterfaces(context.Background(), &host.Host{Kind: "fixture"})
	if err != nil || fs[0].Severity != checks.Skipped {
		t.Fatalf("bare host: %v %v", fs, err)
	}
}

func TestClassify(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		ni      host.NetInterface
		virtual *bool
		want    string
	}{
		{host.NetInterface{Name: "lo", Type: 772, Flags: []string{"LOOPBACK"}}, &yes, ClassLoopback},
		{host.NetInterface{Name: "ib0", Type: 32}, &no, ClassIPoIB},
		{host.NetInterface{Name: "docker0", Kind: "bridge"}, &yes, ClassDocker},
		{host.NetInterface{Name: "br-3f2a9c1d7e6b", Kind: "bridge"}, &yes, ClassDocker},
		{host.NetInterface{Name: "br-lan", Kind: "bridge"}, &yes, ClassBridge},
		{host.NetInterface{Name: "podman0", Kind: "bridge"}, &yes, ClassDocker},
		{host.NetInterface{Name: "virbr0", Kind: "bridge"}, &yes, ClassVirbr},
		{host.NetInterface{Name: "cni0", Kind: "bridge"}, &yes, ClassCNI},
		{host.NetInterface{Name: "flannel.1", Kind: "vxlan"}, &yes, ClassCNI},
		{host.NetInterface{Name: "cali1a2b3c4d5e6", Kind: "veth"}, &yes, ClassCNI},
		{host.NetInterface{Name: "tunl0", Kind: "ipip", Type: 768}, &yes, ClassCNI},
		{host.NetInterface{Name: "wg0", Kind: "wireguard", Type: 65534}, &yes, ClassVPN},
		{host.NetInterface{Name: "tailscale0", Kind: "tun", Type: 65534}, &yes, ClassVPN},
		{host.NetInterface{Name: "veth1a2b", Kind: "veth"}, &yes, ClassVeth},
		{host.NetInterface{Name: "bond0", Kind: "bond"}, &yes, ClassBond},
		{host.NetInterface{Name: "eth0.100", Kind: "vlan"}, &yes, ClassVLAN},
		{host.NetInterface{Name: "dummy0", Kind: "dummy"}, &yes, ClassDummy},
		{host.NetInterface{Name: "ifb0", Kind: "ifb"}, &yes, ClassVirtual},
		{host.NetInterface{Name: "eth0", Parent: "virtio:virtio2"}, &no, ClassPhysical},
		{host.NetInterface{Name: "enp65s0f0np0"}, nil, ClassPhysical},
	}
	for _, tt := range tests {
		if got := Classify(tt.ni, tt.virtual); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.ni.Name, got, tt.want)
		}
	}
}
