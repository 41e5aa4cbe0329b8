package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ncclwiz/ncclwiz/cluster"
	"github.com/ncclwiz/ncclwiz/cluster/mesh"
)

// MaxMeshNodes bounds --mesh: it holds one ssh session per node open and
// makes N×(N-1) connections.
const MaxMeshNodes = 256

// listener is one node's running mesh listener.
type listener struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	port  int
	err   string
}

// Mesh starts a short-lived listener on every checked node (a port chosen
// there, lifetime bounded by the per-node timeout and by our ssh session),
// then has every node connect to every other on the address of the
// interface NCCL would pick there, and to master (HOST:PORT) when given.
func (s *SSH) Mesh(ctx context.Context, nodes []cluster.Node, master string) ([]cluster.MeshPair, []string, error) {
	var notes []string
	type member struct {
		node cluster.Node
		addr string
		bin  binInfo
	}
	var ms []member
	for _, n := range nodes {
		if n.Status != cluster.StatusOK || n.Report == nil || n.Delivery == "json" {
			continue
		}
		a := cluster.NCCLAddr(n.Report)
		if a == "" {
			notes = append(notes, n.Name+": no IPv4 address on NCCL's interface; left out of the mesh")
			continue
		}
		b, why := s.meshBuild(ctx, n.Name)
		if why != "" {
			notes = append(notes, n.Name+": left out of the mesh: "+why)
			continue
		}
		ms = append(ms, member{n, a, b})
	}
	if len(ms) > MaxMeshNodes {
		return nil, append(notes, fmt.Sprintf("--mesh skipped: %d nodes, more than %d (N×(N-1) connections and N open sessions)", len(ms), MaxMeshNodes)), nil
	}
	if len(ms) < 2 && master == "" {
		return nil, append(notes, "--mesh skipped: fewer than two reachable nodes"), nil
	}
	cleanup, err := s.controlDir()
	if err != nil {
		return nil, notes, err
	}
	defer cleanup(namesOf(nodes))
	// Each node gets the build of its own architecture, as its check did:
	// this machine's would end in exit 126 on a node of another one.
	bins := map[string][]byte{}
	for _, m := range ms {
		if m.node.Delivery != "copied" || bins[m.bin.path] != nil {
			continue
		}
		b, err := os.ReadFile(m.bin.path)
		if err != nil {
			return nil, notes, fmt.Errorf("read ncclwiz for copying: %w", err)
		}
		bins[m.bin.path] = b
	}

	// Phase 1: listeners, all at once (they must overlap).
	ls := make([]*listener, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls[i] = s.startListener(ctx, m.node, m.addr, m.bin, bins[m.bin.path])
		}()
	}
	wg.Wait()
	defer func() {
		for _, l := range ls {
			l.stop()
		}
	}()
	var targets []mesh.Target
	for i, m := range ms {
		if ls[i].port > 0 {
			targets = append(targets, mesh.Target{Name: m.node.Name, Addr: joinHostPort(m.addr, ls[i].port)})
		} else {
			notes = append(notes, m.node.Name+": mesh listener did not start: "+ls[i].err)
		}
	}
	if master != "" {
		targets = append(targets, mesh.Target{Name: cluster.MasterName, Addr: master})
	}

	// Phase 2: every node probes every other target, Fanout nodes at once.
	pairs := make([][]cluster.MeshPair, len(ms))
	sem := make(chan struct{}, s.opts.Fanout)
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pairs[i] = s.probeFrom(ctx, m.node, m.bin, targets, bins[m.bin.path])
		}()
	}
	wg.Wait()
	var out []cluster.MeshPair
	for _, p := range pairs {
		out = append(out, p...)
	}
	notes = append(notes, fmt.Sprintf("--mesh: %d nodes listened on a port of their own for at most %s; each connected to the others on NCCL's interface", len(targets), s.opts.NodeTimeout))
	return out, notes, nil
}

// meshBuild is the build a node runs the mesh with, chosen from its
// probe's architecture and C library as for the check (the node is probed
// now if this engine has not); a reason instead when none fits, naming
// the node's architecture and the --binary to pass.
func (s *SSH) meshBuild(ctx context.Context, host string) (binInfo, string) {
	p, ok := s.probed(host)
	if !ok {
		pctx, cancel := context.WithTimeout(ctx, s.opts.NodeTimeout)
		defer cancel()
		pr := s.run(pctx, host, probeScript(s.opts.RemotePath), nil)
		if pr.exit != 0 || pr.timedOut {
			return binInfo{}, "its architecture could not be probed: " + sshError(pr, s.opts)
		}
		p = parseProbe(pr.stdout)
		s.remember(host, p)
	}
	b, reason, why := choose(s.bins, p)
	if reason != "" {
		return binInfo{}, why
	}
	return b, ""
}

// remoteScript runs ncclwiz args on the node the way the check got there:
// the shared path (which held b), or a verified copy of b (bin, sent
// first on stdin).
func (s *SSH) remoteScript(n cluster.Node, b binInfo, bin []byte, args []string) (string, bool) {
	if n.Delivery == "shared" {
		return sharedScript(s.opts.RemotePath, args, s.opts.NodeTimeout), false
	}
	return copySizedScript(b.sum, len(bin), args, s.opts.NodeTimeout), true
}

// The listener binds addr only: the address of NCCL's interface there,
// the one its peers connect to.
func (s *SSH) startListener(ctx context.Context, n cluster.Node, addr string, b binInfo, bin []byte) *listener {
	l := &listener{}
	// The copy, when there is one, takes the first len(bin) bytes of
	// stdin; the rest of it is the lifeline, closed by stop.
	script, copied := s.remoteScript(n, b, bin, []string{"cluster", "mesh-listen", "--addr", addr, "--lifetime", s.opts.NodeTimeout.String(), "--lifeline"})
	s.opts.trace(s.opts.SSH, append(s.sshArgs(n.Name), wrap(script)))
	cmd := exec.Command(s.opts.SSH, append(s.sshArgs(n.Name), wrap(script))...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		l.err = err.Error()
		return l
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		l.err = err.Error()
		return l
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		l.err = err.Error()
		return l
	}
	l.cmd, l.stdin = cmd, stdin
	if copied {
		go func() { _, _ = stdin.Write(bin) }()
	}
	port := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), mesh.PortMarker+" "); ok {
				p, _ := strconv.Atoi(strings.TrimSpace(v))
				port <- p
				break
			}
		}
		close(port)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	wait := time.NewTimer(s.opts.ConnectTimeout + 30*time.Second)
	defer wait.Stop()
	select {
	case p, ok := <-port:
		if ok && p > 0 {
			l.port = p
			return l
		}
		l.err = "no port: " + lastLines(errb.String(), 2)
	case <-wait.C:
		l.err = "no port within " + (s.opts.ConnectTimeout + 30*time.Second).String()
	case <-ctx.Done():
		l.err = ctx.Err().Error()
	}
	l.stop()
	return l
}

// stop ends the session: EOF on the lifeline ends a listener at once,
// a copied one too (its copy took only the binary's bytes of stdin); the
// lifetime and the kill are backstops only.
func (l *listener) stop() {
	if l == nil || l.cmd == nil {
		return
	}
	_ = l.stdin.Close()
	done := make(chan struct{})
	go func() { _ = l.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = l.cmd.Process.Kill()
		<-done
	}
	l.cmd = nil
}

func (s *SSH) probeFrom(ctx context.Context, n cluster.Node, b binInfo, targets []mesh.Target, bin []byte) []cluster.MeshPair {
	args := []string{"cluster", "mesh-probe", "--timeout", s.opts.ConnectTimeout.String()}
	var ts []mesh.Target
	for _, t := range targets {
		if t.Name != n.Name {
			ts = append(ts, t)
			args = append(args, t.Name+"="+t.Addr)
		}
	}
	fail := func(reason, msg string) []cluster.MeshPair {
		var out []cluster.MeshPair
		for _, t := range ts {
			out = append(out, cluster.MeshPair{From: n.Name, To: t.Name, Addr: t.Addr, Reason: reason, Error: msg})
		}
		return out
	}
	script, copied := s.remoteScript(n, b, bin, args)
	var stdin []byte
	if copied {
		stdin = bin
	}
	nctx, cancel := context.WithTimeout(ctx, s.opts.NodeTimeout)
	defer cancel()
	rr := s.run(nctx, n.Name, script, stdin)
	if rr.timedOut || rr.exit != 0 {
		return fail("probe-failed", lastLines(string(rr.stderr), 2))
	}
	var res []mesh.Result
	if err := json.Unmarshal(rr.stdout, &res); err != nil {
		return fail("probe-failed", "unreadable probe output: "+err.Error())
	}
	var out []cluster.MeshPair
	for _, r := range res {
		out = append(out, cluster.MeshPair{From: n.Name, To: r.To, Addr: r.Addr, OK: r.OK, Reason: r.Reason, Error: r.Error})
	}
	return out
}

func joinHostPort(addr string, port int) string {
	if strings.Contains(addr, ":") {
		return "[" + addr + "]:" + strconv.Itoa(port)
	}
	return addr + ":" + strconv.Itoa(port)
}

func namesOf(ns []cluster.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}

// Mesh runs --mesh over the ssh engine beneath pdsh: pdsh cannot hold a
// session open while the others connect.
func (p *PDSH) Mesh(ctx context.Context, nodes []cluster.Node, master string) ([]cluster.MeshPair, []string, error) {
	pairs, notes, err := p.ssh.Mesh(ctx, nodes, master)
	return pairs, append(notes, "--mesh ran over plain ssh: pdsh cannot hold the listeners' sessions open"), err
}
