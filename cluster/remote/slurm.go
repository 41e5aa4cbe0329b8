package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/cluster"
	"github.com/ncclwiz/ncclwiz/internal/shellquote"
)

// SlurmSpec says which nodes srun reaches.
type SlurmSpec struct {
	JobID    string   // --slurm-job, or SLURM_JOB_ID inside an allocation
	NodeList string   // a Slurm node list (node[01-04]) for a new step
	Nodes    []string // the expanded list, for nodes that never answer
}

// srunArgs builds the srun command line for one step: one task per node,
// output labelled with the task number, no node killing the others, and
// --overlap so the step runs beside a hung job that holds the allocation.
func srunArgs(s SlurmSpec, timeout time.Duration, bcast string, program ...string) []string {
	n := strconv.Itoa(len(s.Nodes))
	a := []string{"--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1", "--label", "--kill-on-bad-exit=0",
		"--overlap", "--time=" + strconv.Itoa(max(1, int((timeout+time.Minute-1)/time.Minute)))}
	if s.JobID != "" {
		a = append(a, "--jobid="+s.JobID)
	}
	if s.NodeList != "" {
		a = append(a, "--nodelist="+s.NodeList)
		if s.JobID == "" {
			// A new allocation: do not sit in the queue past the timeout.
			a = append(a, "--immediate="+strconv.Itoa(max(1, int(timeout.Seconds()))))
		}
	}
	if bcast != "" {
		a = append(a, "--bcast="+bcast)
	}
	return append(a, program...)
}

// Slurm runs the check as a job step.
type Slurm struct {
	opts Options
	spec SlurmSpec
	srun string
	sum  string
	bins map[string]binInfo
}

// NewSlurm prepares the Slurm engine; srun is the program to run.
func NewSlurm(o Options, spec SlurmSpec, srun string) (*Slurm, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if len(spec.Nodes) == 0 {
		return nil, errors.New("slurm: no nodes (set --nodelist, --slurm-job, or run inside an allocation)")
	}
	bins, err := loadBinaries(o)
	if err != nil {
		return nil, err
	}
	sum, err := FileSum(o.LocalBinary)
	if err != nil {
		return nil, err
	}
	return &Slurm{opts: o, spec: spec, srun: srun, sum: sum, bins: bins}, nil
}

const (
	markNode    = "@@ncclwiz-node@@"
	markRemoved = "@@ncclwiz-removed@@"
)

// nodeLine makes every task say which node it runs on: the task number in
// --label output is not a node name.
const nodeLine = `echo ` + markNode + ` "${SLURMD_NODENAME:-$(hostname)}"; `

var (
	srunTaskErr  = regexp.MustCompile(`srun: error: ([^:]+): tasks? ([0-9,\-]+): (.*)$`)
	srunExitCode = regexp.MustCompile(`[Ee]xited with exit code (\d+)`)
)

// step runs one srun and returns each task's output by node name, plus
// srun's errors by node.
func (s *Slurm) step(ctx context.Context, bcast string, program ...string) (map[string][]byte, map[string]string, error) {
	// Task output is keyed by task number; callers name the tasks.
	ctx, cancel := context.WithTimeout(ctx, s.opts.NodeTimeout+30*time.Second)
	defer cancel()
	s.opts.trace(s.srun, srunArgs(s.spec, s.opts.NodeTimeout, bcast, program...))
	cmd := exec.CommandContext(ctx, s.srun, srunArgs(s.spec, s.opts.NodeTimeout, bcast, program...)...)
	cmd.WaitDelay = 2 * time.Second
	out := &limitedBuffer{max: s.opts.OutputLimit * min(len(s.spec.Nodes), 64)}
	errb := &limitedBuffer{max: 1 << 20}
	cmd.Stdout, cmd.Stderr = out, errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil, nil, fmt.Errorf("run srun: %w", err)
	}
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("srun did not finish within %s: %s", s.opts.NodeTimeout+30*time.Second, lastLines(string(errb.Bytes()), 2))
	}
	tasks := splitLabelled(out.Bytes())
	errs := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(errb.Bytes()))
	for sc.Scan() {
		if m := srunTaskErr.FindStringSubmatch(sc.Text()); m != nil {
			errs[m[1]] = m[3]
		}
	}
	if len(tasks) == 0 && len(errs) == 0 {
		return nil, nil, fmt.Errorf("srun gave no output: %s", lastLines(string(errb.Bytes()), 3))
	}
	return tasks, errs, nil
}

// splitLabelled demultiplexes `srun --label` output ("3: text") into
// each task's text by task number.
func splitLabelled(b []byte) map[string][]byte {
	tasks := map[string]*bytes.Buffer{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		label, rest, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		label = strings.TrimSpace(label)
		if _, err := strconv.Atoi(label); err != nil {
			continue
		}
		if tasks[label] == nil {
			tasks[label] = &bytes.Buffer{}
		}
		tasks[label].WriteString(rest + "\n")
	}
	out := make(map[string][]byte, len(tasks))
	for l, buf := range tasks {
		out[l] = buf.Bytes()
	}
	return out
}

// taskNodes names each task by the node line it printed first.
func taskNodes(tasks map[string][]byte) map[string]string {
	out := map[string]string{}
	for l, b := range tasks {
		first, _, _ := bytes.Cut(b, []byte("\n"))
		if name, ok := strings.CutPrefix(string(first), markNode+" "); ok {
			out[l] = strings.TrimSpace(name)
		}
	}
	return out
}

// byNode re-keys task output by node name.
func byNode(tasks map[string][]byte, names map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for l, b := range tasks {
		if n, ok := names[l]; ok {
			out[n] = b
		}
	}
	return out
}

// Run probes every node in one step, then runs the check from the shared
// path, or with --bcast to a private path that a last step removes.
func (s *Slurm) Run(ctx context.Context) (Outcome, error) {
	sent := time.Now()
	probeTasks, probeErr, err := s.step(ctx, "", "sh", "-c", nodeLine+probeScript(s.opts.RemotePath))
	received := time.Now()
	if err != nil {
		return Outcome{}, err
	}
	// With one task per node on the same nodes, task numbers map to the
	// same nodes in every step; the probe's node lines name them.
	names := taskNodes(probeTasks)
	probeOut := byNode(probeTasks, names)
	allShared := s.opts.Copy != CopyAlways
	// One srun --bcast sends one file to every node: the nodes must agree
	// on the build; a node no build fits is reported, not run.
	unfit := map[string][2]string{}
	var bcast *binInfo
	for _, n := range s.spec.Nodes {
		p := parseProbe(probeOut[n])
		if p.clock == nil {
			continue
		}
		b, reason, msg := choose(s.bins, p)
		if reason != "" {
			unfit[n] = [2]string{reason, msg}
			continue
		}
		if bcast != nil && bcast.path != b.path {
			return Outcome{}, fmt.Errorf("the nodes of this allocation are of more than one architecture (linux/%s and linux/%s): srun --bcast sends one file, so check each partition on its own, or use --hosts with ssh", bcast.arch, b.arch)
		}
		bcast = &b
		if !p.present || p.sum != b.sum {
			allShared = false
		}
	}
	if bcast == nil {
		bcast = &binInfo{path: s.opts.LocalBinary, sum: s.sum}
	}
	var notes []string
	var checkTasks map[string][]byte
	var checkErr map[string]string
	delivery := "shared"
	switch {
	case allShared:
		checkTasks, checkErr, err = s.step(ctx, "", "sh", "-c", nodeLine+sharedScript(s.opts.RemotePath, checkCmd(s.opts.CheckArgs), s.opts.NodeTimeout))
		notes = append(notes, fmt.Sprintf("ncclwiz ran from the shared path %s (same checksum as this binary) on every node", s.opts.RemotePath))
	case s.opts.Copy == CopyNever:
		return Outcome{}, fmt.Errorf("%s is not this ncclwiz on every node, and copying is off (--copy never)", s.opts.RemotePath)
	default:
		dest, err := bcastPath()
		if err != nil {
			return Outcome{}, err
		}
		delivery = "copied"
		args := append([]string{bcast.path}, "check", "--json", "--no-color")
		checkTasks, checkErr, err = s.step(ctx, dest, append(args, s.opts.CheckArgs...)...)
		// Remove the broadcast copies whatever happened, and hear each
		// node say so.
		rmTasks, _, rmErr := s.step(context.WithoutCancel(ctx), "", "sh", "-c",
			nodeLine+"rm -f -- "+shellquote.Quote(dest)+" && echo "+markRemoved)
		var kept []string
		if rmErr == nil {
			done := byNode(rmTasks, taskNodes(rmTasks))
			for _, n := range s.spec.Nodes {
				if !bytes.Contains(done[n], []byte(markRemoved)) {
					kept = append(kept, n)
				}
			}
		}
		note := fmt.Sprintf("this ncclwiz was broadcast by srun --bcast to %s on every node", dest)
		switch {
		case rmErr != nil:
			note += "; removing it failed: " + rmErr.Error()
		case len(kept) > 0:
			note += "; removing it was not confirmed on " + strings.Join(kept, ", ")
		default:
			note += " and removed afterwards"
		}
		notes = append(notes, note)
		if err != nil {
			return Outcome{}, err
		}
	}
	if err != nil {
		return Outcome{}, err
	}
	checkOut := byNode(checkTasks, names)
	out := Outcome{Notes: notes}
	for _, name := range s.spec.Nodes {
		n := cluster.Node{Name: name, Delivery: delivery}
		p := parseProbe(probeOut[name])
		if p.clock == nil {
			n.Status, n.Reason = cluster.StatusUnreachable, "srun"
			n.Error = orDefault(probeErr[name], "no output from this node's task")
			out.Nodes = append(out.Nodes, n)
			continue
		}
		// The window is the whole srun step (scheduling included): a
		// loose bound, but minutes of skew still show.
		off, e := clockOffset(*p.clock, sent, received)
		n.ClockOffset, n.ClockError = &off, e
		if u, ok := unfit[name]; ok {
			n.Status, n.Reason, n.Error, n.Delivery = cluster.StatusFailed, u[0], u[1], ""
			out.Nodes = append(out.Nodes, n)
			continue
		}
		b, ok := checkOut[name]
		if !ok {
			n.Status, n.Reason, n.Error = cluster.StatusFailed, "remote-error", orDefault(checkErr[name], "no output from this node's task")
			out.Nodes = append(out.Nodes, n)
			continue
		}
		rr := runResult{stdout: b, stderr: []byte(checkErr[name])}
		if m := srunExitCode.FindStringSubmatch(checkErr[name]); m != nil {
			rr.exit, _ = strconv.Atoi(m[1])
		}
		out.Nodes = append(out.Nodes, finish(n, rr, s.opts))
	}
	sort.SliceStable(out.Nodes, func(i, j int) bool { return out.Nodes[i].Name < out.Nodes[j].Name })
	return out, nil
}

// bcastPath is a fresh, unguessable path on the nodes' local /tmp.
func bcastPath() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random name: %w", err)
	}
	return "/tmp/ncclwiz-bcast-" + hex.EncodeToString(b[:]), nil
}

func orDefault(s, d string) string {
	if strings.TrimSpace(s) == "" {
		return d
	}
	return s
}
