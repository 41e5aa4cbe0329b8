package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ncclwiz/ncclwiz/cluster"
)

// CopyMode says whether ncclwiz may be copied to a node.
type CopyMode string

// Copy modes.
const (
	CopyAuto   CopyMode = "auto"   // use the shared path when it holds this ncclwiz, else copy
	CopyNever  CopyMode = "never"  // only the shared path; a node without it is a failure
	CopyAlways CopyMode = "always" // always a private copy
)

// Options configure every engine.
type Options struct {
	SSH            string   // ssh program (default "ssh")
	SSHConfig      string   // ssh -F FILE
	SSHOptions     []string // extra -o KEY=VALUE
	ConnectTimeout time.Duration
	NodeTimeout    time.Duration // probe + copy + check, per node
	Fanout         int           // nodes in flight at once
	// RemotePath is where ncclwiz is looked for on the nodes (the shared
	// filesystem case); LocalBinary is this ncclwiz, checksummed and
	// copied when RemotePath does not hold the same file.
	RemotePath  string
	LocalBinary string
	// Binaries are ncclwiz builds for other architectures (linux GOARCH →
	// path), sent to the nodes of that architecture (--binary arm64=PATH).
	Binaries  map[string]string
	Copy      CopyMode
	CheckArgs []string // passed to `ncclwiz check --json` on each node
	// ControlDir holds ControlMaster sockets; made and removed by the
	// engine when empty.
	ControlDir string
	// OutputLimit bounds what is kept of one node's output.
	OutputLimit int
	// Debug, when set, receives every command run to reach the nodes, one
	// line each, quoted so it can be pasted into a shell (--debug).
	Debug io.Writer
}

func (o *Options) defaults() error {
	if o.SSH == "" {
		o.SSH = "ssh"
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = 120 * time.Second
	}
	if o.Fanout <= 0 {
		o.Fanout = 32
	}
	if o.Copy == "" {
		o.Copy = CopyAuto
	}
	if o.OutputLimit <= 0 {
		o.OutputLimit = 32 << 20
	}
	if o.LocalBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this ncclwiz binary: %w", err)
		}
		o.LocalBinary = exe
	}
	if o.RemotePath == "" {
		o.RemotePath = o.LocalBinary
	}
	return nil
}

// Outcome is what an engine returns: the nodes and what it chose to do,
// said out loud.
type Outcome struct {
	Nodes []cluster.Node
	Notes []string
}

// SSH reaches each node with plain ssh.
type SSH struct {
	opts Options
	bins map[string]binInfo
	// probes keeps what each node's probe said (architecture, C library,
	// the shared binary), so --mesh sends each node the build its check
	// got without asking again.
	mu     sync.Mutex
	probes map[string]probe
}

func (s *SSH) remember(host string, p probe) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.probes == nil {
		s.probes = map[string]probe{}
	}
	s.probes[host] = p
}

func (s *SSH) probed(host string) (probe, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.probes[host]
	return p, ok
}

// NewSSH prepares the ssh engine.
func NewSSH(o Options) (*SSH, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ssh, err := exec.LookPath(o.SSH)
	if err != nil {
		return nil, fmt.Errorf("no ssh client (%s): install openssh-client, or use --slurm or --from-json: %w", o.SSH, err)
	}
	o.SSH = ssh
	// loadBinaries checksums this binary and the --binary builds once.
	bins, err := loadBinaries(o)
	if err != nil {
		return nil, err
	}
	return &SSH{opts: o, bins: bins}, nil
}

// sshArgs are the options every ssh call gets: never prompt, bounded
// connect (which also bounds the banner exchange: a node that accepts and
// never speaks times out), and one connection per node reused by every
// step.
func (s *SSH) sshArgs(host string) []string {
	var a []string
	if s.opts.SSHConfig != "" {
		a = append(a, "-F", s.opts.SSHConfig)
	}
	a = append(a, "-T", "-o", "BatchMode=yes",
		"-o", "ConnectTimeout="+strconv.Itoa(max(1, int(s.opts.ConnectTimeout.Seconds()))),
		"-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3")
	if s.opts.ControlDir != "" {
		a = append(a, "-o", "ControlMaster=auto", "-o", "ControlPath="+filepath.Join(s.opts.ControlDir, "%C"),
			"-o", "ControlPersist=60")
	}
	for _, o := range s.opts.SSHOptions {
		a = append(a, "-o", o)
	}
	return append(a, "--", host)
}

type runResult struct {
	stdout, stderr []byte
	exit           int
	timedOut       bool
	start, end     time.Time
}

func (s *SSH) run(ctx context.Context, host, script string, stdin []byte) runResult {
	args := append(s.sshArgs(host), wrap(script))
	s.opts.trace(s.opts.SSH, args)
	cmd := exec.CommandContext(ctx, s.opts.SSH, args...)
	cmd.WaitDelay = 2 * time.Second
	out := &limitedBuffer{max: s.opts.OutputLimit}
	errb := &limitedBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	r := runResult{start: time.Now()}
	err := cmd.Run()
	r.end = time.Now()
	r.stdout, r.stderr = out.Bytes(), errb.Bytes()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.timedOut, r.exit = true, -1
	case errors.As(err, &ee):
		r.exit = ee.ExitCode()
	case err != nil:
		r.exit = -1
		r.stderr = append(r.stderr, []byte(err.Error())...)
	}
	return r
}

// Run checks every host, at most Fanout at once.
func (s *SSH) Run(ctx context.Context, hosts []string) (Outcome, error) {
	cleanup, err := s.controlDir()
	if err != nil {
		return Outcome{}, err
	}
	// Each node's master is closed when its check is done, so at most
	// Fanout masters live at once however many nodes there are.
	defer cleanup(nil)
	nodes := make([]cluster.Node, len(hosts))
	notes := make([]delivered, len(hosts))
	sem := make(chan struct{}, s.opts.Fanout)
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			nodes[i], notes[i] = s.checkNode(ctx, h)
			s.closeMaster(h)
		}()
	}
	wg.Wait()
	return Outcome{Nodes: nodes, Notes: deliveryNotes(s.opts, nodes, notes)}, nil
}

// controlDir makes a private directory for ControlMaster sockets and
// returns the cleanup that closes the masters of the hosts given and
// removes it.
func (s *SSH) controlDir() (func([]string), error) {
	if s.opts.ControlDir != "" {
		return func([]string) {}, nil
	}
	d, err := os.MkdirTemp("", "ncclwiz-ssh-")
	if err != nil {
		return nil, fmt.Errorf("make the ssh control directory: %w", err)
	}
	s.opts.ControlDir = d
	return func(hosts []string) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, s.opts.Fanout)
		for _, h := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				s.closeMaster(h)
			}()
		}
		wg.Wait()
		_ = os.RemoveAll(d)
		s.opts.ControlDir = ""
	}, nil
}

func (s *SSH) closeMaster(host string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	args := s.sshArgs(host)
	args = append(args[:len(args)-2:len(args)-2], "-O", "exit", "--", host)
	s.opts.trace(s.opts.SSH, args)
	cmd := exec.CommandContext(ctx, s.opts.SSH, args...)
	cmd.WaitDelay = time.Second
	_ = cmd.Run()
}

// checkNode probes, measures the clock, delivers and runs the check on
// one node within the per-node timeout. The second result says what was
// copied there and why, for the report's delivery notes.
func (s *SSH) checkNode(parent context.Context, host string) (cluster.Node, delivered) {
	ctx, cancel := context.WithTimeout(parent, s.opts.NodeTimeout)
	defer cancel()
	n := cluster.Node{Name: host}
	pr := s.run(ctx, host, probeScript(s.opts.RemotePath), nil)
	if pr.exit != 0 || pr.timedOut {
		n.Status, n.Reason = classify(string(pr.stderr), pr.exit, pr.timedOut)
		n.Error = sshError(pr, s.opts)
		return n, delivered{}
	}
	p := parseProbe(pr.stdout)
	s.remember(host, p)
	// The probe's round trip includes the handshake; a second call over
	// the open master measures the clock tightly.
	if cr := s.run(ctx, host, clockScript(), nil); cr.exit == 0 && !cr.timedOut {
		if c := parseProbe(cr.stdout).clock; c != nil {
			off, e := clockOffset(*c, cr.start, cr.end)
			n.ClockOffset, n.ClockError = &off, e
		}
	}
	b, reason, why := choose(s.bins, p)
	if reason != "" {
		n.Status, n.Reason, n.Error = cluster.StatusFailed, reason, why
		return n, delivered{}
	}
	shared := p.present && p.sum == b.sum
	var rr runResult
	var note delivered
	switch {
	case shared && s.opts.Copy != CopyAlways:
		n.Delivery = "shared"
		rr = s.run(ctx, host, sharedScript(s.opts.RemotePath, checkCmd(s.opts.CheckArgs), s.opts.NodeTimeout), nil)
	case s.opts.Copy == CopyNever:
		n.Status, n.Reason = cluster.StatusFailed, "no-binary"
		n.Error = fmt.Sprintf("%s on the node %s, and copying is off (--copy never)", s.opts.RemotePath, missingWhy(p))
		return n, delivered{}
	default:
		bin, err := os.ReadFile(b.path)
		if err != nil {
			n.Status, n.Reason, n.Error = cluster.StatusFailed, "local-error", err.Error()
			return n, delivered{}
		}
		n.Delivery = "copied"
		note = delivered{why: missingWhy(p), bin: b}
		rr = s.run(ctx, host, copyScript(b.sum, checkCmd(s.opts.CheckArgs), s.opts.NodeTimeout), bin)
	}
	return finish(n, rr, s.opts), note
}

// finish turns the check run into the node's result.
func finish(n cluster.Node, rr runResult, o Options) cluster.Node {
	if rr.timedOut {
		n.Status, n.Reason = cluster.StatusTimeout, "timeout"
		n.Error = fmt.Sprintf("ncclwiz check did not finish within the per-node timeout (%s)", o.NodeTimeout)
		return n
	}
	if rr.exit == 255 {
		n.Status, n.Reason = classify(string(rr.stderr), rr.exit, false)
		n.Error = lastLines(string(rr.stderr), 3)
		return n
	}
	if rr.exit != 0 && rr.exit != 1 {
		n.Status, n.Reason = cluster.StatusFailed, "remote-error"
		n.Error = remoteFailure(rr.exit, string(rr.stderr))
		return n
	}
	rep, err := parseReport(rr.stdout)
	if err != nil {
		n.Status, n.Reason, n.Error = cluster.StatusFailed, "bad-report", err.Error()
		return n
	}
	n.Status, n.Report = cluster.StatusOK, rep
	return n
}

func missingWhy(p probe) string {
	switch {
	case !p.present:
		return "is not there"
	case p.sum == "":
		return "cannot be checksummed (" + p.version + ")"
	default:
		return "is another build (" + p.version + ")"
	}
}

func sshError(r runResult, o Options) string {
	if r.timedOut {
		return fmt.Sprintf("no answer within the per-node timeout (%s)", o.NodeTimeout)
	}
	if msg := lastLines(string(r.stderr), 2); msg != "" {
		return msg
	}
	return "ssh exit status " + strconv.Itoa(r.exit)
}

// delivered is what was copied to one node and why (zero when nothing was).
type delivered struct {
	why string
	bin binInfo
}

// deliveryNotes says, never silently, how ncclwiz got onto the nodes,
// with the checksum of each build that was copied (an arm64 node gets
// the --binary arm64 build, not this one).
func deliveryNotes(o Options, nodes []cluster.Node, ds []delivered) []string {
	var shared, copied []string
	reasons := map[string]int{}
	perBuild := map[string]int{}
	var builds []binInfo
	for i, n := range nodes {
		switch n.Delivery {
		case "shared":
			shared = append(shared, n.Name)
		case "copied":
			copied = append(copied, n.Name)
			d := ds[i]
			if d.why != "" {
				reasons[d.why]++
			}
			if d.bin.sum == "" {
				d.bin = binInfo{sum: sumOf(o.LocalBinary)} // no build recorded: this one
			}
			if perBuild[d.bin.sum] == 0 {
				builds = append(builds, d.bin)
			}
			perBuild[d.bin.sum]++
		}
	}
	var out []string
	if len(shared) > 0 {
		out = append(out, fmt.Sprintf("ncclwiz ran from the shared path %s (same checksum as this binary) on %s", o.RemotePath, nodeCount(len(shared))))
	}
	if len(copied) > 0 {
		w, best := "", 0
		for r, c := range reasons {
			if c > best || c == best && "; there "+o.RemotePath+" "+r < w {
				w, best = "; there "+o.RemotePath+" "+r, c
			}
		}
		if o.Copy == CopyAlways {
			w = " (--copy always)"
		}
		what := fmt.Sprintf("sha256 %s…", short(builds[0].sum))
		if len(builds) > 1 {
			parts := make([]string, len(builds))
			for i, b := range builds {
				parts[i] = fmt.Sprintf("the linux/%s build, sha256 %s…, on %d", b.arch, short(b.sum), perBuild[b.sum])
			}
			what = strings.Join(parts, "; ")
		}
		out = append(out, fmt.Sprintf("ncclwiz was copied to a private temp directory on %s (%s; verified there, removed afterwards)%s",
			nodeCount(len(copied)), what, w))
	}
	return out
}

func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return strconv.Itoa(n) + " nodes"
}

// short is the first 12 hex digits of a checksum, or "?".
func short(sum string) string {
	if len(sum) < 12 {
		return "?"
	}
	return sum[:12]
}

// sumOf is a file's checksum, or "" when it cannot be read.
func sumOf(path string) string {
	s, err := FileSum(path)
	if err != nil {
		return ""
	}
	return s
}
