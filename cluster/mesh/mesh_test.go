package mesh

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startListener runs Listen on loopback and returns its port and a
// function that ends the lifeline and waits for Listen to return.
func startListener(t *testing.T, lifetime time.Duration) (int, func() error) {
	t.Helper()
	outR, outW := io.Pipe()
	lifeR, lifeW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Listen(context.Background(), outW, lifeR, lifetime, "127.0.0.1") }()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, PortMarker)))
	if err != nil {
		t.Fatalf("port line %q", line)
	}
	return port, func() error { lifeW.Close(); return <-done }
}

func TestProbe(t *testing.T) {
	port, stop := startListener(t, time.Minute)
	// A port that answers but is not ncclwiz.
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "SSH-2.0-OpenSSH\n")
			c.Close()
		}
	}()
	defer other.Close()
	// A port nobody listens on.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	ts := []Target{
		{Name: "peer", Addr: "127.0.0.1:" + strconv.Itoa(port)},
		{Name: "sshd", Addr: other.Addr().String()},
		{Name: "gone", Addr: closedAddr},
		{Name: "MASTER_ADDR", Addr: other.Addr().String()},
	}
	res := Probe(context.Background(), ts, 3*time.Second, func(t Target) bool { return t.Name != "MASTER_ADDR" })
	want := map[string]string{"peer": "ok", "sshd": "not-ncclwiz", "gone": "refused", "MASTER_ADDR": "ok"}
	for _, r := range res {
		got := r.Reason
		if r.OK {
			got = "ok"
		}
		if got != want[r.To] {
			t.Errorf("%s: %s (%s), want %s", r.To, got, r.Error, want[r.To])
		}
	}
	if err := stop(); err != nil {
		t.Errorf("listener: %v", err)
	}
}

// TestListenEnds: the lifeline's EOF and the lifetime both end the
// listener, and its port is closed afterwards.
func TestListenEnds(t *testing.T) {
	port, stop := startListener(t, time.Hour)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		c.Close()
		t.Error("still listening after the lifeline ended")
	}
	outR, outW := io.Pipe()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if err := Listen(context.Background(), outW, nil, 50*time.Millisecond, "127.0.0.1"); err != nil {
		t.Errorf("lifetime: %v", err)
	}
}

func TestParseTarget(t *testing.T) {
	for in, ok := range map[string]bool{"n1=10.0.0.1:4000": true, "n1=[fe80::1]:4000": true, "=1.2.3.4:5": false, "n1": false, "n1=10.0.0.1": false} {
		if _, err := ParseTarget(in); (err == nil) != ok {
			t.Errorf("%q: err %v", in, err)
		}
	}
}

// TestListenBindsOneAddress (issue 22 item 20): the listener is reachable
// on the address it was given (NCCL's interface) and on no other address
// of the node; it bound every interface before. An address that is not
// the node's, or "every address", is refused.
func TestListenBindsOneAddress(t *testing.T) {
	port, stop := startListener(t, time.Minute)
	defer stop()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err != nil {
		t.Fatalf("the given address: %v", err)
	} else {
		c.Close()
	}
	// 127.0.0.2 is another address of this node (all of 127/8 is local).
	if c, err := net.DialTimeout("tcp", "127.0.0.2:"+strconv.Itoa(port), time.Second); err == nil {
		c.Close()
		t.Error("reachable on another address of the node")
	}
	for _, bad := range []string{"", "0.0.0.0", "::", "192.0.2.77", "node1"} {
		outR, outW := io.Pipe()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		if err := Listen(context.Background(), outW, nil, time.Second, bad); err == nil {
			t.Errorf("listened on %q", bad)
		}
	}
}
