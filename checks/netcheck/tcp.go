package netcheck

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// Socket is one row of /proc/net/tcp or /proc/net/tcp6.
type Socket struct {
	Local netip.AddrPort
	State int // 0x0A is LISTEN
	UID   int
	Inode uint64
}

const tcpListen = 0x0A

// ParseProcNetTCP parses /proc/net/tcp{,6}: "sl local rem st tx:rx tr:when
// retrnsmt uid timeout inode …", addresses as hex 32-bit words in host
// byte order and the port in network order.
func ParseProcNetTCP(b []byte) []Socket {
	var out []Socket
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[0] == "sl" {
			continue
		}
		ap, ok := hexAddrPort(f[1])
		st, err := strconv.ParseUint(f[3], 16, 8)
		uid, err2 := strconv.Atoi(f[7])
		ino, err3 := strconv.ParseUint(f[9], 10, 64)
		if !ok || err != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, Socket{Local: ap, State: int(st), UID: uid, Inode: ino})
	}
	return out
}

func hexAddrPort(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	b, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, false
	}
	var ip netip.Addr
	switch len(b) {
	case 4:
		var x [4]byte
		binary.BigEndian.PutUint32(x[:], binary.LittleEndian.Uint32(b))
		ip = netip.AddrFrom4(x)
	case 16:
		var x [16]byte
		for w := 0; w < 4; w++ {
			binary.BigEndian.PutUint32(x[4*w:], binary.LittleEndian.Uint32(b[4*w:]))
		}
		ip = netip.AddrFrom16(x).Unmap()
	default:
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, uint16(port)), true
}

// TCPSockets reads the host's IPv4 and IPv6 TCP tables.
func TCPSockets(h *host.Host) ([]Socket, error) {
	var out []Socket
	var firstErr error
	for _, p := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := h.ReadFile(p)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		out = append(out, ParseProcNetTCP(b)...)
	}
	if len(out) == 0 && firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// Proc is a process holding a socket.
type Proc struct {
	PID     int    `json:"pid"`
	Comm    string `json:"comm"`
	Cmdline string `json:"cmdline"`
}

// SocketOwners finds the processes whose file descriptors hold the given
// socket inodes (/proc/PID/fd/N → "socket:[inode]"). Processes whose fd
// directory cannot be read (other users' without root, other PID
// namespaces) are counted in unreadable. It stops early once every inode
// has an owner.
func SocketOwners(ctx context.Context, h *host.Host, inodes map[uint64]bool) (map[uint64][]Proc, int) {
	out := map[uint64][]Proc{}
	unreadable := 0
	ents, err := h.ReadDir("/proc")
	if err != nil {
		return out, 0
	}
	for _, e := range ents {
		if ctx.Err() != nil || len(out) == len(inodes) {
			break
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		dir := "/proc/" + e.Name() + "/fd"
		fds, err := h.ReadDir(dir)
		if err != nil {
			unreadable++
			continue
		}
		held := map[uint64]bool{}
		for _, fd := range fds {
			l, err := h.Readlink(dir + "/" + fd.Name())
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]"), 10, 64)
			if err != nil || !inodes[ino] || held[ino] {
				continue
			}
			held[ino] = true
			out[ino] = append(out[ino], procInfo(ctx, h, pid))
		}
	}
	return out, unreadable
}

func procInfo(ctx context.Context, h *host.Host, pid int) Proc {
	p := Proc{PID: pid}
	if st, err := proctab.ReadStat(h, pid); err == nil {
		p.Comm = st.Comm
	}
	if argv, err := proctab.Cmdline(ctx, h, pid); err == nil {
		c := strings.TrimRight(strings.Join(argv, " "), " ")
		if len(c) > 200 {
			c = strings.ToValidUTF8(c[:200], "") + "…"
		}
		p.Cmdline = c
	}
	return p
}
