package netcheck

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
	"github.com/ncclwiz/ncclwiz/internal/grouptest"
)

// localHost is the real machine with a chosen environment.
func localHost(env ...string) *host.Host {
	h := host.Local(host.LocalOptions{NoNVML: true})
	h.Env = env
	return h
}

func runRdv(t *testing.T, h *host.Host, dialTimeout time.Duration) []checks.Finding {
	t.Helper()
	st, err := gather(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	fs := rendezvous(context.Background(), h, st, dialTimeout)
	vetFindings(t, fs)
	return fs
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return p
}

func attempts(f *checks.Finding) []map[string]any {
	a, _ := f.Evidence["attempts"].([]map[string]any)
	return a
}

func TestRendezvousLoopbackListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	fs := runRdv(t, localHost("MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port)), DialTimeout)
	ok := findTitle(fs, fmt.Sprintf("TCP connect to 127.0.0.1:%d (MASTER_ADDR=127.0.0.1) succeeded", port))
	if ok == nil || ok.Severity != checks.OK || !strings.Contains(ok.Title, "on lo") {
		t.Fatalf("connect to a live listener:%s", titles(fs))
	}
	if findTitle(fs, "MASTER_ADDR=127.0.0.1 is this machine (lo)") == nil {
		t.Errorf("local master not recognised:%s", titles(fs))
	}
	// The listener is this test process: the port is in use, by our PID.
	busy := findTitle(fs, fmt.Sprintf("Port %d (MASTER_PORT) is already in use on this machine by PID %d", port, os.Getpid()))
	if busy == nil || busy.Severity != checks.Warn || busy.Guide != "port-clash" {
		t.Fatalf("port owner not named:%s", titles(fs))
	}
	procs := busy.Evidence["processes"].([]Proc)
	if len(procs) != 1 || procs[0].PID != os.Getpid() || procs[0].Comm == "" || !strings.HasPrefix(procs[0].Cmdline, os.Args[0]) {
		t.Errorf("processes: %+v", procs)
	}
	if p, _ := strconv.Atoi(recEnv(busy)["MASTER_PORT"]); p <= port {
		t.Errorf("recommended MASTER_PORT %v", recEnv(busy))
	}
}

func TestRendezvousClosedPort(t *testing.T) {
	port := freePort(t)
	for _, h := range []*host.Host{
		localHost("MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port)),
		func() *host.Host { h := localHost(); h.Peer = "127.0.0.1:" + strconv.Itoa(port); return h }(),
	} {
		fs := runRdv(t, h, DialTimeout)
		f := findTitle(fs, fmt.Sprintf("Nothing listens on 127.0.0.1:%d yet", port))
		if f == nil || f.Severity != checks.Info {
			t.Fatalf("closed local port:%s", titles(fs))
		}
		// Refused, not a timeout: the answer came at once.
		if a := attempts(f); len(a) != 1 || a[0]["result"] != "refused" {
			t.Errorf("attempts: %v", a)
		}
		if findTitle(fs, "already in use") != nil {
			t.Errorf("a free port reported in use:%s", titles(fs))
		}
	}
}

// blackhole returns a loopback port whose accept queue is full, so further
// SYNs are dropped and a connect times out (like a firewall that drops).
func blackhole(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	for i := 0; i < 8; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 300*time.Millisecond)
		if err != nil {
			return port // the queue is full: SYNs are being dropped
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the kernel kept accepting connections into a full backlog; cannot simulate a dropping firewall here")
	return 0
}

func TestRendezvousTimeoutIsBounded(t *testing.T) {
	port := blackhole(t)
	h := localHost()
	h.Peer = "127.0.0.1:" + strconv.Itoa(port)
	fs := runRdv(t, h, 400*time.Millisecond)
	f := findTitle(fs, fmt.Sprintf("No answer from 127.0.0.1:%d (--peer 127.0.0.1) within 400ms", port))
	if f == nil || f.Severity != checks.Error || !strings.Contains(f.Detail, "firewall") {
		t.Fatalf("dropped SYNs not reported as a timeout:%s", titles(fs))
	}
	if a := attempts(f); len(a) != 1 || a[0]["result"] != "timeout" {
		t.Errorf("attempts: %v", a)
	}
}

func TestPortHeldByChildProcess(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed; it plays the leftover rank holding the port")
	}
	cmd := exec.Command(py, "-c", "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\ntime.sleep(120)")
	port, _ := grouptest.Start(t, cmd)
	// MASTER_PORT alone: a launch whose rank 0 binds here.
	fs := runRdv(t, localHost("MASTER_PORT="+port), DialTimeout)
	f := findTitle(fs, fmt.Sprintf("Port %s (MASTER_PORT) is already in use on this machine by PID %d (", port, cmd.Process.Pid))
	if f == nil || f.Severity != checks.Warn {
		t.Fatalf("child's port not attributed:%s", titles(fs))
	}
	if !strings.Contains(f.Title, "python3 -c") || !contains(f.Fixes, "proc.stale") || !strings.Contains(f.Detail, "errno: 98 - Address already in use") {
		t.Errorf("finding: %+v", f)
	}
}

func TestRendezvousWithoutTarget(t *testing.T) {
	fs := runRdv(t, localHost(), DialTimeout)
	if fs[0].Severity != checks.OK || !strings.Contains(fs[0].Title, "no rendezvous to test") || !strings.Contains(fs[0].Detail, "--peer HOST:PORT") {
		t.Fatalf("no target:%s", titles(fs))
	}
	for _, f := range fs[1:] { // torchrun's default port may be busy on a dev box; never a problem here
		if f.Severity.IsProblem() {
			t.Errorf("problem without a target: %s", f.Title)
		}
	}
}

// fixtureRdv is a node on 10.0.0.0/24 (eth0) and 10.50.0.0/16 (ens1f0).
func fixtureRdv(t *testing.T, env map[string]string, connect map[string]string, route string) *host.Host {
	t.Helper()
	if route == "" {
		route = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n" +
			"eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
			"eth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
			"ens1f0\t0000320A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
	}
	ifs := []host.NetInterface{loIf,
		{Name: "eth0", Index: 2, Flags: up, OperState: "up", Addrs: []string{"10.0.0.5/24"}},
		{Name: "ens1f0", Index: 3, Flags: up, OperState: "up", Addrs: []string{"10.50.0.5/16"}}}
	return ft.Tree(t, map[string]any{"/proc/net/route": route, "/etc/hosts": "10.50.0.1 node0\n"},
		host.FixtureSpec{Env: env, Interfaces: ifs, Connect: connect})
}

func TestRendezvousFixtures(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		connect map[string]string
		route   string
		title   string
		sev     checks.Severity
		rec     string
	}{
		{"unknown name", map[string]string{"MASTER_ADDR": "node9", "MASTER_PORT": "29500"}, nil, "", "MASTER_ADDR=node9 does not resolve on this machine", checks.Error, ""},
		{"route via the data network", map[string]string{"MASTER_ADDR": "node0", "MASTER_PORT": "29500"}, map[string]string{"10.50.0.1:29500": "ok"}, "",
			"MASTER_ADDR=node0 (10.50.0.1) is reached through ens1f0", checks.OK, ""},
		{"NCCL pinned to the other network", map[string]string{"MASTER_ADDR": "node0", "MASTER_PORT": "29500", "NCCL_SOCKET_IFNAME": "=eth0"}, map[string]string{"10.50.0.1:29500": "ok"}, "",
			"NCCL would bootstrap over eth0, but MASTER_ADDR=node0 is reached through ens1f0", checks.Warn, "=ens1f0"},
		{"NCCL auto picks eth0 first", map[string]string{"MASTER_ADDR": "10.50.0.1", "MASTER_PORT": "29500"}, map[string]string{"10.50.0.1:29500": "ok"}, "",
			"NCCL would use eth0, ens1f0 and bootstrap over eth0 first", checks.Info, "=ens1f0"},
		{"Gloo pinned elsewhere", map[string]string{"MASTER_ADDR": "10.50.0.1", "MASTER_PORT": "29500", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "=ens1f0"}, map[string]string{"10.50.0.1:29500": "ok"}, "",
			"GLOO_SOCKET_IFNAME=eth0, but MASTER_ADDR=10.50.0.1 is reached through ens1f0", checks.Warn, ""},
		{"refused", map[string]string{"MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "29500"}, map[string]string{"10.0.0.9:29500": "refused"}, "",
			"Nothing listens on 10.0.0.9:29500 (MASTER_ADDR=10.0.0.9): connection refused", checks.Warn, ""},
		{"unreachable", map[string]string{"MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "29500"}, map[string]string{"10.0.0.9:29500": "unreachable"}, "",
			"10.0.0.9:29500 (MASTER_ADDR=10.0.0.9) is unreachable from this machine", checks.Error, ""},
		{"simulated host without connect data", map[string]string{"MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "29500"}, nil, "",
			"TCP connect test not available on this host", checks.Skipped, ""},
		{"no route", map[string]string{"MASTER_ADDR": "192.168.7.1", "MASTER_PORT": "29500"}, nil,
			"Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\neth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n",
			"No route to MASTER_ADDR=192.168.7.1 from this machine", checks.Error, ""},
		{"port missing", map[string]string{"MASTER_ADDR": "10.0.0.9"}, nil, "", "MASTER_ADDR is set but MASTER_PORT is not", checks.Warn, ""},
		{"port garbage", map[string]string{"MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "29500x"}, nil, "", `MASTER_PORT="29500x" is not a port number`, checks.Error, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := runRdv(t, fixtureRdv(t, tt.env, tt.connect, tt.route), DialTimeout)
			f := findTitle(fs, tt.title)
			if f == nil {
				t.Fatalf("no %q:%s", tt.title, titles(fs))
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %s, want %s", f.Severity, tt.sev)
			}
			if got := recEnv(f)["NCCL_SOCKET_IFNAME"]; got != tt.rec {
				t.Errorf("recommended NCCL_SOCKET_IFNAME=%q, want %q", got, tt.rec)
			}
		})
	}
}

// A resolver that never answers must not hold the check beyond ResolveTimeout.
func TestResolveIsBounded(t *testing.T) {
	h := fixtureRdv(t, map[string]string{"MASTER_ADDR": "slow.example", "MASTER_PORT": "29500"}, nil, "")
	h.Net.Resolve = func(ctx context.Context, name string) ([]string, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	fs := runRdv(t, h, DialTimeout)
	f := findTitle(fs, "MASTER_ADDR=slow.example does not resolve")
	if f == nil || !strings.Contains(f.Detail, "no answer from the resolver within 2s") {
		t.Fatalf("stuck resolver:%s", titles(fs))
	}
}

func TestPeerOverridesMaster(t *testing.T) {
	h := fixtureRdv(t, map[string]string{"MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "29500"}, map[string]string{"10.50.0.1:6000": "ok"}, "")
	h.Peer = "node0:6000"
	fs := runRdv(t, h, DialTimeout)
	if f := findTitle(fs, "TCP connect to 10.50.0.1:6000 (--peer node0) succeeded"); f == nil {
		t.Fatalf("--peer not used:%s", titles(fs))
	}
	h.Peer = "node0"
	fs = runRdv(t, h, DialTimeout)
	if f := findTitle(fs, `--peer "node0" is not HOST:PORT`); f == nil || f.Severity != checks.Error || !strings.Contains(f.Detail, "HOST:PORT") {
		t.Fatalf("bad --peer:%s", titles(fs))
	}
}
