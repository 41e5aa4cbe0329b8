// Package rastest is a fake NCCL RAS service on loopback for tests: it
// speaks the server side of the client protocol as NCCL's
// src/ras/client_support.cc does and replays a status report the test
// wrote.
package rastest

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
)

// Server describes what the fake answers.
type Server struct {
	// Status returns the report sent after STATUS (called per connection,
	// so a test can fill in PIDs it learns after starting the server).
	Status func() string
	// JSON: the server knows SET FORMAT (NCCL >= 2.28.7); older ones
	// answer "ERROR: Unknown command".
	JSON bool
	// Greeting, when set, is sent instead of the protocol handshake
	// (a port that speaks something else).
	Greeting string
}

// Serve starts s on 127.0.0.1 and returns its address; it stops when the
// test ends.
func Serve(t testing.TB, s Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ServeOn(t, ln, s)
}

// ServeOn serves s on a listener the test made (in a container's network
// namespace, say) and returns its address; it stops when the test ends.
func ServeOn(t testing.TB, ln net.Listener, s Server) string {
	t.Helper()
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.handle(c)
		}
	}()
	return ln.Addr().String()
}

func (s Server) handle(c net.Conn) {
	defer c.Close()
	rd := bufio.NewReader(c)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToLower(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "client protocol "):
			if s.Greeting != "" {
				fmt.Fprint(c, s.Greeting)
				return
			}
			fmt.Fprint(c, "SERVER PROTOCOL 2\n")
		case strings.HasPrefix(cmd, "timeout "):
			fmt.Fprint(c, "OK\n")
		case strings.HasPrefix(cmd, "set format ") && s.JSON:
			fmt.Fprint(c, "OK\n")
		case cmd == "status" || cmd == "verbose status":
			if s.Status != nil {
				fmt.Fprint(c, s.Status())
			}
			return
		default:
			fmt.Fprintf(c, "ERROR: Unknown command %s\n", strings.TrimSpace(line))
		}
	}
}
