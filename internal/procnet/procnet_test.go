package procnet

import (
	"net"
	"os"
	"testing"

	"github.com/ncclwiz/ncclwiz/host"
)

// Lines as Linux 6.18 wrote them for a torch 1.13 rank whose launcher was
// killed (its two sockets to the store's port 29611 in CLOSE-WAIT) and the
// store's listener, IPv4 and IPv4-mapped IPv6.
func TestParse(t *testing.T) {
	text := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:6F4B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 163144 1 0000000000000000 100 0 0 10 0
garbage line
`
	text6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:A86E 0000000000000000FFFF00000100007F:73AB 08 00000000:00000001 00:00000000 00000000     0        0 162557 1 0000000000000000 20 4 30 10 -1
`
	got := append(Parse(text), Parse(text6)...)
	if len(got) != 2 {
		t.Fatalf("got %+v", got)
	}
	if got[0].Local.String() != "127.0.0.1:28491" || got[0].State != "LISTEN" || got[0].Inode != 163144 {
		t.Errorf("listener %+v", got[0])
	}
	if got[1].Local.String() != "127.0.0.1:43118" || got[1].Remote.Port() != 29611 || got[1].State != "CLOSE-WAIT" || got[1].Inode != 162557 {
		t.Errorf("close-wait %+v", got[1])
	}
}

// TestHeldReal: a listener this test opens is among its own held sockets.
func TestHeldReal(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	h := host.Local(host.LocalOptions{})
	ss, err := Held(h, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.State == "LISTEN" && int(s.Local.Port()) == port {
			return
		}
	}
	t.Fatalf("listener on %d not among %+v", port, ss)
}

// TestKernelNetlink: the kernel's own netlink sockets (port id 0) of a
// namespace's /proc/net/netlink, which tell two namespaces apart for a
// user who cannot read another user's ns/net link.
func TestKernelNetlink(t *testing.T) {
	text := `sk               Eth Pid        Groups   Rmem     Wmem     Dump  Locks    Drops    Inode
00000000d374912c 0   0          00000000 0        0        0     2        0        4
00000000b0a8f6f6 4   0          00000000 0        0        0     2        0        1437
0000000012345678 0   2771       00000011 0        0        0     2        0        55012
short line
`
	got := KernelNetlink(text)
	if len(got) != 2 || !got[4] || !got[1437] {
		t.Errorf("KernelNetlink = %v, want inodes 4 and 1437 (not the process's socket 55012)", got)
	}
}
