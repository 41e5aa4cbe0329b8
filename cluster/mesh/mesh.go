// Package mesh is the node side of `cluster check --mesh`: a short-lived
// TCP listener that greets whoever connects, and a prober that connects to
// every other node's listener (and MASTER_ADDR:MASTER_PORT) and says which
// could not be reached and why.
package mesh

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// PortMarker starts the line the listener prints once it listens.
const PortMarker = "@@ncclwiz-mesh-port@@"

// greeting tells a prober it reached an ncclwiz listener, not some other
// service that happens to hold the port.
const greeting = "ncclwiz-mesh\n"

// Listen listens on addr — the address of the interface NCCL would use on
// this node, the only one peers are asked to reach, so the greeter is not
// offered on every other interface (a public one, a container bridge) —
// at a port the kernel picks, prints the port, greets each connection and
// returns after lifetime, or when lifeline (if not nil) reaches EOF: the
// ssh session that started it ended. An addr that is not one of this
// node's is an error, never a fallback to every address.
func Listen(ctx context.Context, out io.Writer, lifeline io.Reader, lifetime time.Duration, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, lifetime)
	defer cancel()
	ip := net.ParseIP(addr)
	if ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("mesh listen: %q is not one address (the address of NCCL's interface on this node is needed)", addr)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return fmt.Errorf("mesh listen on %s: %w", ip, err)
	}
	defer ln.Close()
	if _, err := fmt.Fprintf(out, "%s %d\n", PortMarker, ln.Addr().(*net.TCPAddr).Port); err != nil {
		return fmt.Errorf("mesh listen: %w", err)
	}
	if f, ok := out.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}
	if lifeline != nil {
		go func() {
			_, _ = io.Copy(io.Discard, lifeline)
			cancel()
		}()
	}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("mesh accept: %w", err)
		}
		_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.WriteString(c, greeting)
		_ = c.Close()
	}
}

// Target is one place to connect to.
type Target struct {
	Name string `json:"name"`
	Addr string `json:"addr"` // host:port
}

// ParseTarget reads NAME=HOST:PORT.
func ParseTarget(s string) (Target, error) {
	name, addr, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return Target{}, fmt.Errorf("mesh target %q: want NAME=HOST:PORT", s)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return Target{}, fmt.Errorf("mesh target %q: %w", s, err)
	}
	return Target{Name: name, Addr: addr}, nil
}

// Result is one connection attempt.
type Result struct {
	To     string `json:"to"`
	Addr   string `json:"addr"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"` // refused, timeout, no-route, not-ncclwiz, …
	Error  string `json:"error,omitempty"`
}

// Probe connects to every target at once, each within timeout. greet
// says whether to expect an ncclwiz listener (false for MASTER_ADDR).
func Probe(ctx context.Context, targets []Target, timeout time.Duration, greet func(Target) bool) []Result {
	out := make([]Result, len(targets))
	done := make(chan struct{})
	for i, t := range targets {
		go func() {
			defer func() { done <- struct{}{} }()
			out[i] = probeOne(ctx, t, timeout, greet(t))
		}()
	}
	for range targets {
		<-done
	}
	return out
}

func probeOne(ctx context.Context, t Target, timeout time.Duration, greet bool) Result {
	r := Result{To: t.Name, Addr: t.Addr}
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", t.Addr)
	if err != nil {
		r.Reason, r.Error = reason(err), err.Error()
		return r
	}
	defer c.Close()
	if greet {
		_ = c.SetReadDeadline(time.Now().Add(timeout))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != greeting {
			r.Reason, r.Error = "not-ncclwiz", "connected, but no ncclwiz greeting (another service on the port, or a middlebox)"
			return r
		}
	}
	r.OK = true
	return r
}

func reason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM),
		errors.Is(err, syscall.EINVAL): // EINVAL: a blackhole route
		return "no-route"
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "dns"
	}
	return "error"
}
