// Package sshnodes builds pretend cluster nodes for tests: each node is a
// network namespace on a private bridge in a switch namespace
// (10.199.X.0/24, traffic stays on this machine) running its own Debian sshd with host keys and an
// authorized key made in a temp dir, and the test's ssh client config.
// Differences are planted per node: environment (sshd SetEnv), a small
// /dev/shm (a tmpfs in the node's mount namespace), another MTU, sshd
// down (refused) or a listener that never speaks (timeout).
package sshnodes

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Spec plants one node's differences.
type Spec struct {
	Name    string
	Env     map[string]string // sshd SetEnv: the node's login environment
	ShmSize string            // tmpfs size for the node's own /dev/shm ("64m"); empty: the machine's
	MTU     int               // eth0's MTU (default 1500)
	Down    bool              // address up, no sshd: connection refused
	Hang    bool              // accepts TCP and never speaks
	NoAuth  bool              // sshd up, but the test's key is not authorized
	// Blackhole names nodes whose address this node drops packets to
	// (ip route add blackhole): connections between them time out.
	Blackhole []string
}

// Cluster is the set of running nodes.
type Cluster struct {
	Dir       string // temp dir with keys, configs, known_hosts
	SSHConfig string // ssh -F file naming every node
	Addr      map[string]string
}

// Skip skips t unless root with sshd, ssh, ssh-keygen and ip netns.
func Skip(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, sshd); CI runs as root")
	}
	for _, p := range []string{"/usr/sbin/sshd", "ssh", "ssh-keygen", "ip"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("needs %s (apt-get install openssh-server openssh-client iproute2)", p)
		}
	}
}

// Start builds the nodes; everything is removed by t.Cleanup.
func Start(t testing.TB, specs []Spec) *Cluster {
	t.Helper()
	Skip(t)
	tag := fmt.Sprintf("%x", os.Getpid()%0xfffff)
	subnet := freeSubnet(t)
	dir := t.TempDir()
	c := &Cluster{Dir: dir, Addr: map[string]string{}}
	if err := probeNetns(); err != nil {
		t.Skipf("network namespaces unavailable: %v", err)
	}
	// The bridge lives in a "switch" namespace of its own: on a Docker
	// host br_netfilter sends bridged frames through the root namespace's
	// iptables, whose FORWARD policy is DROP; a fresh namespace has no
	// rules, so node-to-node traffic flows without touching the firewall.
	sw := "ncwcl" + tag + "-sw"
	run(t, "ip", "netns", "add", sw)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", sw).Run() })
	swRun := func(args ...string) { run(t, append([]string{"ip", "netns", "exec", sw}, args...)...) }
	swRun("ip", "link", "add", "br0", "type", "bridge")
	swRun("ip", "link", "set", "br0", "up")
	rootIf, swIf := "ncwc"+tag+"r", "ncwc"+tag+"s"
	run(t, "ip", "link", "add", rootIf, "type", "veth", "peer", "name", swIf)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", rootIf).Run() })
	run(t, "ip", "link", "set", swIf, "netns", sw)
	swRun("ip", "link", "set", swIf, "master", "br0", "up")
	run(t, "ip", "addr", "add", subnet+".1/24", "dev", rootIf)
	run(t, "ip", "link", "set", rootIf, "up")

	key := filepath.Join(dir, "id_ed25519")
	run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ncclwiz-test", "-f", key)
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	// sshd's privilege separation directory (Debian's service makes it at
	// boot; a container without systemd may lack it).
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	var known, cfg strings.Builder
	for i, s := range specs {
		c.Addr[s.Name] = fmt.Sprintf("%s.%d", subnet, 10+i)
	}
	for i, s := range specs {
		addr := c.Addr[s.Name]
		if s.Hang {
			// Its own port: a system sshd on *:22 of this machine must not
			// answer for the hung node.
			port := c.hang(t, rootIf, addr)
			fmt.Fprintf(&cfg, "Host %s\n  HostName %s\n  Port %d\n", s.Name, addr, port)
			continue
		}
		fmt.Fprintf(&cfg, "Host %s\n  HostName %s\n", s.Name, addr)
		ns := fmt.Sprintf("ncwcl%s-%d", tag, i)
		nodeDir := filepath.Join(dir, s.Name)
		if err := os.MkdirAll(filepath.Join(nodeDir, "tmp"), 0o700); err != nil {
			t.Fatal(err)
		}
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		host, peer := fmt.Sprintf("ncwc%s%dh", tag, i), fmt.Sprintf("ncwc%s%dn", tag, i)
		run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
		t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
		run(t, "ip", "link", "set", peer, "netns", ns)
		run(t, "ip", "link", "set", host, "netns", sw)
		swRun("ip", "link", "set", host, "master", "br0", "up")
		mtu := s.MTU
		if mtu == 0 {
			mtu = 1500
		}
		nsRun := func(args ...string) { run(t, append([]string{"ip", "netns", "exec", ns}, args...)...) }
		nsRun("ip", "link", "set", peer, "name", "eth0")
		nsRun("ip", "link", "set", "eth0", "mtu", fmt.Sprint(mtu), "up")
		nsRun("ip", "link", "set", "lo", "up")
		nsRun("ip", "addr", "add", addr+"/24", "dev", "eth0")
		for _, b := range s.Blackhole {
			nsRun("ip", "route", "add", "blackhole", c.Addr[b]+"/32")
		}
		if s.Down {
			continue
		}
		hostKey := filepath.Join(nodeDir, "ssh_host_ed25519_key")
		run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey)
		hk, err := os.ReadFile(hostKey + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(hk))
		fmt.Fprintf(&known, "%s %s %s\n", addr, fields[0], fields[1])
		env := map[string]string{"TMPDIR": filepath.Join(nodeDir, "tmp")}
		for k, v := range s.Env {
			env[k] = v
		}
		keys := authorized
		if s.NoAuth {
			keys = filepath.Join(nodeDir, "authorized_keys_empty")
			if err := os.WriteFile(keys, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		conf := filepath.Join(nodeDir, "sshd_config")
		if err := os.WriteFile(conf, []byte(sshdConfig(addr, hostKey, keys, nodeDir, env)), 0o600); err != nil {
			t.Fatal(err)
		}
		script := "exec /usr/sbin/sshd -D -e -f " + conf
		if s.ShmSize != "" {
			// ip netns exec gives the node its own mount namespace (slave
			// of /): this tmpfs is the node's /dev/shm only.
			script = "mount -t tmpfs -o size=" + s.ShmSize + ",mode=1777 ncclwiz-test-shm /dev/shm && " + script
		}
		logf, err := os.Create(filepath.Join(nodeDir, "sshd.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ip", "netns", "exec", ns, "sh", "-c", script)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("start sshd for %s: %v", s.Name, err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = logf.Close()
		})
		waitListen(t, addr+":22", filepath.Join(nodeDir, "sshd.log"))
	}
	fmt.Fprintf(&cfg, "Host *\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n",
		key, filepath.Join(dir, "known_hosts"))
	if err := os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(known.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c.SSHConfig = filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(c.SSHConfig, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// NodeTmp is the node's TMPDIR (its login environment sets it), where
// copies of ncclwiz land.
func (c *Cluster) NodeTmp(name string) string { return filepath.Join(c.Dir, name, "tmp") }

func sshdConfig(addr, hostKey, authorized, dir string, env map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Port 22\nListenAddress %s\nHostKey %s\nPidFile %s\nAuthorizedKeysFile %s\n", addr, hostKey, filepath.Join(dir, "sshd.pid"), authorized)
	b.WriteString("PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n")
	b.WriteString("PrintMotd no\nMaxStartups 100\nMaxSessions 100\nLogLevel ERROR\n")
	// One SetEnv line: sshd keeps the first value of a keyword, so a
	// second SetEnv line would be ignored.
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	b.WriteString("SetEnv " + strings.Join(kv, " ") + "\n")
	return b.String()
}

// hang puts addr on this machine's link to the switch and accepts connections on a free port
// that never get a byte: ssh's banner exchange times out.
func (c *Cluster) hang(t testing.TB, link, addr string) int {
	run(t, "ip", "addr", "add", addr+"/32", "dev", link)
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatalf("hang listener: %v", err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn) // held open, never written
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

func waitListen(t testing.TB, addr, log string) {
	for range 100 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(log)
	t.Fatalf("sshd on %s did not start: %s", addr, b)
}

// freeSubnet picks 10.199.X (X from the pid) that no interface uses yet.
func freeSubnet(t testing.TB) string {
	ifs, _ := net.InterfaceAddrs()
	used := map[string]bool{}
	for _, a := range ifs {
		if ip, _, err := net.ParseCIDR(a.String()); err == nil {
			if v4 := ip.To4(); v4 != nil && v4[0] == 10 && v4[1] == 199 {
				used[fmt.Sprint(v4[2])] = true
			}
		}
	}
	for i := range 100 {
		x := fmt.Sprint(100 + (os.Getpid()+i)%100)
		if !used[x] {
			return "10.199." + x
		}
	}
	t.Skip("no free 10.199.x.0/24")
	return ""
}

func probeNetns() error {
	name := fmt.Sprintf("ncwclprobe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return exec.Command("ip", "netns", "del", name).Run()
}

func run(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}
