package remote

import (
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/cluster"
)

// classify turns ssh's (or pdsh's) complaint about a node into a status
// and a reason the user can act on. exit is ssh's exit status (255: ssh
// itself failed) or -1 when the process was killed at our deadline.
func classify(stderr string, exit int, timedOut bool) (cluster.Status, string) {
	l := strings.ToLower(stderr)
	has := func(ss ...string) bool {
		for _, s := range ss {
			if strings.Contains(l, s) {
				return true
			}
		}
		return false
	}
	switch {
	case timedOut || has("timed out", "timeout", "connection timeout"):
		return cluster.StatusTimeout, "timeout"
	case has("could not resolve hostname", "name or service not known", "temporary failure in name resolution", "no address associated"):
		return cluster.StatusUnreachable, "dns"
	case has("connection refused"):
		return cluster.StatusUnreachable, "refused"
	case has("host key verification failed", "remote host identification has changed", "no matching host key"):
		return cluster.StatusUnreachable, "host-key"
	case has("permission denied", "too many authentication failures", "authentication failed"):
		return cluster.StatusUnreachable, "auth"
	case has("no route to host", "network is unreachable"):
		return cluster.StatusUnreachable, "no-route"
	case has("connection closed", "connection reset", "kex_exchange_identification", "broken pipe"):
		return cluster.StatusUnreachable, "closed"
	case exit == 255:
		return cluster.StatusUnreachable, "ssh-error"
	}
	return cluster.StatusFailed, "remote-error"
}

// remoteFailure explains a non-zero exit of the remote command that is not
// ssh's own (ncclwiz check exits 0 or 1 with a report).
func remoteFailure(exit int, stderr string) string {
	msg := lastLines(stderr, 3)
	switch exit {
	case 126:
		return "the node cannot execute ncclwiz (another CPU architecture, or a noexec temp directory): " + msg
	case 127:
		return "ncclwiz not found on the node: " + msg
	case 124, 137:
		return "ncclwiz check did not finish within the per-node timeout on the node"
	case exitNoSum, exitBadSum, exitCopyFailed:
		return "copying ncclwiz failed: " + msg
	}
	if msg == "" {
		return "exit status " + strconv.Itoa(exit)
	}
	return msg
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, " / "))
}
