package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/steps"
	"github.com/ncclwiz/ncclwiz/textsafe"
)

type fixFlags struct {
	apply    []string
	yes      bool
	dryRun   bool
	export   string
	allUsers bool
}

func newFixCmd(a *App) *cobra.Command {
	var f fixFlags
	cmd := &cobra.Command{
		Use:   "fix",
		Short: "List, apply or export the fixes for what ncclwiz finds",
		Long: `Without flags, lists the fixes that apply to this machine now, each with
what it will do and the exact commands it stands for.

  --apply ID,...   apply these fixes, asking before each (or --yes)
  --dry-run        show what --apply would do, change nothing
  --export FILE    write a reviewed bash script (dry run by default; run it
                   with --apply), user steps and root steps separated

Fix IDs: ` + strings.Join(steps.IDs(), ", ") + `.
Exit codes: 0 done (or nothing to do), 1 a fix failed or its re-check still
reports problems, 2 usage error (unknown fix, no consent without a TTY).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runFix(cmd.Context(), a, f) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.apply, "apply", nil, "apply these fixes (IDs, comma-separated)")
	fl.BoolVarP(&f.yes, "yes", "y", false, "do not ask for confirmation")
	fl.BoolVar(&f.dryRun, "dry-run", false, "show what would be done without changing anything")
	fl.StringVar(&f.export, "export", "", "write the fixes as a bash script to FILE")
	fl.BoolVar(&f.allUsers, "all-users", false, "shm.cleanup: also remove other users' orphaned segments (root only)")
	return cmd
}

// findingsNow runs every check on h.
func findingsNow(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	reg, err := all.Registry()
	if err != nil {
		return nil, err
	}
	return checks.Flatten(checks.Run(ctx, h, reg.All(), checks.Options{})), nil
}

func runFix(ctx context.Context, a *App, f fixFlags) error {
	h, err := a.Host()
	if err != nil {
		return err
	}
	for _, id := range f.apply {
		if !known(id) {
			return usageError{fmt.Errorf("unknown fix %q (one of %s)", id, strings.Join(steps.IDs(), ", "))}
		}
	}
	findings, err := findingsNow(ctx, h)
	if err != nil {
		return err
	}
	plan := steps.PlanFor(ctx, h, findings, f.apply)
	out := a.Stdout
	if f.export != "" {
		return exportFixes(ctx, a, h, plan, findings, f.export)
	}
	if len(f.apply) == 0 {
		return listFixes(out, plan)
	}
	var chosen []steps.Fix
	for _, id := range f.apply {
		fx, ok := steps.ByID(plan, id)
		if !ok {
			fmt.Fprintf(out, "%s: nothing to do on this machine now.\n", id)
			continue
		}
		chosen = append(chosen, fx)
	}
	if f.dryRun {
		for _, fx := range chosen {
			printFix(out, fx)
		}
		fmt.Fprintln(out, "\nDry run: nothing was changed.")
		return nil
	}
	interactive := a.StdinTTY()
	if !f.yes && !interactive {
		return usageError{fmt.Errorf("no terminal to ask for confirmation: pass --yes to apply, or --export FILE to write a script to review")}
	}
	in := bufio.NewReader(a.Stdin)
	ask := func(q string) bool {
		if f.yes {
			return true
		}
		fmt.Fprintf(out, "%s [y/N] ", q)
		line, _ := in.ReadString('\n')
		ans := strings.ToLower(strings.TrimSpace(line))
		return ans == "y" || ans == "yes"
	}
	failed := false
	for _, fx := range chosen {
		printFix(out, fx)
		if fx.Manual {
			fmt.Fprintln(out, "  (nothing to apply: follow the lines above)")
			continue
		}
		if fx.Impossible != "" {
			fmt.Fprintf(out, "  not possible here: %s\n  instead: %s\n", fx.Impossible, fx.Alternative)
			failed = true
			continue
		}
		if !ask("Apply " + fx.ID + "?") {
			fmt.Fprintln(out, "  skipped.")
			continue
		}
		res, err := fx.Apply(ctx, h, steps.ApplyOptions{Yes: true, Confirm: ask, ForceKill: false, AllUsers: f.allUsers,
			Progress: func(s string) { fmt.Fprintln(out, "  "+textsafe.Clean(s)) }})
		if err != nil {
			fmt.Fprintf(out, "  failed: %s\n", textsafe.Clean(err.Error()))
			failed = true
			continue
		}
		fmt.Fprintf(out, "  %s\n", textsafe.Clean(res.Summary))
		for _, s := range res.Skipped {
			fmt.Fprintf(out, "  left alone: %s\n", textsafe.Clean(s))
		}
		for _, r := range res.Recheck {
			mark := "passes"
			if r.Worst().IsProblem() {
				mark = "still reports problems"
				failed = true
			}
			fmt.Fprintf(out, "  re-check %s %s\n", r.ID, mark)
		}
	}
	if failed {
		return ExitError{Code: 1}
	}
	return nil
}

func known(id string) bool {
	for _, k := range steps.IDs() {
		if k == id {
			return true
		}
	}
	return false
}

func listFixes(out io.Writer, plan []steps.Fix) error {
	if len(plan) == 0 {
		_, err := fmt.Fprintln(out, "No fix applies to this machine now (ncclwiz check shows why).")
		return err
	}
	fmt.Fprintf(out, "%d fix(es) apply to this machine:\n", len(plan))
	for _, fx := range plan {
		printFix(out, fx)
	}
	_, err := fmt.Fprintln(out, "\nApply with: ncclwiz fix --apply ID   (or export a script: ncclwiz fix --export fix.sh)")
	return err
}

func printFix(out io.Writer, fx steps.Fix) {
	tags := []string{"risk " + string(fx.Risk)}
	if fx.NeedsRoot {
		tags = append(tags, "needs root")
	}
	if fx.Manual {
		tags = append(tags, "manual")
	}
	fmt.Fprintf(out, "\n%s — %s  (%s)\n", fx.ID, textsafe.Clean(fx.Title), strings.Join(tags, ", "))
	fmt.Fprintf(out, "  %s\n", textsafe.Clean(fx.Summary))
	if fx.Impossible != "" {
		fmt.Fprintf(out, "  not possible here: %s; instead: %s\n", textsafe.Clean(fx.Impossible), textsafe.Clean(fx.Alternative))
	}
	for _, l := range fx.Preview() {
		fmt.Fprintf(out, "    %s\n", textsafe.Clean(l))
	}
}

func exportFixes(ctx context.Context, a *App, h *host.Host, plan []steps.Fix, findings []checks.Finding, path string) error {
	var w io.Writer = a.Stdout
	if path != "-" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		defer f.Close()
		w = f
	}
	if err := steps.ExportScript(ctx, w, h, plan, findings, a.VersionString()); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if path != "-" {
		fmt.Fprintf(a.Stderr, "wrote %s with %d fix(es); review it, then: bash %s (dry run) and bash %s --apply\n", path, len(plan), path, path)
	}
	return nil
}
