package cli

import (
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/report"
)

type checkFlags struct {
	json    bool
	verbose bool
	list    bool
	only    []string
	deep    bool
}

func newCheckCmd(a *App) *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check this machine and print a report (plain, or --json)",
		Long: `Runs every check (all are quick: they read the machine, nothing is launched)
and prints one line per check with a status mark and timing; -v adds details
and evidence. The deeper test — real collectives on the GPUs — is "ncclwiz test".

JSON (--json): {"schema": 1, "host": {...}, "summary": {...}, "checks": [...],
"findings": [{"check", "severity", "title", "detail", "evidence", "guide", "fixes"}]}.
Exit codes: 0 no warnings or errors, 1 problems found, 2 usage or internal error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCheck(cmd, a, f) },
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print the versioned JSON report (with --list-checks: the checks, docs/checks.schema.json)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "show details and evidence for every finding")
	fl.BoolVar(&f.list, "list-checks", false, "list the checks and exit")
	fl.StringSliceVar(&f.only, "only", nil, "run only these checks (IDs or categories, comma-separated)")
	// --deep selected a tier of slow checks that never had a member; it is
	// kept, hidden, only to tell scripts that still pass it (on stderr:
	// cobra's deprecation notice would land in the --json on stdout).
	fl.BoolVar(&f.deep, "deep", false, "")
	_ = fl.MarkHidden("deep")
	fl.StringVar(&a.Peer, "peer", "", "HOST:PORT of your rank-0 host (or any peer) for net.rendezvous to test: route, DNS, TCP connect")
	return cmd
}

const deepGone = `ncclwiz: --deep is no longer needed: every check runs without it. For a deeper test of the machine, run "ncclwiz test" (collectives on the GPUs).`

func runCheck(cmd *cobra.Command, a *App, f checkFlags) error {
	reg, err := all.Registry()
	if err != nil {
		return fmt.Errorf("build check registry: %w", err)
	}
	if f.list && f.json {
		return writeJSON(a, checkListDoc(reg.All()))
	}
	if f.list {
		tw := tabwriter.NewWriter(a.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCATEGORY\tTIER\tNEEDS\tTITLE")
		for _, c := range reg.All() {
			needs := "-"
			if len(c.Needs) > 0 {
				var ns []string
				for _, n := range c.Needs {
					ns = append(ns, string(n))
				}
				needs = strings.Join(ns, ",")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.ID, c.Category, c.Tier, needs, c.Title)
		}
		return tw.Flush()
	}
	if f.deep {
		fmt.Fprintln(a.Stderr, deepGone)
	}
	selected, err := reg.Select(f.only)
	if err != nil {
		return err
	}
	h, err := a.Host()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmdContext(cmd), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	results := checks.Run(ctx, h, selected, checks.Options{})
	if f.json {
		if err := report.WriteJSON(a.Stdout, h, results, a.VersionString()); err != nil {
			return err
		}
	} else if err := report.WritePlain(a.Out(), h, results, report.PlainOptions{Verbose: f.verbose, Context: a.Context()}); err != nil {
		return err
	}
	if code := checks.ExitCode(results); code != 0 {
		return ExitError{Code: code}
	}
	return nil
}
