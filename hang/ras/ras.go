// Package ras is a client of NCCL's RAS service (NCCL >= 2.24): the
// listener every NCCL process of a job opens (NCCL_RAS_ADDR, default
// localhost:28028) that answers what the job's communicators look like
// from all its processes. The protocol, as NCCL's src/ras/client.cc and
// client_support.cc speak it (2.24 … 2.28): the client sends
// "CLIENT PROTOCOL 2\n" and gets "SERVER PROTOCOL <n>\n"; optionally
// "TIMEOUT <secs>\n" → "OK\n"; since 2.28.7 "SET FORMAT json\n" → "OK\n"
// (older servers answer "ERROR: Unknown command ..."); then "STATUS\n",
// and the server writes the report and closes the connection.
package ras

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/textwrap"
)

// DefaultAddr is NCCL_RAS_CLIENT_PORT on localhost.
const DefaultAddr = "localhost:28028"

// clientProtocol is NCCL_RAS_CLIENT_PROTOCOL (2 in every release 2.24 … 2.28).
const clientProtocol = 2

// maxReply bounds what is read from the port: a job of thousands of ranks
// answers in well under a megabyte.
const maxReply = 16 << 20

// Options of a query.
type Options struct {
	// Timeout bounds the whole exchange; the RAS legs get a few seconds less.
	Timeout time.Duration
	// Text asks for the text report even when JSON is available.
	Text bool
	// Dial connects (nil: a plain TCP dial from ncclwiz's own network
	// namespace); hang passes one that dials inside the job's namespace.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Error kinds, for a clear message.
var (
	// ErrClosed: nothing listens on the address.
	ErrClosed = errors.New("nothing listens there")
	// ErrNotRAS: something answered, but not NCCL's RAS protocol.
	ErrNotRAS = errors.New("the port does not speak NCCL's RAS protocol")
)

// Addr returns the RAS address of a job from NCCL_RAS_ADDR (host:port),
// or the default.
func Addr(env string) string {
	if env == "" {
		return DefaultAddr
	}
	return env
}

// Query connects to addr, asks for the status (JSON when the server
// supports it) and parses the answer.
func Query(ctx context.Context, addr string, o Options) (*Reply, error) {
	if o.Timeout <= 0 {
		o.Timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	dial := o.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("connect to NCCL RAS at %s: %w", addr, ErrClosed)
		}
		return nil, fmt.Errorf("connect to NCCL RAS at %s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	rd := bufio.NewReaderSize(io.LimitReader(conn, maxReply), 4096)
	line := func(send string) (string, error) {
		if _, err := io.WriteString(conn, send); err != nil {
			return "", fmt.Errorf("send %q to %s: %w", strings.TrimSpace(send), addr, err)
		}
		s, err := rd.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "", fmt.Errorf("%s closed the connection after %q: %w", addr, strings.TrimSpace(send), ErrNotRAS)
			}
			return "", fmt.Errorf("read the answer to %q from %s: %w", strings.TrimSpace(send), addr, err)
		}
		return strings.TrimRight(s, "\r\n"), nil
	}
	r := &Reply{Addr: addr, Format: "text"}
	hello, err := line(fmt.Sprintf("CLIENT PROTOCOL %d\n", clientProtocol))
	if err != nil {
		return nil, err
	}
	v, ok := cutPrefixFold(hello, "SERVER PROTOCOL ")
	if !ok {
		return nil, fmt.Errorf("%s answered %q to the RAS handshake: %w", addr, clip(hello), ErrNotRAS)
	}
	r.Protocol, _ = strconv.Atoi(strings.TrimSpace(v))
	// The RAS legs wait up to 5 s each by default; keep the whole query
	// inside our own timeout.
	legs := int((o.Timeout - 2*time.Second) / time.Second / 2)
	if legs >= 1 {
		if ok, err := line(fmt.Sprintf("TIMEOUT %d\n", legs)); err != nil {
			return nil, err
		} else if !strings.EqualFold(ok, "OK") {
			return nil, fmt.Errorf("%s answered %q to TIMEOUT: %w", addr, clip(ok), ErrNotRAS)
		}
	}
	if !o.Text {
		ans, err := line("SET FORMAT json\n")
		if err != nil {
			return nil, err
		}
		switch {
		case strings.EqualFold(ans, "OK"):
			r.Format = "json"
		case strings.HasPrefix(ans, "ERROR"):
			// NCCL < 2.28.7: text only.
		default:
			return nil, fmt.Errorf("%s answered %q to SET FORMAT: %w", addr, clip(ans), ErrNotRAS)
		}
	}
	if _, err := io.WriteString(conn, "STATUS\n"); err != nil {
		return nil, fmt.Errorf("send STATUS to %s: %w", addr, err)
	}
	body, err := io.ReadAll(rd)
	if err != nil && len(body) == 0 {
		return nil, fmt.Errorf("read the RAS status from %s: %w", addr, err)
	}
	r.Raw = string(body)
	if err != nil || len(body) >= maxReply-rd.Size() {
		r.Partial = true // cut by a timeout or our size limit
	}
	if err := r.parse(); err != nil {
		return r, err
	}
	return r, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

func clip(s string) string {
	if len(s) > 60 {
		s = textwrap.Clip(s, 60) // cells, never half a rune
	}
	return strconv.Quote(s)
}
