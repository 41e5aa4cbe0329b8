package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/hang"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

type hangFlags struct {
	pid      int
	interval time.Duration
	json     bool
	raw      bool
	noRAS    bool
	rasText  bool
	rasAddr  string
	dumps    string
	pySpy    bool
	yes      bool
}

func newHangCmd(a *App) *cobra.Command {
	var f hangFlags
	cmd := &cobra.Command{
		Use:   "hang",
		Short: "Look at a running job that hangs: which rank, where, and why (read-only)",
		Long: `Finds the distributed job on this machine — by RANK/LOCAL_RANK, Open MPI,
PMI and Slurm variables, the launcher tree (torchrun, mpirun, mp.spawn, a
custom Python launcher), the rendezvous (MASTER_ADDR/PORT) and the launchers'
--rdzv flags; orphaned ranks and several launchers of one job too; also inside
containers — then watches every rank for --interval (its main thread read 20
times: state and wait channel; CPU per thread, bytes written, stdout/stderr
growth, store sockets, GPU via NVML), asks NCCL's RAS service in the job's
network namespace where the job has NCCL >= 2.24, reads PyTorch's
flight-recorder dumps where torch >= 2.2 writes them, and compares the ranks:
progress is proof of life ("no hang"), a job that ends while watched is
"ended", and otherwise the rank that differs from the others — in whichever
direction — is the suspect, with the evidence, how sure that is and what
would make it surer.

Nothing is signalled, attached to or changed.

JSON (--json): see docs/hang.schema.json (schema 2).
Exit codes: 0 no hang (progress seen, the job ended, or no hang proven),
1 suspect rank found or the job is stuck, 2 usage error or nothing to inspect.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runHang(cmd, a, f) },
	}
	fl := cmd.Flags()
	fl.IntVar(&f.pid, "pid", 0, "the job to inspect: its launcher's, any rank's or any parent's PID (needed when several jobs run)")
	fl.DurationVar(&f.interval, "interval", hang.DefaultInterval, "how long each rank is watched")
	fl.BoolVar(&f.json, "json", false, "print the versioned JSON report")
	fl.BoolVar(&f.raw, "raw", false, "include RAS's reply as NCCL wrote it")
	fl.BoolVar(&f.noRAS, "no-ras", false, "do not connect to NCCL's RAS port")
	fl.BoolVar(&f.rasText, "ras-text", false, "ask RAS for its text report even when JSON is available (NCCL >= 2.28.7)")
	fl.StringVar(&f.rasAddr, "ras-addr", "", "HOST:PORT of the job's RAS service (default: NCCL_RAS_ADDR from the ranks, else localhost:28028)")
	fl.StringVar(&f.dumps, "dumps", "", "flight-recorder dump prefix, e.g. DIR/nccl_trace_rank_: alone, analyse those dumps only; with --pid, read them instead of the job's")
	fl.BoolVar(&f.pySpy, "py-spy", false, "show the Python stack of each suspect rank with `py-spy dump` (it attaches with ptrace: asks first)")
	fl.BoolVarP(&f.yes, "yes", "y", false, "with --py-spy: do not ask before attaching")
	return cmd
}

func runHang(cmd *cobra.Command, a *App, f hangFlags) error {
	if f.interval < 100*time.Millisecond || f.interval > 5*time.Minute {
		return usageError{fmt.Errorf("--interval %s: choose between 100ms and 5m", f.interval)}
	}
	if f.pid < 0 {
		return usageError{fmt.Errorf("--pid %d: a PID is a positive number", f.pid)}
	}
	if f.rasAddr != "" {
		if _, _, err := net.SplitHostPort(f.rasAddr); err != nil {
			return usageError{fmt.Errorf("--ras-addr %q: %w", f.rasAddr, err)}
		}
	}
	h, err := a.Host()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmdContext(cmd), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	o := hang.Options{Interval: f.interval, RASAddr: f.rasAddr, NoRAS: f.noRAS, RASText: f.rasText, DumpPrefix: f.dumps}
	var r *hang.Report
	if f.dumps != "" && f.pid == 0 {
		r = hang.InspectDumps(h, f.dumps) // a job that is gone or runs elsewhere: its dumps alone
		if r.ExitCode == 2 {
			return usageError{errors.New(r.Summary)}
		}
	} else {
		r, _, err = hang.Run(ctx, h, f.pid, o)
		var several hang.ErrSeveralJobs
		var none hang.PickError
		switch {
		case errors.As(err, &several):
			listJobs(a, several.Jobs)
			return usageError{err}
		case errors.As(err, &none):
			return usageError{err}
		case err != nil:
			return err
		}
	}
	if f.pySpy {
		r.Stacks = pySpyStacks(cmd, a, h, r, f.yes)
	}
	if f.json {
		if r.RAS != nil && !f.raw {
			r.RAS.Raw = ""
		} else if r.RAS != nil {
			r.RAS.Raw = textsafe.SanitizeMultiline(r.RAS.Raw)
		}
		enc := json.NewEncoder(a.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write the JSON report: %w", err)
		}
	} else if err := hang.WritePlain(a.Out().Writer(), r, f.raw, a.Out().Width); err != nil {
		return err
	}
	if r.ExitCode != 0 {
		return ExitError{Code: r.ExitCode}
	}
	return nil
}

// pySpyStacks asks before attaching py-spy to each suspect (on stderr, so
// --json output stays clean), or takes --yes as the answer.
func pySpyStacks(cmd *cobra.Command, a *App, h *host.Host, r *hang.Report, yes bool) []hang.Stack {
	targets := hang.PySpyTargets(r)
	if len(targets) == 0 {
		return nil
	}
	if _, err := h.Run(cmdContext(cmd), 5*time.Second, "py-spy", "--version"); errors.Is(err, host.ErrCommandNotFound) {
		fmt.Fprintln(a.Stderr, "ncclwiz: "+hang.ErrNoPySpy.Error())
		return []hang.Stack{{Rank: targets[0].Rank, PID: targets[0].PID, Error: hang.ErrNoPySpy.Error()}}
	}
	in := bufio.NewReader(a.Stdin)
	var out []hang.Stack
	for _, s := range targets {
		if !yes {
			if !a.StdinTTY() {
				out = append(out, hang.Stack{Rank: s.Rank, PID: s.PID, Error: "not run: no terminal to ask for consent (pass --yes)"})
				continue
			}
			fmt.Fprintf(a.Stderr, "py-spy attaches to rank %d (pid %d) with ptrace and pauses it while it reads the stack. Run `py-spy dump --pid %d`? [y/N] ", s.Rank, s.PID, s.PID)
			line, _ := in.ReadString('\n')
			if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
				out = append(out, hang.Stack{Rank: s.Rank, PID: s.PID, Error: "not run: you said no"})
				continue
			}
		}
		out = append(out, hang.PySpyDump(cmdContext(cmd), h, s))
	}
	return out
}

// listJobs prints the jobs the user can choose from with --pid.
func listJobs(a *App, jobs []hang.Job) {
	tw := tabwriter.NewWriter(a.Stderr, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tRANKS\tRUNNING\tCOMMAND")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\n", j.ID(), len(j.Ranks), j.Age.Round(time.Second), textsafe.Clean(j.Command()))
	}
	_ = tw.Flush()
}
