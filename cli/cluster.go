package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/cluster"
	"github.com/ncclwiz/ncclwiz/cluster/mesh"
	"github.com/ncclwiz/ncclwiz/cluster/nodes"
	"github.com/ncclwiz/ncclwiz/cluster/remote"
	"github.com/ncclwiz/ncclwiz/internal/safefile"
	"github.com/ncclwiz/ncclwiz/internal/termio"
)

type clusterFlags struct {
	hosts, hostfile, nodelist, slurmJob, fromJSON string
	slurm                                         bool
	engine                                        string
	sshConfig                                     string
	sshOptions                                    []string
	connectTimeout, timeout                       time.Duration
	fanout                                        int
	remotePath, copyMode                          string
	binaries                                      map[string]string
	only                                          []string
	json, allFacts                                bool
	maxRows                                       int
	save                                          string
	mesh                                          bool
	master                                        string
}

func newClusterCmd(a *App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Check every node of a multi-node job and name the odd one out",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newClusterCheckCmd(a), newMeshListenCmd(a), newMeshProbeCmd(a))
	return cmd
}

// newMeshListenCmd is the node side of --mesh (hidden: cluster check runs
// it on the nodes).
func newMeshListenCmd(a *App) *cobra.Command {
	var lifetime time.Duration
	var addr string
	var lifeline bool
	cmd := &cobra.Command{
		Use:    "mesh-listen",
		Short:  "Listen on a free port for --mesh peers (run by cluster check on the nodes)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if lifetime <= 0 || lifetime > time.Hour {
				return usageError{errors.New("--lifetime must be between 0 and 1h")}
			}
			var ll io.Reader
			if lifeline {
				ll = a.Stdin
			}
			return mesh.Listen(cmdContext(cmd), a.Stdout, ll, lifetime, addr)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "the address to listen on: NCCL's interface on this node (required)")
	cmd.Flags().DurationVar(&lifetime, "lifetime", time.Minute, "stop listening after this long")
	cmd.Flags().BoolVar(&lifeline, "lifeline", false, "also stop when stdin ends")
	return cmd
}

func newMeshProbeCmd(a *App) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:    "mesh-probe NAME=HOST:PORT...",
		Short:  "Connect to --mesh peers and MASTER_ADDR (run by cluster check on the nodes)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ts []mesh.Target
			for _, s := range args {
				t, err := mesh.ParseTarget(s)
				if err != nil {
					return usageError{err}
				}
				ts = append(ts, t)
			}
			res := mesh.Probe(cmdContext(cmd), ts, timeout, func(t mesh.Target) bool { return t.Name != cluster.MasterName })
			return json.NewEncoder(a.Stdout).Encode(res)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "connect timeout per peer")
	return cmd
}

func newClusterCheckCmd(a *App) *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Run `ncclwiz check --json` on every node and compare what must agree",
		Long: `Reaches every node with the engines you already have — pdsh -R ssh when
installed, else plain ssh (BatchMode, ConnectTimeout, ControlMaster reuse),
or Slurm's srun — runs "ncclwiz check --json" there and compares the facts
that must agree across a job: NCCL, torch, CUDA, driver, GPUs, NCCL_* and
TORCH_NCCL_* settings, NCCL's interface, its MTU and subnet, IB/RoCE ports,
/dev/shm size, memlock, container runtime and the clock.

ncclwiz runs from the same path on the nodes when a shared filesystem holds
this very binary (checked by sha256); otherwise this binary is copied to a
private temp directory on each node, verified and removed afterwards. The
report says which. Each node is first asked for its architecture (uname -m)
and C library: a node of another architecture (an x86 login node, Grace
compute nodes) gets the build given with --binary ARCH=PATH, and without one
is reported with what to install (reason arch); a musl node, or one whose
glibc is older than a cgo build needs, likewise (reason libc). A node that
cannot be reached, or does not answer within --timeout, is reported with the
reason (dns, refused, auth, timeout …).

Nodes: --hosts a,b,c (ranges like gpu[01-08] work), --hostfile FILE,
--slurm (inside an allocation), --slurm-job ID, --nodelist LIST, or
--from-json DIR (one NODE.json per node, collected any way you like).

--mesh then starts a short-lived listener on every node and has every node
connect to every other on the interface NCCL would pick (and to --master
HOST:PORT), listing the pairs that cannot connect.

Exit codes: 0 every node reached and agreeing with no problems of its own,
1 problems found, 2 usage or internal error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmdContext(cmd), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runClusterCheck(ctx, a, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.hosts, "hosts", "", "nodes to check, comma-separated (gpu[01-04] ranges work)")
	fl.StringVar(&f.hostfile, "hostfile", "", "file with one node per line (# comments; MPI slots=N ignored)")
	fl.BoolVar(&f.slurm, "slurm", false, "inside a Slurm allocation: check its nodes with srun")
	fl.StringVar(&f.slurmJob, "slurm-job", "", "check the nodes of this running Slurm job (srun --jobid --overlap)")
	fl.StringVar(&f.nodelist, "nodelist", "", "Slurm node list (node[01-04]) for a new srun step")
	fl.StringVar(&f.fromJSON, "from-json", "", "aggregate NODE.json reports from this directory instead of reaching nodes")
	fl.StringVar(&f.engine, "engine", "auto", "for --hosts/--hostfile: auto (pdsh when installed, else ssh), pdsh or ssh")
	fl.StringVarP(&f.sshConfig, "ssh-config", "F", "", "ssh client config file (ssh -F)")
	fl.StringArrayVar(&f.sshOptions, "ssh-option", nil, "extra ssh option KEY=VALUE, as ssh -o (repeatable)")
	fl.DurationVar(&f.connectTimeout, "connect-timeout", 10*time.Second, "ssh connect and handshake timeout")
	fl.DurationVar(&f.timeout, "timeout", 120*time.Second, "per-node timeout for reaching the node and its check")
	fl.IntVar(&f.fanout, "fanout", 32, "nodes checked at once")
	fl.StringVar(&f.remotePath, "remote-path", "", "where ncclwiz is on the nodes (default: this binary's path)")
	fl.StringVar(&f.copyMode, "copy", "auto", "copy this binary to nodes: auto (when the remote path is not this binary), never, always")
	fl.StringToStringVar(&f.binaries, "binary", nil, "an ncclwiz build for nodes of another architecture, ARCH=PATH (arm64=./ncclwiz_linux_arm64/ncclwiz); repeatable. Each node's uname -m picks the build")
	fl.StringSliceVar(&f.only, "only", nil, "run only these checks on the nodes (as check --only)")
	fl.BoolVar(&f.json, "json", false, "print the versioned JSON (docs/cluster.schema.json)")
	fl.BoolVarP(&f.allFacts, "all-facts", "a", false, "show every fact column, not only those that differ")
	fl.IntVar(&f.maxRows, "max-rows", 50, "node rows in the plain table (0: all); suspects are always listed")
	fl.StringVar(&f.save, "save", "", "also write each node's report to DIR/NODE.json (for --from-json)")
	fl.BoolVar(&f.mesh, "mesh", false, "also test that every node reaches every other on NCCL's interface (ssh/pdsh engines)")
	fl.StringVar(&f.master, "master", "", "with --mesh: MASTER_ADDR:MASTER_PORT every node must reach")
	return cmd
}

func (f clusterFlags) validate() error {
	sources := 0
	for _, set := range []bool{f.hosts != "" || f.hostfile != "", f.slurm || f.slurmJob != "" || f.nodelist != "", f.fromJSON != ""} {
		if set {
			sources++
		}
	}
	switch {
	case sources == 0:
		return errors.New("say which nodes: --hosts, --hostfile, --slurm, --slurm-job, --nodelist or --from-json")
	case sources > 1:
		return errors.New("use one node source: --hosts/--hostfile, Slurm (--slurm, --slurm-job, --nodelist) or --from-json")
	case f.hosts != "" && f.hostfile != "":
		return errors.New("--hosts and --hostfile together: use one")
	case f.engine != "auto" && f.engine != "ssh" && f.engine != "pdsh":
		return fmt.Errorf("--engine %q: want auto, ssh or pdsh", f.engine)
	case f.copyMode != "auto" && f.copyMode != "never" && f.copyMode != "always":
		return fmt.Errorf("--copy %q: want auto, never or always", f.copyMode)
	case f.timeout <= 0 || f.connectTimeout <= 0:
		return errors.New("--timeout and --connect-timeout must be positive")
	case f.fanout < 1:
		return errors.New("--fanout must be at least 1")
	case f.mesh && f.hosts == "" && f.hostfile == "":
		return errors.New("--mesh needs --hosts or --hostfile (it holds ssh sessions open on the nodes)")
	case f.master != "" && !f.mesh:
		return errors.New("--master is part of --mesh")
	}
	if f.master != "" {
		if _, _, err := net.SplitHostPort(f.master); err != nil {
			return fmt.Errorf("--master %q: want HOST:PORT: %w", f.master, err)
		}
	}
	return nil
}

func runClusterCheck(ctx context.Context, a *App, f clusterFlags) error {
	run, res, err := collectCluster(ctx, a, f)
	if err != nil {
		return err
	}
	if f.json {
		err = cluster.WriteJSON(a.Stdout, run, res)
	} else {
		err = cluster.WritePlain(termio.New(a.Stdout, a.Env, a.NoColor), run, res, cluster.PlainOptions{AllFacts: f.allFacts, MaxRows: f.maxRows})
	}
	if err != nil {
		return err
	}
	if res.Summary.ExitCode != 0 {
		return ExitError{Code: res.Summary.ExitCode}
	}
	return nil
}

// collectCluster reaches the nodes f names, runs the check there and
// aggregates the reports: the cluster check the CLI prints and the
// wizard's "Check all nodes" shows.
func collectCluster(ctx context.Context, a *App, f clusterFlags) (cluster.Run, cluster.Result, error) {
	if err := f.validate(); err != nil {
		return cluster.Run{}, cluster.Result{}, usageError{err}
	}
	// A practice scenario simulates one server. Reaching nodes (ssh, pdsh,
	// srun) would run real commands on real machines and present their
	// answers inside a simulation, so only --from-json (files, no machine)
	// is allowed with it.
	if a.Scenario != "" && f.fromJSON == "" {
		return cluster.Run{}, cluster.Result{}, usageError{fmt.Errorf("the practice scenario %q simulates one server; cluster check reaches real nodes "+
			"(ssh, pdsh or srun), so it does not run in a practice scenario and nothing was contacted. Without --scenario it checks your real nodes; "+
			"--from-json DIR aggregates reports saved as files", a.Scenario)}
	}
	opts := remote.Options{SSHConfig: f.sshConfig, SSHOptions: f.sshOptions, ConnectTimeout: f.connectTimeout,
		NodeTimeout: f.timeout, Fanout: f.fanout, RemotePath: f.remotePath, Copy: remote.CopyMode(f.copyMode), Binaries: f.binaries,
		Debug: a.DebugWriter()}
	if len(f.only) > 0 {
		opts.CheckArgs = []string{"--only", strings.Join(f.only, ",")}
	}
	var out remote.Outcome
	var engine string
	var err error
	var pairs []cluster.MeshPair
	switch {
	case f.fromJSON != "":
		engine = "json"
		out, err = remote.FromJSON(ctx, f.fromJSON)
		if err != nil {
			return cluster.Run{}, cluster.Result{}, usageError{err}
		}
	case f.slurm || f.slurmJob != "" || f.nodelist != "":
		engine = "slurm"
		out, err = runSlurm(ctx, a, f, opts)
	default:
		var eng hostEngine
		engine, eng, out, err = runHosts(ctx, f, opts)
		if err == nil && f.mesh {
			var notes []string
			var merr error
			pairs, notes, merr = eng.Mesh(ctx, out.Nodes, f.master)
			if merr != nil {
				return cluster.Run{}, cluster.Result{}, merr
			}
			out.Notes = append(out.Notes, notes...)
		}
	}
	if err != nil {
		return cluster.Run{}, cluster.Result{}, err
	}
	if ctx.Err() != nil {
		// Ctrl-C: the nodes cut short are not findings.
		return cluster.Run{}, cluster.Result{}, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if f.save != "" {
		if err := saveReports(f.save, out.Nodes); err != nil {
			return cluster.Run{}, cluster.Result{}, err
		}
	}
	res := cluster.Aggregate(out.Nodes)
	if f.mesh {
		res.AddMesh(pairs)
	}
	return cluster.Run{Engine: engine, Binary: opts.RemotePath, GeneratedAt: time.Now(), Version: a.VersionString(), Notes: out.Notes}, res, nil
}

// hostEngine is what --hosts/--hostfile engines do.
type hostEngine interface {
	Run(ctx context.Context, hosts []string) (remote.Outcome, error)
	Mesh(ctx context.Context, nodes []cluster.Node, master string) ([]cluster.MeshPair, []string, error)
}

func runHosts(ctx context.Context, f clusterFlags, opts remote.Options) (string, hostEngine, remote.Outcome, error) {
	var hosts []string
	var err error
	if f.hostfile != "" {
		hosts, err = nodes.ReadHostfile(ctx, f.hostfile)
	} else {
		hosts, err = nodes.ParseHosts(f.hosts)
	}
	if err != nil {
		return "", nil, remote.Outcome{}, usageError{err}
	}
	if len(hosts) == 0 {
		return "", nil, remote.Outcome{}, usageError{errors.New("no hosts given")}
	}
	pdsh, lookErr := exec.LookPath("pdsh")
	var note string
	switch {
	case f.engine == "pdsh" && lookErr != nil:
		return "", nil, remote.Outcome{}, usageError{errors.New("--engine pdsh: pdsh is not installed (apt-get install pdsh), or use --engine ssh")}
	case f.engine == "auto" && lookErr != nil:
		note = "pdsh is not installed: plain ssh with up to " + fmt.Sprint(opts.Fanout) + " nodes at once"
	}
	var eng hostEngine
	name := "pdsh"
	if f.engine == "ssh" || lookErr != nil {
		name = "ssh"
		eng, err = remote.NewSSH(opts)
	} else {
		eng, err = remote.NewPDSH(opts, pdsh)
	}
	if err != nil {
		return "", nil, remote.Outcome{}, err
	}
	out, err := eng.Run(ctx, hosts)
	if note != "" {
		out.Notes = append([]string{note}, out.Notes...)
	}
	return name, eng, out, err
}

func runSlurm(ctx context.Context, a *App, f clusterFlags, opts remote.Options) (remote.Outcome, error) {
	spec, err := slurmSpec(ctx, a, f)
	if err != nil {
		return remote.Outcome{}, err
	}
	srun, err := exec.LookPath("srun")
	if err != nil {
		return remote.Outcome{}, usageError{errors.New("srun is not on PATH: run on a Slurm login node, or use --hosts")}
	}
	eng, err := remote.NewSlurm(opts, spec, srun)
	if err != nil {
		return remote.Outcome{}, err
	}
	return eng.Run(ctx)
}

// slurmSpec finds the job and its nodes: the allocation we are in, a job
// by ID (squeue), or a node list.
func slurmSpec(ctx context.Context, a *App, f clusterFlags) (remote.SlurmSpec, error) {
	var s remote.SlurmSpec
	switch {
	case f.nodelist != "":
		s.NodeList = f.nodelist
		s.JobID = f.slurmJob
	case f.slurmJob != "":
		s.JobID = f.slurmJob
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		b, err := exec.CommandContext(cctx, "squeue", "-h", "-j", f.slurmJob, "-o", "%N").Output()
		if err != nil {
			return s, fmt.Errorf("find the nodes of job %s with squeue: %w", f.slurmJob, err)
		}
		s.NodeList = strings.TrimSpace(string(b))
	default:
		s.JobID = termio.Getenv(a.Env, "SLURM_JOB_ID")
		s.NodeList = termio.Getenv(a.Env, "SLURM_JOB_NODELIST")
		if s.NodeList == "" {
			s.NodeList = termio.Getenv(a.Env, "SLURM_NODELIST")
		}
		if s.JobID == "" || s.NodeList == "" {
			return s, usageError{errors.New("--slurm: not inside a Slurm allocation (no SLURM_JOB_ID/SLURM_JOB_NODELIST); use --slurm-job ID or --nodelist")}
		}
	}
	ns, err := nodes.ParseHosts(s.NodeList)
	if err != nil {
		return s, usageError{fmt.Errorf("node list %q: %w", s.NodeList, err)}
	}
	if len(ns) == 0 {
		return s, usageError{errors.New("the Slurm node list is empty (job not running?)")}
	}
	s.Nodes = ns
	return s, nil
}

// saveReports writes each reached node's report as DIR/NODE.json, the
// layout --from-json reads.
func saveReports(dir string, ns []cluster.Node) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--save: %w", err)
	}
	for _, n := range ns {
		if n.Report == nil {
			continue
		}
		name := strings.NewReplacer("/", "_", string(filepath.Separator), "_").Replace(n.Name)
		b, err := json.MarshalIndent(n.Report, "", "  ")
		if err != nil {
			return fmt.Errorf("--save %s: %w", n.Name, err)
		}
		if err := safefile.Write(filepath.Join(dir, name+".json"), append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("--save %s: %w", n.Name, err)
		}
	}
	return nil
}
