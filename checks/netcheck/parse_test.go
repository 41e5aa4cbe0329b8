package netcheck

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestIfListMatchesNCCL(t *testing.T) {
	names := []string{"eth0", "eth1", "eth10", "docker0", "lo", "ib0", "virbr0", "veth1a"}
	tests := []struct {
		value string
		want  string // selected names, in list order
	}{
		// Examples from NCCL's env docs (NCCL_SOCKET_IFNAME).
		{"eth", "eth0,eth1,eth10"},
		{"=eth0", "eth0"},
		{"=eth0,eth1", "eth0,eth1"},
		{"^docker", "eth0,eth1,eth10,lo,ib0,virbr0,veth1a"},
		{"^=docker0", "eth0,eth1,eth10,lo,ib0,virbr0,veth1a"},
		{"^docker,lo", "eth0,eth1,eth10,ib0,virbr0,veth1a"},
		{"eth1", "eth1,eth10"}, // a prefix also catches eth10
		{"=eth1", "eth1"},
		{"eth0:1", "eth0"},                                    // ports are ignored for sockets
		{"eth0,,ib", "eth0,ib0"},                              // empty entries are skipped
		{" eth0", ""},                                         // spaces are not trimmed
		{"=^docker", ""},                                      // ^ is only read first
		{"^", "eth0,eth1,eth10,docker0,lo,ib0,virbr0,veth1a"}, // empty exclusion: NCCL matches all, then negates… see below
	}
	for _, tt := range tests {
		l := ParseIfList(tt.value, maxSocketIfs)
		var got []string
		for _, n := range names {
			if l.Selects(n, -1) {
				got = append(got, n)
			}
		}
		want := tt.want
		if tt.value == "^" {
			want = "" // empty list matches everything, XOR exclude: nothing
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%q selects %v, want %s", tt.value, got, want)
		}
	}
}

func TestIfListPorts(t *testing.T) {
	l := ParseIfList("=mlx5_0:1,mlx5_1:1", maxIBDevs)
	for _, c := range []struct {
		dev  string
		port int
		want bool
	}{{"mlx5_0", 1, true}, {"mlx5_0", 2, false}, {"mlx5_1", 1, true}, {"mlx5_10", 1, false}} {
		if l.Selects(c.dev, c.port) != c.want {
			t.Errorf("%s:%d = %v", c.dev, c.port, !c.want)
		}
	}
	// rail/plane fields (NCCL 2.30) do not disturb the port.
	l = ParseIfList("=mlx5_0::0:0,mlx5_1:1:0:1", maxIBDevs)
	if !l.Selects("mlx5_0", 2) || !l.Selects("mlx5_1", 1) || l.Selects("mlx5_1", 2) {
		t.Errorf("rail/plane entries: %+v", l.Entries)
	}
	if l.Canonical() != "=mlx5_0,mlx5_1:1" {
		t.Errorf("canonical %q", l.Canonical())
	}
}

func TestIfListSyntax(t *testing.T) {
	for v, want := range map[string]string{
		"e":           "one-character",
		"eth0, eth1":  "contains spaces",
		"=^docker":    "^ and = only at the start",
		"^docker,=lo": "^ and = only at the start",
		"=eth0":       "",
	} {
		got := strings.Join(ParseIfList(v, maxSocketIfs).Syntax(), "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%q: %q, want %q", v, got, want)
		}
	}
	// NCCL keeps at most MAX_IFS entries.
	if n := len(ParseIfList(strings.Repeat("a,", 40), maxSocketIfs).Entries); n != maxSocketIfs {
		t.Errorf("%d entries kept", n)
	}
}

func FuzzParseIfList(f *testing.F) {
	for _, s := range []string{"eth", "=eth0", "^=docker0,lo", "mlx5_0:1:2:3", "^", "=", ",,,", "a:b:c", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		l := ParseIfList(v, maxSocketIfs)
		if len(l.Entries) > maxSocketIfs {
			t.Fatalf("%d entries", len(l.Entries))
		}
		for _, e := range l.Entries {
			if e.Prefix == "" || strings.Contains(e.Prefix, ",") || strings.Contains(e.Prefix, ":") {
				t.Fatalf("bad entry %q", e.Prefix)
			}
		}
		_ = l.Syntax()
		// Rendering and re-parsing keeps the selection.
		r := ParseIfList(l.Canonical(), maxSocketIfs)
		for _, n := range []string{"eth0", "lo", "docker0", "ib0", ""} {
			if l.Selects(n, -1) != r.Selects(n, -1) {
				t.Fatalf("%q vs canonical %q differ on %q", v, l.Canonical(), n)
			}
		}
	})
}

// Taken from this development VM (firecracker guest) and a docker host.
const (
	procRoute = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
		"docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n" +
		"eth1\t0000320A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n" +
		"eth1\t0001320A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t50\n" +
		"bad\tzz\t00\n"
	procRoute6 = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n" +
		"fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001     eth0\n" +
		"00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0\n" +
		"00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo\n" +
		"fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000003 00000000 80200001     eth0\n" +
		"00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n"
)

func TestRoutes(t *testing.T) {
	rs := append(ParseRoute4([]byte(procRoute)), ParseRoute6([]byte(procRoute6))...)
	if len(rs) != 8 {
		t.Fatalf("%d routes: %+v", len(rs), rs)
	}
	d := DefaultRoutes(rs)
	if len(d) != 2 || d[0].Iface != "eth0" || d[0].Gateway.String() != "192.0.2.1" || d[1].Gateway.String() != "fd00::1" {
		t.Errorf("defaults: %+v", d)
	}
	for ip, want := range map[string]string{
		"192.0.2.77": "eth0", "8.8.8.8": "eth0 via 192.0.2.1", "172.17.0.3": "docker0",
		"10.50.1.9": "eth1", // the /24 beats the /16 on the same interface
		"10.50.9.9": "eth1", "fd00::99": "eth0", "2001:db8::1": "eth0 via fd00::1",
	} {
		r, ok := Lookup(rs, netip.MustParseAddr(ip))
		got := r.Iface
		if r.Gateway.IsValid() {
			got += " via " + r.Gateway.String()
		}
		if !ok || got != want {
			t.Errorf("%s → %q, want %q", ip, got, want)
		}
	}
	if r, _ := Lookup(rs, netip.MustParseAddr("10.50.1.9")); r.Dst.Bits() != 24 {
		t.Errorf("longest prefix: %+v", r)
	}
}

func TestProcNetTCP(t *testing.T) {
	v4 := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 575 1 00000000a20389bc 100 0 0 10 0\n" +
		"   1: 0100007F:7384 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 91234 1 0000000000000000 100 0 0 10 0\n" +
		"   2: 0500000A:B3A2 0900000A:7384 01 00000000:00000000 00:00000000 00000000  1000        0 91240 1 0000000000000000 20 4 30 10 -1\n"
	v6 := "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 00000000000000000000000000000000:7384 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 91300 1 0000000000000000 100 0 0 10 0\n" +
		"   1: 0000000000000000FFFF00000100007F:9C40 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0\n" +
		"   2: B80D0120000000000000000001000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 778 1 0000000000000000 100 0 0 10 0\n"
	s := append(ParseProcNetTCP([]byte(v4)), ParseProcNetTCP([]byte(v6))...)
	want := []string{"0.0.0.0:2024 0A uid 0 ino 575", "127.0.0.1:29572 0A uid 1000 ino 91234", "10.0.0.5:45986 01 uid 1000 ino 91240",
		"[::]:29572 0A uid 1000 ino 91300", "127.0.0.1:40000 0A uid 0 ino 777", "[2001:db8::1]:22 0A uid 0 ino 778"}
	if len(s) != len(want) {
		t.Fatalf("%d sockets: %+v", len(s), s)
	}
	for i, w := range want {
		got := fmt.Sprintf("%s %02X uid %d ino %d", s[i].Local, s[i].State, s[i].UID, s[i].Inode)
		if got != w {
			t.Errorf("socket %d: %s, want %s", i, got, w)
		}
	}
}

func FuzzProcNet(f *testing.F) {
	f.Add([]byte(procRoute), []byte(procRoute6))
	f.Add([]byte("Iface\n\t\t\n"), []byte("zz 00\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		rs := append(ParseRoute4(a), ParseRoute6(b)...)
		_ = DefaultRoutes(rs)
		_, _ = Lookup(rs, netip.MustParseAddr("10.0.0.1"))
		_ = ParseProcNetTCP(a)
		_ = ParseProcNetTCP(b)
	})
}
