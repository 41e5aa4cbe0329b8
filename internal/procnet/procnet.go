// Package procnet reads TCP sockets through /proc: /proc/PID/net/tcp and
// tcp6 list the sockets of PID's network namespace (so a container's, from
// the host), and /proc/PID/fd names the socket inodes PID holds. It answers
// two questions of a hang or a leftover rank: which process listens on the
// job's rendezvous port, and whether a rank's connection to it was closed
// by the other end (CLOSE-WAIT: the store, i.e. the launcher, is gone).
package procnet

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/host"
)

// Socket is one TCP socket of a network namespace.
type Socket struct {
	Local, Remote netip.AddrPort
	// State is the kernel's name, as ss prints it: ESTABLISHED, LISTEN,
	// CLOSE-WAIT …
	State string
	Inode uint64
}

// states are the TCP states of include/net/tcp_states.h, numbered from 1.
var states = []string{"", "ESTABLISHED", "SYN-SENT", "SYN-RECV", "FIN-WAIT-1", "FIN-WAIT-2", "TIME-WAIT",
	"CLOSE", "CLOSE-WAIT", "LAST-ACK", "LISTEN", "CLOSING", "NEW-SYN-RECV"}

// TCP returns the TCP sockets (IPv4 and IPv6) of pid's network namespace.
// The files are readable by every user.
func TCP(h *host.Host, pid int) ([]Socket, error) {
	var out []Socket
	var firstErr error
	read := 0
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := h.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/" + f)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		read++
		out = append(out, Parse(string(b))...)
	}
	if read == 0 {
		return nil, fmt.Errorf("TCP sockets of pid %d: %w", pid, firstErr)
	}
	return out, nil
}

// Parse reads the text of a /proc/net/tcp or tcp6 file; malformed lines
// are skipped.
func Parse(text string) []Socket {
	var out []Socket
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		local, ok1 := parseAddr(f[1])
		remote, ok2 := parseAddr(f[2])
		st, err := strconv.ParseUint(f[3], 16, 8)
		inode, err2 := strconv.ParseUint(f[9], 10, 64)
		if !ok1 || !ok2 || err != nil || err2 != nil {
			continue
		}
		s := Socket{Local: local, Remote: remote, Inode: inode, State: "UNKNOWN"}
		if int(st) < len(states) && st > 0 {
			s.State = states[st]
		}
		out = append(out, s)
	}
	return out
}

// parseAddr reads "0100007F:6F4B" (IPv4) or 32 hex digits and a port
// (IPv6): the address is in 32-bit words in the machine's byte order
// (little-endian on every architecture ncclwiz ships for), the port big.
func parseAddr(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	for i := 0; i+4 <= len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	addr, ok := netip.AddrFromSlice(raw)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
}

// Inodes returns the socket inodes pid holds open, each with one fd that
// holds it. It needs the process's user or root (fd links).
func Inodes(h *host.Host, pid int) (map[uint64]int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := h.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[uint64]int{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		l, err := h.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		if v, ok := strings.CutPrefix(l, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 64); err == nil {
				if _, seen := out[n]; !seen {
					out[n] = fd
				}
			}
		}
	}
	return out, nil
}

// Held returns the sockets of pid: its namespace's table joined with the
// inodes it holds.
func Held(h *host.Host, pid int) ([]Socket, error) {
	inodes, err := Inodes(h, pid)
	if err != nil {
		return nil, err
	}
	all, err := TCP(h, pid)
	if err != nil {
		return nil, err
	}
	var out []Socket
	for _, s := range all {
		if _, ok := inodes[s.Inode]; ok && s.Inode != 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

// Namespace returns pid's network namespace link, e.g. "net:[4026531840]".
func Namespace(h *host.Host, pid int) (string, error) {
	return h.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
}

// SameNamespace says whether pid's network namespace is ncclwiz's own when
// its ns/net link cannot be read (another user's process, without root):
// each namespace has kernel netlink sockets of its own (Pid 0 in
// /proc/PID/net/netlink, which every user may read), so the same inodes
// mean the same namespace. known is false when either file is unreadable
// or lists no kernel socket.
func SameNamespace(h *host.Host, pid int) (same, known bool) {
	ours, err1 := h.ReadFile("/proc/self/net/netlink")
	theirs, err2 := h.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/netlink")
	if err1 != nil || err2 != nil {
		return false, false
	}
	a, b := KernelNetlink(string(ours)), KernelNetlink(string(theirs))
	if len(a) == 0 || len(b) == 0 {
		return false, false
	}
	for ino := range b {
		if a[ino] {
			return true, true
		}
	}
	return false, true
}

// KernelNetlink returns the inodes of the kernel's own netlink sockets
// (port id 0) in the text of a /proc/net/netlink file:
// "sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode".
func KernelNetlink(text string) map[uint64]bool {
	out := map[uint64]bool{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[2] != "0" {
			continue
		}
		if ino, err := strconv.ParseUint(f[9], 10, 64); err == nil && ino != 0 {
			out[ino] = true
		}
	}
	return out
}
