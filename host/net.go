package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// ErrNoNetwork is returned by the network seam when a host cannot answer:
// a fixture without interface data, a check host built by hand.
var ErrNoNetwork = errors.New("no network data for this host")

// NetInterface is one network interface as the kernel reports it (the
// rtnetlink view `ip -d addr` prints), in this network namespace.
type NetInterface struct {
	Name  string `yaml:"name" json:"name"`
	Index int    `yaml:"index" json:"index"`
	MTU   int    `yaml:"mtu" json:"mtu"`
	// Type is the ARPHRD_* link type: 1 Ethernet, 32 InfiniBand (IPoIB),
	// 772 loopback, 65534 none (tun, WireGuard), 768/776/778 tunnels.
	Type int `yaml:"type" json:"type"`
	// Flags are the IFF_* flags by their ip(8) names: UP, BROADCAST,
	// LOOPBACK, POINTOPOINT, RUNNING, NOARP, MULTICAST, LOWER_UP, DORMANT …
	Flags []string `yaml:"flags" json:"flags"`
	// OperState is RFC 2863 operational state: up, down, unknown, dormant,
	// lowerlayerdown, notpresent, testing.
	OperState string `yaml:"operstate" json:"operstate"`
	// Addrs are the interface's addresses in CIDR form (10.0.0.5/24, fe80::1/64).
	Addrs []string `yaml:"addrs" json:"addrs"`
	// Kind is the rtnetlink link kind (IFLA_INFO_KIND): bridge, veth, dummy,
	// tun, vlan, bond, wireguard, ipoib, vxlan …; "" for plain devices
	// such as physical NICs and lo.
	Kind string `yaml:"kind" json:"kind"`
	// Master is the bridge or bond this interface is enslaved to.
	Master string `yaml:"master" json:"master"`
	// Parent is the bus device behind the interface ("pci:0000:3b:00.0"),
	// empty for virtual interfaces or when the kernel does not say.
	Parent string `yaml:"parent" json:"parent"`
	// HardwareAddr is the link-layer address.
	HardwareAddr string `yaml:"hwaddr" json:"hwaddr"`
}

// HasFlag reports whether the interface carries an IFF_* flag (ip(8) name).
func (i NetInterface) HasFlag(name string) bool {
	for _, f := range i.Flags {
		if strings.EqualFold(f, name) {
			return true
		}
	}
	return false
}

// Net is the part of the machine that cannot be read from files: the
// interface list with addresses, name resolution and TCP connects. Every
// function must honour its context or timeout; none may block forever.
type Net struct {
	// Interfaces lists the interfaces of this network namespace.
	Interfaces func() ([]NetInterface, error)
	// Resolve looks a host name up (numeric addresses resolve to themselves).
	Resolve func(ctx context.Context, name string) ([]string, error)
	// Dial opens a TCP connection to address (host:port) and closes it at
	// once; it returns the local address the kernel used.
	Dial func(ctx context.Context, address string, timeout time.Duration) (local string, err error)
	// SourceFor returns the source address the kernel would use to reach ip
	// (a UDP connect, which sends nothing). Nil when unknown.
	SourceFor func(ip string) (string, error)
}

// Interfaces lists the host's network interfaces.
func (h *Host) Interfaces() ([]NetInterface, error) {
	if h.Net.Interfaces == nil {
		return nil, ErrNoNetwork
	}
	return h.Net.Interfaces()
}

// Resolve looks up name with the host's resolver, bounded by ctx.
func (h *Host) Resolve(ctx context.Context, name string) ([]string, error) {
	if h.Net.Resolve == nil {
		return nil, ErrNoNetwork
	}
	return h.Net.Resolve(ctx, name)
}

// Dial tests a TCP connection to address within timeout.
func (h *Host) Dial(ctx context.Context, address string, timeout time.Duration) (string, error) {
	if h.Net.Dial == nil {
		return "", ErrNoNetwork
	}
	return h.Net.Dial(ctx, address, timeout)
}

// SourceFor asks the kernel which source address it would use to reach ip.
func (h *Host) SourceFor(ip string) (string, error) {
	if h.Net.SourceFor == nil {
		return "", ErrNoNetwork
	}
	return h.Net.SourceFor(ip)
}

// SplitPeer validates a --peer value (HOST:PORT, [v6]:PORT).
func SplitPeer(peer string) (hostname string, port int, err error) {
	hs, ps, err := net.SplitHostPort(strings.TrimSpace(peer))
	if err != nil {
		return "", 0, fmt.Errorf("--peer %q: want HOST:PORT (e.g. node0:29500 or [fd00::1]:29500)", peer)
	}
	if hs == "" {
		return "", 0, fmt.Errorf("--peer %q: the host part is empty", peer)
	}
	var p int
	if _, err := fmt.Sscanf(ps, "%d", &p); err != nil || p < 1 || p > 65535 || fmt.Sprint(p) != ps {
		return "", 0, fmt.Errorf("--peer %q: port %q is not a number from 1 to 65535", peer, ps)
	}
	return hs, p, nil
}

// ---- the real machine --------------------------------------------------

// RealNet reads the kernel's interface table over rtnetlink and uses Go's
// resolver and dialer.
func RealNet() Net {
	return Net{
		Interfaces: realInterfaces,
		Resolve: func(ctx context.Context, name string) ([]string, error) {
			return net.DefaultResolver.LookupHost(ctx, name)
		},
		Dial: func(ctx context.Context, address string, timeout time.Duration) (string, error) {
			d := net.Dialer{Timeout: timeout}
			c, err := d.DialContext(ctx, "tcp", address)
			if err != nil {
				return "", err
			}
			local := c.LocalAddr().String()
			_ = c.Close()
			return local, nil
		},
		SourceFor: func(ip string) (string, error) {
			// Connecting a UDP socket only picks a route and source
			// address; no packet leaves the machine.
			c, err := net.Dial("udp", net.JoinHostPort(ip, "9"))
			if err != nil {
				return "", err
			}
			defer c.Close()
			a, ok := c.LocalAddr().(*net.UDPAddr)
			if !ok {
				return "", fmt.Errorf("unexpected local address %v", c.LocalAddr())
			}
			return a.IP.String(), nil
		},
	}
}

// rtnetlink constants not exported by package syscall.
const (
	iflaIfname        = 3
	iflaMTU           = 4
	iflaMaster        = 10
	iflaOperstate     = 16
	iflaLinkinfo      = 18
	iflaInfoKind      = 1
	iflaParentDevName = 56
	iflaParentDevBus  = 57
	iflaAddress       = 1
	ifaAddress        = 1
	ifaLocal          = 2
	nlaTypeMask       = 0x3fff // strips NLA_F_NESTED / NLA_F_NET_BYTEORDER
)

var ifFlagNames = []struct {
	bit  uint32
	name string
}{
	{0x1, "UP"}, {0x2, "BROADCAST"}, {0x8, "LOOPBACK"}, {0x10, "POINTOPOINT"}, {0x40, "RUNNING"},
	{0x80, "NOARP"}, {0x100, "PROMISC"}, {0x400, "MASTER"}, {0x800, "SLAVE"}, {0x1000, "MULTICAST"},
	{0x10000, "LOWER_UP"}, {0x20000, "DORMANT"},
}

var operStates = []string{"unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up"}

func realInterfaces() ([]NetInterface, error) {
	links, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("rtnetlink link dump: %w", err)
	}
	ifs, err := ParseLinkDump(links)
	if err != nil {
		return nil, err
	}
	addrs, err := syscall.NetlinkRIB(syscall.RTM_GETADDR, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("rtnetlink address dump: %w", err)
	}
	if err := ParseAddrDump(addrs, ifs); err != nil {
		return nil, err
	}
	return ifs, nil
}

type rtattr struct {
	typ  uint16
	data []byte
}

func parseAttrs(b []byte) []rtattr {
	var out []rtattr
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask
		if l < 4 || l > len(b) {
			break
		}
		out = append(out, rtattr{typ: t, data: b[4:l]})
		adv := (l + 3) &^ 3
		if adv > len(b) {
			break
		}
		b = b[adv:]
	}
	return out
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// ParseLinkDump decodes an RTM_GETLINK dump (as syscall.NetlinkRIB returns
// it) into interfaces ordered by index. Exported for fuzzing.
func ParseLinkDump(b []byte) ([]NetInterface, error) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return nil, fmt.Errorf("rtnetlink link dump: %w", err)
	}
	var out []NetInterface
	masters := map[int]int{} // interface index → master index
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		d := m.Data
		ifi := NetInterface{
			Type:  int(binary.NativeEndian.Uint16(d[2:4])),
			Index: int(int32(binary.NativeEndian.Uint32(d[4:8]))),
		}
		flags := binary.NativeEndian.Uint32(d[8:12])
		for _, f := range ifFlagNames {
			if flags&f.bit != 0 {
				ifi.Flags = append(ifi.Flags, f.name)
			}
		}
		var parentBus, parentDev string
		for _, a := range parseAttrs(d[syscall.SizeofIfInfomsg:]) {
			switch a.typ {
			case iflaIfname:
				ifi.Name = cstring(a.data)
			case iflaMTU:
				if len(a.data) >= 4 {
					ifi.MTU = int(binary.NativeEndian.Uint32(a.data))
				}
			case iflaMaster:
				if len(a.data) >= 4 {
					masters[ifi.Index] = int(binary.NativeEndian.Uint32(a.data))
				}
			case iflaOperstate:
				if len(a.data) >= 1 && int(a.data[0]) < len(operStates) {
					ifi.OperState = operStates[a.data[0]]
				}
			case iflaAddress:
				ifi.HardwareAddr = net.HardwareAddr(a.data).String()
			case iflaLinkinfo:
				for _, in := range parseAttrs(a.data) {
					if in.typ == iflaInfoKind {
						ifi.Kind = cstring(in.data)
					}
				}
			case iflaParentDevName:
				parentDev = cstring(a.data)
			case iflaParentDevBus:
				parentBus = cstring(a.data)
			}
		}
		if parentDev != "" {
			ifi.Parent = strings.TrimPrefix(parentBus+":"+parentDev, ":")
		}
		if ifi.Name != "" {
			out = append(out, ifi)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	byIndex := map[int]string{}
	for _, i := range out {
		byIndex[i.Index] = i.Name
	}
	for k := range out {
		if mi, ok := masters[out[k].Index]; ok {
			out[k].Master = byIndex[mi]
		}
	}
	return out, nil
}

// ParseAddrDump decodes an RTM_GETADDR dump and appends each address, in
// CIDR form, to the interface with its index (IPv4 first, in dump order,
// like getifaddrs).
func ParseAddrDump(b []byte, ifs []NetInterface) error {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return fmt.Errorf("rtnetlink address dump: %w", err)
	}
	pos := map[int]int{}
	for k, i := range ifs {
		pos[i.Index] = k
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWADDR || len(m.Data) < syscall.SizeofIfAddrmsg {
			continue
		}
		d := m.Data
		family, plen := d[0], int(d[1])
		idx := int(binary.NativeEndian.Uint32(d[4:8]))
		var addr, local []byte
		for _, a := range parseAttrs(d[syscall.SizeofIfAddrmsg:]) {
			switch a.typ {
			case ifaAddress:
				addr = a.data
			case ifaLocal:
				local = a.data
			}
		}
		// IFA_LOCAL is this host's address; IFA_ADDRESS is the peer on
		// point-to-point links.
		if family == syscall.AF_INET && local != nil {
			addr = local
		}
		ip, ok := netip.AddrFromSlice(addr)
		if !ok {
			continue
		}
		k, known := pos[idx]
		if !known || plen > ip.BitLen() {
			continue
		}
		ifs[k].Addrs = append(ifs[k].Addrs, netip.PrefixFrom(ip, plen).String())
	}
	return nil
}

// ---- fixtures ----------------------------------------------------------

// Connect results a fixture may give for an address in FixtureSpec.Connect.
const (
	ConnectOK          = "ok"
	ConnectRefused     = "refused"
	ConnectTimeout     = "timeout"
	ConnectUnreachable = "unreachable"
)

type timeoutError struct{ addr string }

func (e timeoutError) Error() string   { return "i/o timeout" }
func (e timeoutError) Timeout() bool   { return true }
func (e timeoutError) Temporary() bool { return true }
func (e timeoutError) Unwrap() error   { return os.ErrDeadlineExceeded }

func fixtureNet(root string, spec FixtureSpec) Net {
	n := Net{
		Resolve: func(ctx context.Context, name string) ([]string, error) {
			if _, err := netip.ParseAddr(name); err == nil {
				return []string{name}, nil
			}
			if a, ok := spec.Hosts[name]; ok {
				return append([]string(nil), a...), nil
			}
			if a := etcHosts(filepath.Join(root, "etc", "hosts"), name); len(a) > 0 {
				return a, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
		},
		Dial: func(ctx context.Context, address string, timeout time.Duration) (string, error) {
			res, ok := spec.Connect[address]
			if !ok {
				return "", fmt.Errorf("dial %s: %w (no connect result in the fixture)", address, ErrNoNetwork)
			}
			opErr := func(errno syscall.Errno) error {
				return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
			}
			switch res {
			case ConnectOK:
				return "", nil
			case ConnectRefused:
				return "", opErr(syscall.ECONNREFUSED)
			case ConnectUnreachable:
				return "", opErr(syscall.EHOSTUNREACH)
			case ConnectTimeout:
				return "", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutError{address}}
			}
			return "", fmt.Errorf("fixture connect result %q for %s: want ok, refused, timeout or unreachable", res, address)
		},
	}
	if spec.Interfaces != nil {
		ifs := make([]NetInterface, len(spec.Interfaces))
		for k, i := range spec.Interfaces {
			i.Flags = append([]string(nil), i.Flags...)
			if i.Index == 0 {
				i.Index = k + 1
			}
			// ip(8) never prints RUNNING; the kernel sets it when the
			// operational state is up or unknown.
			st := strings.ToLower(i.OperState)
			if i.HasFlag("UP") && i.HasFlag("LOWER_UP") && !i.HasFlag("RUNNING") && (st == "" || st == "up" || st == "unknown") {
				i.Flags = append(i.Flags, "RUNNING")
			}
			ifs[k] = i
		}
		n.Interfaces = func() ([]NetInterface, error) {
			out := make([]NetInterface, len(ifs))
			for k, i := range ifs {
				i.Flags = append([]string(nil), i.Flags...)
				i.Addrs = append([]string(nil), i.Addrs...)
				out[k] = i
			}
			return out, nil
		}
	}
	return n
}

// etcHosts returns the addresses /etc/hosts gives name, in file order.
func etcHosts(path, name string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fs := strings.Fields(line)
		if len(fs) < 2 {
			continue
		}
		for _, n := range fs[1:] {
			if strings.EqualFold(n, name) {
				out = append(out, fs[0])
				break
			}
		}
	}
	return out
}
