package cli

import (
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/validate"
)

type testFlags struct {
	backend   string
	ncclTests string
	rungs     []string
	env       []string
	timeout   time.Duration
	json      bool
	gpus      int
	tolerance float64
	logDir    string
	maxSize   string
	contain   string
}

func newTestCmd(a *App) *cobra.Command {
	var f testFlags
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Prove NCCL works here: a small collective test on the GPUs (a ladder of runs)",
		Long: `Launches a small collective test on this machine's GPUs and judges it:

  single  one GPU: driver, CUDA and NCCL start and compute correctly
  all     all visible GPUs with NCCL's defaults (your NCCL_* variables left out)
  shm     shared memory only (NCCL_P2P_DISABLE=1)
  net     network only (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)
  fix     the candidate fix: --env KEY=VALUE, else your shell's NCCL_* variables

Each rung checks every value exactly first (all_reduce and all_gather from
8 bytes to 256 MiB), then the transports NCCL actually used (from its
NCCL_DEBUG=INFO lines), then the bus bandwidth of the largest all_reduce
against the expected range for the detected GPUs and links (NVLink H100/A100,
PCIe by generation and width; each range cites its source). A measurement
that is missing fails. The fix rung is shown side by side with "all" (A/B).

Backends: torchrun with a small torch.distributed script (the interpreter
of your training, by the rule nccl.stack uses too: --python, else the
venv or interpreter of the job's ranks running here, else the active venv
or conda env, else python3 on PATH), or nccl-tests' all_reduce_perf (on
PATH or --nccl-tests DIR).
Each rung runs with a timeout, contained so that nothing it starts can
outlive ncclwiz: in its own PID namespace (a user namespace too when not
root) where the system allows it, else below a child subreaper, and in its
own cgroup where ncclwiz's cgroup is writable. On timeout, Ctrl-C, SIGTERM,
a closed terminal (SIGHUP) and at the normal end, every process of the run
still alive is killed and listed (PID and command, also in --json); the
private directory /tmp/ncclwiz-test-* is removed. If ncclwiz itself is
killed (SIGKILL), its keeper process ends the run and removes the directory;
if both are killed, the PID namespace's end kills the rest.

JSON (--json): {"schema": 1, "backend", "gpus", "system", "rungs": [{"rung",
"status", "reasons", "transports", "sizes", "large_busbw_gbps", "expected",
"bandwidth", ...}], "ab", "pass", "verdict", "notes"}.
Exit codes: 0 every rung passed, 1 a rung failed (or the test was
interrupted), 2 the test cannot run here (no GPU, no backend) or usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTest(cmd, a, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.backend, "backend", validate.BackendAuto, "auto, torchrun or nccl-tests")
	fl.StringVar(&f.ncclTests, "nccl-tests", "", "directory holding all_reduce_perf (DIR or DIR/build)")
	fl.StringSliceVar(&f.rungs, "rungs", nil, "rungs to run (single,all,shm,net,fix; default all of them)")
	fl.StringArrayVar(&f.env, "env", nil, "candidate fix variable KEY=VALUE (repeat for several)")
	fl.DurationVar(&f.timeout, "timeout", validate.DefaultTimeout, "time limit for each rung")
	fl.BoolVar(&f.json, "json", false, "print the versioned JSON result")
	fl.IntVar(&f.gpus, "gpus", 0, "number of GPUs to use (default: all visible)")
	fl.Float64Var(&f.tolerance, "tolerance", validate.DefaultTolerance, "fraction of the expected range's low end a rung must reach")
	fl.StringVar(&f.logDir, "log-dir", "", "keep each rung's full output in DIR/<rung>.log")
	fl.StringVar(&f.maxSize, "max-size", "256M", "largest message size (bandwidth is judged at 64M and above)")
	fl.StringVar(&f.contain, "contain", "", "how to contain the test's processes: pid-namespace or subreaper (default: the strongest available)")
	return cmd
}

// parseSize reads 256M, 1G, 4096.
func parseSize(arg string) (int64, error) {
	s := strings.TrimSpace(strings.ToUpper(arg))
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (64<<30)/mult {
		return 0, fmt.Errorf("--max-size %q: want a size such as 256M or 1G", arg)
	}
	return n * mult, nil
}

func (f testFlags) options() (validate.Options, error) {
	maxBytes, err := parseSize(f.maxSize)
	if err != nil {
		return validate.Options{}, err
	}
	if f.timeout <= 0 {
		return validate.Options{}, errors.New("--timeout must be positive")
	}
	if f.gpus < 0 {
		return validate.Options{}, errors.New("--gpus must not be negative")
	}
	if f.tolerance <= 0 || f.tolerance > 1 {
		return validate.Options{}, errors.New("--tolerance must be in (0, 1]")
	}
	return validate.Options{
		Backend: f.backend, NCCLTestsDir: f.ncclTests, Rungs: f.rungs, Env: f.env,
		Timeout: f.timeout, Tolerance: f.tolerance, MaxBytes: maxBytes, NGPUs: f.gpus, LogDir: f.logDir,
		Contain: f.contain,
	}, nil
}

func runTest(cmd *cobra.Command, a *App, f testFlags) error {
	opts, err := f.options()
	if err != nil {
		return usageError{err}
	}
	h, err := a.Host()
	if err != nil {
		return err
	}
	// SIGHUP too: a closed terminal (tmux kill-session, a dropped SSH
	// session) must end the test's processes like Ctrl-C does.
	ctx, stop := signal.NotifyContext(cmdContext(cmd), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if !f.json {
		p := &progress{w: a.Stdout}
		opts.OnEvent = p.event
	}
	res, err := validate.Run(ctx, h, opts)
	var cr *validate.CannotRunError
	switch {
	case errors.As(err, &cr):
		if f.json {
			if err := writeJSON(a, map[string]any{"schema": validate.ResultSchema, "can_run": false, "reasons": cr.Reasons, "hints": cr.Hints}); err != nil {
				return err
			}
		} else if err := validate.WriteCannotRun(a.Stdout, cr); err != nil {
			return err
		}
		return cr // Execute prints its first reason on stderr; exit 2
	case err != nil:
		return usageError{err}
	}
	if f.json {
		if err := writeJSON(a, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(a.Stdout)
		if err := validate.WriteReport(a.Stdout, res); err != nil {
			return err
		}
		if res.Containment != "" {
			// Which layer held the test's processes (a fallback is in
			// the notes above).
			fmt.Fprintf(a.Stdout, "The test's processes ran in %s; any still running at the end were killed and are listed above.\n", res.Containment)
		}
	}
	if !res.Pass {
		return ExitError{Code: 1}
	}
	return nil
}

// progress prints the live transcript of a run, one line per event worth
// reading (all_gather sizes are left to the report).
type progress struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *progress) event(e validate.Event) {
	line := progressLine(e)
	if line == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Kind == validate.EventRungStart {
		fmt.Fprintln(p.w)
	}
	fmt.Fprintln(p.w, textsafe.Sanitize(line))
	if e.Kind == validate.EventRungStart && len(e.Command) > 0 {
		fmt.Fprintln(p.w, textsafe.Sanitize("  $ "+strings.Join(append(append([]string{}, e.Env...), e.Command...), " ")))
	}
}

func progressLine(e validate.Event) string {
	switch e.Kind {
	case validate.EventPlan:
		return "ncclwiz test: " + e.Text
	case validate.EventNote:
		return "  note: " + e.Text
	case validate.EventRungStart:
		return fmt.Sprintf("[%s] %s", e.Rung, e.Text)
	case validate.EventTransport:
		return "  " + e.Text
	case validate.EventMeasure:
		if e.Size == nil || e.Size.Op != "all_reduce" {
			return ""
		}
		s := e.Size
		mark := "ok"
		if !s.OK {
			mark = fmt.Sprintf("%d WRONG", s.Wrong)
		}
		return fmt.Sprintf("  all_reduce %9s  busbw %8.2f GB/s  %s", validate.FormatBytes(s.Bytes), s.BusBW, mark)
	case validate.EventLog:
		t := e.Text
		if len(t) > 200 {
			t = t[:200] + "…"
		}
		return "  ! " + t
	case validate.EventRungDone:
		if e.Result == nil {
			return ""
		}
		return fmt.Sprintf("  => %s: %s", e.Result.Status, e.Result.Summary())
	}
	return ""
}
