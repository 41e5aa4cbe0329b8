package netcheck

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

// A Kubernetes GPU node: 200 pod veths plus the usual suspects.
func busyNode(b *testing.B) *host.Host {
	ifs := []host.NetInterface{loIf, {Name: "eth0", Index: 2, Flags: up, OperState: "up", Addrs: []string{"10.0.0.5/24", "fe80::5/64"}}}
	for i := 0; i < 200; i++ {
		ifs = append(ifs, host.NetInterface{Name: fmt.Sprintf("cali%011x", i), Index: 10 + i, Kind: "veth", Flags: up, OperState: "up", Addrs: []string{fmt.Sprintf("fe80::%x/64", i+1)}})
	}
	ifs = append(ifs, host.NetInterface{Name: "docker0", Index: 300, Kind: "bridge", Flags: noCarr, Addrs: []string{"172.17.0.1/16"}})
	return ft.Tree(b, map[string]any{"/proc/net/route": route10}, host.FixtureSpec{Interfaces: ifs,
		Env: map[string]string{"NCCL_SOCKET_IFNAME": "^docker,lo", "GLOO_SOCKET_IFNAME": "eth0"}})
}

func BenchmarkInterfacesCheck200Veths(b *testing.B) {
	h := busyNode(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := runInterfaces(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRealInterfaceDump(b *testing.B) {
	n := host.RealNet()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := n.Interfaces(); err != nil {
			b.Fatal(err)
		}
	}
}

// The port-owner search on this machine's real /proc, for a socket this
// process holds.
func BenchmarkPortInUseRealProc(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	h := host.Local(host.LocalOptions{NoNVML: true})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if f := portInUse(ctx, h, port, "MASTER_PORT"); f == nil {
			b.Fatal("listener not found")
		}
	}
}
