package host

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The rtnetlink reader must agree with Go's own view of the interfaces.
func TestRealInterfacesMatchGo(t *testing.T) {
	ifs, err := RealNet().Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	goIfs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(ifs) != len(goIfs) {
		t.Fatalf("%d interfaces, Go sees %d", len(ifs), len(goIfs))
	}
	byName := map[string]NetInterface{}
	for _, i := range ifs {
		byName[i.Name] = i
	}
	for _, g := range goIfs {
		i, ok := byName[g.Name]
		if !ok || i.Index != g.Index || i.MTU != g.MTU {
			t.Errorf("%s: %+v vs Go %+v", g.Name, i, g)
			continue
		}
		if (g.Flags&net.FlagUp != 0) != i.HasFlag("UP") || (g.Flags&net.FlagLoopback != 0) != i.HasFlag("LOOPBACK") || (g.Flags&net.FlagRunning != 0) != i.HasFlag("RUNNING") {
			t.Errorf("%s: flags %v vs Go %v", g.Name, i.Flags, g.Flags)
		}
		addrs, _ := g.Addrs()
		var want []string
		for _, a := range addrs {
			want = append(want, a.String())
		}
		got := append([]string(nil), i.Addrs...)
		sort.Strings(want)
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: addrs %v, Go %v", g.Name, got, want)
		}
	}
	lo, ok := byName["lo"]
	if !ok || lo.Type != 772 || lo.Kind != "" || !strings.Contains(strings.Join(lo.Addrs, " "), "127.0.0.1/8") {
		t.Errorf("lo: %+v", lo)
	}
}

func TestRealResolveDialSource(t *testing.T) {
	n := RealNet()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	local, err := n.Dial(context.Background(), ln.Addr().String(), time.Second)
	if err != nil || !strings.HasPrefix(local, "127.0.0.1:") {
		t.Errorf("dial: %q %v", local, err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := n.Dial(context.Background(), addr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("closed port: %v", err)
	}
	if src, err := n.SourceFor("127.0.0.1"); err != nil || src != "127.0.0.1" {
		t.Errorf("source for loopback: %q %v", src, err)
	}
	if a, err := n.Resolve(context.Background(), "127.0.0.1"); err != nil || len(a) != 1 {
		t.Errorf("numeric resolve: %v %v", a, err)
	}
}

func TestFixtureNet(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/hosts"), []byte("# comment\n10.0.0.9 node9 node9.cluster # trailing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := FixtureSpec{
		Interfaces: []NetInterface{{Name: "lo", Flags: []string{"UP", "LOOPBACK", "LOWER_UP"}, OperState: "unknown"},
			{Name: "eth0", Flags: []string{"UP", "LOWER_UP"}}, {Name: "eth1", Flags: []string{"UP"}}, {Name: "dorm0", Flags: []string{"UP", "LOWER_UP"}, OperState: "dormant"}},
		Hosts:   map[string][]string{"node0": {"10.0.0.1"}},
		Connect: map[string]string{"a:1": "ok", "a:2": "refused", "a:3": "timeout", "a:4": "unreachable", "a:5": "bogus"},
	}
	h, err := FromSpec(root, spec)
	if err != nil {
		t.Fatal(err)
	}
	ifs, err := h.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false, false} {
		if ifs[i].Index != i+1 || ifs[i].HasFlag("RUNNING") != want {
			t.Errorf("%s: %+v (RUNNING want %v)", ifs[i].Name, ifs[i], want)
		}
	}
	ifs[0].Flags[0] = "changed"
	if again, _ := h.Interfaces(); again[0].Flags[0] != "UP" {
		t.Error("callers can change the fixture's interfaces")
	}
	ctx := context.Background()
	for name, want := range map[string]string{"node0": "10.0.0.1", "node9.cluster": "10.0.0.9", "10.1.2.3": "10.1.2.3", "fd00::1": "fd00::1"} {
		if a, err := h.Resolve(ctx, name); err != nil || len(a) != 1 || a[0] != want {
			t.Errorf("resolve %s: %v %v", name, a, err)
		}
	}
	var dnsErr *net.DNSError
	if _, err := h.Resolve(ctx, "nowhere"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("unknown name: %v", err)
	}
	checkDial := func(addr string, ok func(error) bool) {
		t.Helper()
		if _, err := h.Dial(ctx, addr, time.Second); !ok(err) {
			t.Errorf("dial %s: %v", addr, err)
		}
	}
	checkDial("a:1", func(err error) bool { return err == nil })
	checkDial("a:2", func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) })
	checkDial("a:3", func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout() && errors.Is(err, os.ErrDeadlineExceeded)
	})
	checkDial("a:4", func(err error) bool { return errors.Is(err, syscall.EHOSTUNREACH) })
	checkDial("a:5", func(err error) bool { return err != nil && strings.Contains(err.Error(), "want ok, refused") })
	checkDial("a:6", func(err error) bool { return errors.Is(err, ErrNoNetwork) })
	if _, err := h.SourceFor("10.0.0.1"); !errors.Is(err, ErrNoNetwork) {
		t.Errorf("fixture SourceFor: %v", err)
	}
	// Without an interface list the fixture says so.
	bare, _ := FromSpec(root, FixtureSpec{})
	if _, err := bare.Interfaces(); !errors.Is(err, ErrNoNetwork) {
		t.Errorf("no interfaces: %v", err)
	}
	if _, err := (&Host{}).Dial(ctx, "a:1", time.Second); !errors.Is(err, ErrNoNetwork) {
		t.Errorf("zero host: %v", err)
	}
}

func TestSplitPeer(t *testing.T) {
	for in, want := range map[string]string{
		"node0:29500": "node0 29500", "10.0.0.1:1": "10.0.0.1 1", "[fd00::1]:65535": "fd00::1 65535", " node0:29500 ": "node0 29500",
		"node0": "", ":29500": "", "node0:0": "", "node0:65536": "", "node0:29500x": "", "node0:+1": "", "fd00::1:29500": "",
	} {
		h, p, err := SplitPeer(in)
		got := ""
		if err == nil {
			got = h + " " + strconv.Itoa(p)
		}
		if got != want {
			t.Errorf("SplitPeer(%q) = %q (%v), want %q", in, got, err, want)
		}
	}
}

func FuzzParseNetlink(f *testing.F) {
	if links, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC); err == nil {
		f.Add(links)
	}
	if addrs, err := syscall.NetlinkRIB(syscall.RTM_GETADDR, syscall.AF_UNSPEC); err == nil {
		f.Add(addrs)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ifs, _ := ParseLinkDump(b)
		ifs = append(ifs, NetInterface{Name: "x", Index: 1})
		_ = ParseAddrDump(b, ifs)
	})
}
