package remote

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/cluster"
)

// PDSH fans out with pdsh -R ssh: one pdsh call per phase for all nodes,
// pdsh's own fan-out (-f) and command timeout (-u). pdsh cannot send a
// file to a node, so nodes without the shared binary get their copy over
// plain ssh (said in the report).
type PDSH struct {
	ssh  *SSH
	pdsh string
}

// NewPDSH prepares the pdsh engine; pdsh is the program to run.
func NewPDSH(o Options, pdsh string) (*PDSH, error) {
	s, err := NewSSH(o)
	if err != nil {
		return nil, err
	}
	return &PDSH{ssh: s, pdsh: pdsh}, nil
}

// pdshEnv gives pdsh's ssh module the same options as the ssh engine
// (PDSH_SSH_ARGS replaces its defaults; %h is the host).
func (p *PDSH) pdshEnv() []string {
	a := p.ssh.sshArgs("%h") // ends with "--", "%h"
	return append(os.Environ(), "PDSH_SSH_ARGS="+strings.Join(a, " "), "PDSH_RCMD_TYPE=ssh")
}

// pdshArgs is the pdsh command line for one phase.
func (p *PDSH) pdshArgs(hosts []string, timeout time.Duration, script string) []string {
	// -t is pdsh's own connect timeout (default 10 s): it waits that long
	// for a node whose ssh already gave up, so it follows ours.
	return []string{"-R", "ssh", "-S", "-f", strconv.Itoa(p.ssh.opts.Fanout),
		"-t", strconv.Itoa(max(1, int(p.ssh.opts.ConnectTimeout.Seconds()))), "-u", strconv.Itoa(max(1, int(timeout.Seconds()))),
		"-w", strings.Join(hosts, ","), wrap(script)}
}

// pdshOutputLimit bounds one pdsh phase's output (all nodes): a check
// report is ~20 KB, so 1,000 nodes fit many times over.
const pdshOutputLimit = 256 << 20

var (
	pdshExit    = regexp.MustCompile(`^pdsh@[^:]*: ([^:]+): ssh exited with exit code (\d+)`)
	pdshTimeout = regexp.MustCompile(`^pdsh@[^:]*: ([^:]+): command timeout`)
	pdshOther   = regexp.MustCompile(`^pdsh@[^:]*: ([^:]+): (.*)$`)
)

// phase is one pdsh call's output split per host.
type phase struct {
	out, err   map[string]*bytes.Buffer
	exit       map[string]int
	timedOut   map[string]bool
	start, end time.Time
}

func (p *PDSH) phase(ctx context.Context, hosts []string, timeout time.Duration, script string) (phase, error) {
	ph := phase{out: map[string]*bytes.Buffer{}, err: map[string]*bytes.Buffer{}, exit: map[string]int{}, timedOut: map[string]bool{}}
	for _, h := range hosts {
		ph.out[h], ph.err[h] = &bytes.Buffer{}, &bytes.Buffer{}
	}
	// pdsh's -u ends each command; our deadline is a backstop for pdsh
	// itself, a few connect timeouts later.
	ctx, cancel := context.WithTimeout(ctx, timeout+2*p.ssh.opts.ConnectTimeout+10*time.Second)
	defer cancel()
	p.ssh.opts.trace(p.pdsh, p.pdshArgs(hosts, timeout, script))
	cmd := exec.CommandContext(ctx, p.pdsh, p.pdshArgs(hosts, timeout, script)...)
	cmd.Env = p.pdshEnv()
	cmd.WaitDelay = 2 * time.Second
	stdout := &limitedBuffer{max: pdshOutputLimit}
	stderr := &limitedBuffer{max: 1 << 20}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	ph.start = time.Now()
	err := cmd.Run()
	ph.end = time.Now()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return ph, fmt.Errorf("run pdsh: %w", err)
	}
	if ctx.Err() != nil {
		for _, h := range hosts {
			ph.timedOut[h] = true
		}
	}
	demux(stdout.Bytes(), ph.out, nil)
	ph.readStderr(stderr.Bytes())
	return ph, nil
}

// readStderr sorts pdsh's stderr: its own per-host verdicts (exit codes,
// command timeouts) and each host's ssh complaints.
func (ph *phase) readStderr(b []byte) {
	demux(b, ph.err, func(line string) bool {
		if m := pdshExit.FindStringSubmatch(line); m != nil {
			ph.exit[m[1]], _ = strconv.Atoi(m[2])
			return true
		}
		if m := pdshTimeout.FindStringSubmatch(line); m != nil {
			ph.timedOut[m[1]] = true
			return true
		}
		if m := pdshOther.FindStringSubmatch(line); m != nil {
			if b := ph.err[m[1]]; b != nil {
				b.WriteString(m[2] + "\n")
			}
			return true
		}
		return false
	})
}

// demux splits "host: line" output into per-host buffers; special handles
// pdsh's own "pdsh@local: host: …" lines first.
func demux(b []byte, into map[string]*bytes.Buffer, special func(string) bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if special != nil && special(line) {
			continue
		}
		host, rest, ok := strings.Cut(line, ": ")
		if !ok {
			host, rest, ok = strings.Cut(line, ":")
		}
		if buf := into[host]; ok && buf != nil {
			buf.WriteString(rest + "\n")
		}
	}
}

// Run checks the hosts in three pdsh phases: probe, clock, check.
func (p *PDSH) Run(ctx context.Context, hosts []string) (Outcome, error) {
	s := p.ssh
	cleanup, err := s.controlDir()
	if err != nil {
		return Outcome{}, err
	}
	defer cleanup(hosts)
	nodes := map[string]*cluster.Node{}
	for _, h := range hosts {
		nodes[h] = &cluster.Node{Name: h}
	}
	// Phase 1: probe (connects, and opens the ControlMasters later phases reuse).
	pr, err := p.phase(ctx, hosts, s.opts.NodeTimeout, probeScript(s.opts.RemotePath))
	if err != nil {
		return Outcome{}, err
	}
	var alive []string
	probes := map[string]probe{}
	for _, h := range hosts {
		code, failed := pr.exit[h]
		if pr.timedOut[h] || (failed && code != 0) || !bytes.Contains(pr.out[h].Bytes(), []byte(markDate)) {
			n := nodes[h]
			if !failed {
				code = 255
			}
			n.Status, n.Reason = classify(pr.err[h].String(), code, pr.timedOut[h])
			n.Error = lastLines(pr.err[h].String(), 2)
			if pr.timedOut[h] {
				n.Error = fmt.Sprintf("no answer within the per-node timeout (%s)", s.opts.NodeTimeout)
			}
			if n.Error == "" {
				n.Error = "no answer from the node"
			}
			continue
		}
		alive = append(alive, h)
		probes[h] = parseProbe(pr.out[h].Bytes())
		s.remember(h, probes[h])
	}
	// Phase 2: clocks over the open masters. One pdsh call for all nodes:
	// the error bound is half of that call, not of one node's round trip.
	if len(alive) > 0 {
		if cp, err := p.phase(ctx, alive, s.opts.ConnectTimeout, clockScript()); err == nil {
			for _, h := range alive {
				if c := parseProbe(cp.out[h].Bytes()).clock; c != nil {
					off, e := clockOffset(*c, cp.start, cp.end)
					nodes[h].ClockOffset, nodes[h].ClockError = &off, e
				}
			}
		}
	}
	// Phase 3: the check, with pdsh where the shared binary is there.
	var shared, copyHosts []string
	why := map[string]delivered{}
	chosen := map[string]binInfo{}
	for _, h := range alive {
		pb := probes[h]
		b, reason, msg := choose(s.bins, pb)
		chosen[h] = b
		switch {
		case reason != "":
			n := nodes[h]
			n.Status, n.Reason, n.Error = cluster.StatusFailed, reason, msg
		case pb.present && pb.sum == b.sum && s.opts.Copy != CopyAlways:
			shared = append(shared, h)
		case s.opts.Copy == CopyNever:
			n := nodes[h]
			n.Status, n.Reason = cluster.StatusFailed, "no-binary"
			n.Error = fmt.Sprintf("%s on the node %s, and copying is off (--copy never)", s.opts.RemotePath, missingWhy(pb))
		default:
			copyHosts = append(copyHosts, h)
			why[h] = delivered{why: missingWhy(pb), bin: b}
		}
	}
	if len(shared) > 0 {
		ck, err := p.phase(ctx, shared, s.opts.NodeTimeout, sharedScript(s.opts.RemotePath, checkCmd(s.opts.CheckArgs), s.opts.NodeTimeout))
		if err != nil {
			return Outcome{}, err
		}
		for _, h := range shared {
			n := nodes[h]
			n.Delivery = "shared"
			*n = finish(*n, runResult{stdout: ck.out[h].Bytes(), stderr: ck.err[h].Bytes(), exit: ck.exit[h], timedOut: ck.timedOut[h]}, s.opts)
		}
	}
	if len(copyHosts) > 0 {
		bins := map[string][]byte{}
		for _, h := range copyHosts {
			p := chosen[h].path
			if _, ok := bins[p]; ok {
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return Outcome{}, fmt.Errorf("read ncclwiz for copying: %w", err)
			}
			bins[p] = b
		}
		done := make(chan struct{})
		sem := make(chan struct{}, s.opts.Fanout)
		for _, h := range copyHosts {
			go func() {
				defer func() { done <- struct{}{} }()
				sem <- struct{}{}
				defer func() { <-sem }()
				nctx, cancel := context.WithTimeout(ctx, s.opts.NodeTimeout)
				defer cancel()
				n := nodes[h]
				n.Delivery = "copied"
				b := chosen[h]
				*n = finish(*n, s.run(nctx, h, copyScript(b.sum, checkCmd(s.opts.CheckArgs), s.opts.NodeTimeout), bins[b.path]), s.opts)
			}()
		}
		for range copyHosts {
			<-done
		}
	}
	out := Outcome{}
	var notes []delivered
	for _, h := range hosts {
		out.Nodes = append(out.Nodes, *nodes[h])
		notes = append(notes, why[h])
	}
	out.Notes = deliveryNotes(s.opts, out.Nodes, notes)
	if len(copyHosts) > 0 {
		out.Notes = append(out.Notes, "pdsh cannot send a file, so the copies went over plain ssh with the same options")
	}
	return out, nil
}
