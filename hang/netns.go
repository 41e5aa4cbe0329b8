package hang

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// dialIn connects to addr from inside the network namespace nsPath (a
// rank's /proc/PID/ns/net): a container's localhost is not the host's.
// The socket is made on an OS thread that joined that namespace for the
// moment of the connect; the thread then returns to ncclwiz's namespace,
// or, if it cannot, is retired with its goroutine (never reused). setns
// needs CAP_SYS_ADMIN (root).
func dialIn(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			c, back, err := dialLocked(ctx, nsPath, network, addr)
			if back {
				runtime.UnlockOSThread()
			}
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// dialLocked runs on a locked thread; back says the thread is in its own
// namespace again.
func dialLocked(ctx context.Context, nsPath, network, addr string) (net.Conn, bool, error) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, fmt.Errorf("open our network namespace: %w", err)
	}
	defer self.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, true, fmt.Errorf("open the job's network namespace %s: %w", nsPath, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("enter the job's network namespace (setns needs root): %w", err)
	}
	var d net.Dialer
	c, derr := d.DialContext(ctx, network, addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		if c != nil {
			_ = c.Close()
		}
		return nil, false, fmt.Errorf("return to our network namespace: %w", err)
	}
	return c, true, derr
}
