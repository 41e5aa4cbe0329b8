package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// NewRoot builds the command tree.
func NewRoot(a *App) *cobra.Command {
	var listScenarios, verbose bool
	root := &cobra.Command{
		Use:   "ncclwiz",
		Short: "Diagnose and fix NCCL / multi-GPU PyTorch failures on this machine",
		Long: `ncclwiz walks you from an NCCL error to a verified fix: it detects what is wrong
on this machine (/dev/shm, processes, GPUs, environment, network), explains it,
fixes it with your consent (or exports a script), and validates the fix.

Run it with no arguments in a terminal for the wizard; without a terminal (or
with TERM=dumb) it prints the same report as "ncclwiz check". The wizard never
queries the terminal, so nothing it asks can be answered into your shell.

Exit codes: 0 healthy, 1 problems found, 2 usage or internal error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		// --version prints what the version command prints.
		Version: a.versionLine(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listScenarios {
				return printScenarios(a)
			}
			if a.StdinTTY() && a.StdoutTTY() {
				if t := termio.Getenv(a.Env, "TERM"); t == "dumb" {
					// The wizard needs cursor addressing and an alternate
					// screen, which a dumb terminal does not have: the
					// plain report, and why.
					fmt.Fprintf(a.Stderr, "ncclwiz: TERM=%s cannot show the wizard (it needs cursor movement); here is the plain report. "+
						"For the wizard, set TERM to your terminal (for example TERM=xterm-256color).\n\n", t)
					return runCheck(cmd, a, checkFlags{})
				}
				return runWizard(cmd, a)
			}
			return runCheck(cmd, a, checkFlags{verbose: verbose})
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(a.Stdin)
	root.SetOut(a.Stdout)
	root.SetErr(a.Stderr)
	pf := root.PersistentFlags()
	pf.BoolVar(&a.NoColor, "no-color", false, "turn colour off (NO_COLOR with any value does the same)")
	pf.StringVar(&a.ShmPath, "shm-path", "", "shared-memory directory to inspect (default /dev/shm)")
	pf.StringVar(&a.Scenario, "scenario", "", "run against a simulated practice server (see --list-scenarios)")
	root.Flags().BoolVar(&listScenarios, "list-scenarios", false, "list the simulated practice servers and exit")
	// -v means --verbose everywhere (check, explain, and here without a
	// terminal); --version has no short form.
	root.Flags().BoolVarP(&verbose, "verbose", "v", false, "without a terminal: show details and evidence for every finding (as check -v)")
	root.Flags().Bool("version", false, "print the version and build (as ncclwiz version)")
	pf.BoolVar(&a.Debug, "debug", false, "print the commands run on other nodes (ssh, pdsh, srun) to stderr; NCCLWIZ_DEBUG=1 does the same")
	pf.StringVar(&a.Lang, "lang", "", "language of the guides: en or zh (default from the locale); the interface is in English, and a guide not yet translated is marked [English]")
	pf.StringVar(&a.Python, "python", "", "the Python interpreter of your training (default: the job's ranks' venv or interpreter, else the active venv/conda env, else python3 on PATH)")
	pf.StringVar(&a.FixtureDir, "fixture", "", "read the machine from a fixture tree (testing)")
	_ = pf.MarkHidden("fixture")
	addTestHooks(pf, a)

	// Each command lives in its own file; add new ones here.
	root.AddCommand(
		newCheckCmd(a),
		newVersionCmd(a),
		newReportCmd(a),
		newFixCmd(a),
		newEnvCmd(a),
		newFallbackCmd(a),
		newGuidesCmd(a),
		newExplainCmd(a),
		newTestCmd(a),
		newHangCmd(a),
		newClusterCmd(a),
		newManCmd(),
	)
	registerCompletions(root)
	applyConventions(root)
	return root
}

// Execute runs the command line and returns the error for ExitCode.
func Execute(a *App, args []string) error {
	root := NewRoot(a)
	root.SetArgs(args)
	err := root.Execute()
	a.Close()
	if err != nil && ExitCode(err) == 2 {
		PrintError(a.Stderr, err)
	}
	return err
}

// PrintError is the one place a command's error reaches the terminal.
// Errors echo what the user typed (an unknown flag, a check ID, a path),
// so control bytes and escapes are made visible and secrets redacted.
func PrintError(w io.Writer, err error) {
	_, _ = io.WriteString(w, "ncclwiz: "+textsafe.SanitizeMultiline(textsafe.RedactText(err.Error()))+"\n")
}
