package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/safefile"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/steps"
)

type fixFlags struct {
	apply    []string
	yes      bool
	dryRun   bool
	export   string
	allUsers bool
	kill     bool
	json     bool
}

func newFixCmd(a *App) *cobra.Command {
	var f fixFlags
	cmd := &cobra.Command{
		Use:   "fix",
		Short: "List, preview, apply or export the fixes for what ncclwiz finds",
		Long: `Without flags, lists the fixes that apply to this machine now: what each
will do, the findings it answers, and the exact commands it stands for.

  --apply ID,...   apply these fixes, asking before each one (or --yes); each
                   re-proves its precondition as it acts, then the checks it
                   answers run again as proof
  --dry-run        with --apply (or alone, for every fix): prove and print
                   exactly what would happen; change nothing
  --export FILE    write the fixes as a bash script to review or hand to an
                   administrator: a dry run unless run with --apply, user and
                   root steps separated, each step re-checked when it runs,
                   safe to run twice ("-" writes to stdout)

Without a terminal, --apply needs --yes (or use --export).
SIGKILL of a rank that ignores SIGTERM is never implied by --yes: it is asked
on a terminal, or agreed in advance with --kill.

Fix IDs: ` + strings.Join(steps.IDs(), ", ") + `.
Ctrl-C (or SIGTERM, SIGHUP) while a fix is applied stops it after the file or
process it is on — never half-way through one — and prints what was done; the
fixes after it are not applied.

Exit codes: 0 done or nothing to do; 1 a fix failed, could not be applied, or
its re-check still reports the problem; 2 usage error or no consent;
130 interrupted.`,
		Example: `  ncclwiz fix
  ncclwiz fix --apply shm.cleanup --dry-run
  ncclwiz fix --apply shm.cleanup,proc.stale
  sudo ncclwiz fix --apply shm.remount,shm.persist --yes
  ncclwiz fix --export fix.sh && bash fix.sh && bash fix.sh --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runFix(cmd.Context(), a, f) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.apply, "apply", nil, "apply these fixes (IDs, comma-separated)")
	fl.BoolVarP(&f.yes, "yes", "y", false, "do not ask before applying each fix")
	fl.BoolVar(&f.dryRun, "dry-run", false, "prove and show what would be done; change nothing")
	fl.StringVar(&f.export, "export", "", "write the fixes as a bash script to `FILE` (- for stdout)")
	fl.BoolVar(&f.allUsers, "all-users", false, "shm.cleanup: include other users' orphaned segments (root only)")
	fl.BoolVar(&f.json, "json", false, "print the plan as JSON (docs/fix.schema.json) and apply nothing; with --apply, add --dry-run")
	fl.BoolVar(&f.kill, "kill", false, "proc.stale: send SIGKILL to ranks that ignore SIGTERM, without asking")
	return cmd
}

// findingsNow runs every check on h.
func findingsNow(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	reg, err := all.Registry()
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return checks.Flatten(checks.Run(ctx, h, reg.All(), checks.Options{})), nil
}

func runFix(ctx context.Context, a *App, f fixFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var ids []string
	for _, id := range f.apply {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if !steps.Known(id) {
			return usageError{fmt.Errorf("unknown fix %q (one of %s)", id, strings.Join(steps.IDs(), ", "))}
		}
		ids = append(ids, id)
	}
	if f.json && (f.export != "" || f.yes || f.kill || (len(ids) > 0 && !f.dryRun)) {
		return usageError{errors.New("--json prints the plan and applies nothing: use it alone, or with --apply ID --dry-run (not with --yes, --kill or --export)")}
	}
	if f.export != "" && f.dryRun {
		return usageError{errors.New("--export writes a script that is itself a dry run by default; drop --dry-run")}
	}
	h, err := a.Host()
	if err != nil {
		return err
	}
	if f.allUsers && !h.IsRoot() && !h.Simulated {
		return usageError{errors.New("--all-users needs root: other users' files may only be removed by root")}
	}
	findings, err := findingsNow(ctx, h)
	if err != nil {
		return err
	}
	plan, notes := steps.PlanWith(ctx, h, findings, steps.PlanOptions{Want: ids, AllUsers: f.allUsers})
	out := a.Stdout
	if f.json {
		if len(ids) > 0 {
			plan = chosen(io.Discard, plan, notes, ids)
		}
		rememberPreview(a, h, plan)
		return writeJSON(a, fixPlanDoc(a, h.Simulated, plan, notPlanned(plan, notes, ids)))
	}
	full := plan
	if len(ids) > 0 {
		plan = chosen(out, plan, notes, ids)
	}
	switch {
	case f.export != "":
		return exportFixes(a, h, plan, findings, f.export)
	case len(ids) == 0 && !f.dryRun:
		rememberPreview(a, h, plan)
		return listFixes(out, plan)
	}
	if len(plan) == 0 {
		return nil
	}
	interactive := a.StdinTTY()
	if !f.dryRun && !f.yes && !interactive {
		return usageError{errors.New("no terminal to ask for consent: pass --yes to apply the fixes as previewed by `ncclwiz fix`, or write a script to review with --export FILE")}
	}
	in := bufio.NewReader(a.Stdin)
	prompt := func(q string) bool {
		fmt.Fprintf(out, "%s [y/N] ", q)
		line, _ := in.ReadString('\n')
		ans := strings.ToLower(strings.TrimSpace(line))
		return ans == "y" || ans == "yes"
	}
	failed := false
	applied := map[string]bool{}
	for i, fx := range plan {
		printFix(out, fx, true)
		switch {
		case fx.Impossible != "":
			fmt.Fprintf(out, "  not possible here; instead: %s\n", textsafe.Clean(fx.Alternative))
			failed = failed || !f.dryRun
			continue
		case fx.Manual:
			fmt.Fprintln(out, "  nothing to apply: this fix is the advice above.")
			continue
		}
		if !f.dryRun && !f.yes && !prompt("Apply "+fx.ID+"?") {
			fmt.Fprintln(out, "  skipped.")
			continue
		}
		progressed := 0
		opts := steps.ApplyOptions{Yes: true, DryRun: f.dryRun, Kill: f.kill, Open: openFixes(full, fx.ID, applied),
			Progress: func(s string) { progressed++; fmt.Fprintln(out, "  "+textsafe.Clean(s)) }}
		if fx.ID == "proc.stale" {
			// --yes agrees in advance to what the user saw: the last
			// preview, not a plan scrolling past now. Without --yes the
			// plan above, just agreed to, is the preview.
			if f.yes && !f.dryRun {
				if pv, why := steps.LastPreview(h); pv != nil {
					opts.Preview = pv
					fmt.Fprintf(out, "  --yes: acting only on the processes of the preview you saw at %s, each judged again.\n", pv.When.Local().Format("15:04:05"))
				} else {
					fmt.Fprintf(out, "  --yes: %s; acting on the plan printed above.\n", why)
				}
			} else {
				rememberPreview(a, h, []steps.Fix{fx})
			}
		}
		if interactive {
			opts.Confirm = prompt
		}
		res, interrupted, err := applyInterruptible(ctx, h, fx, opts)
		if err != nil {
			fmt.Fprintf(out, "  failed: %s\n", textsafe.Clean(err.Error()))
			failed = true
		} else {
			applied[fx.ID] = !f.dryRun
			if progressed > 0 {
				res.Changed = nil // already shown as they happened
			}
			if !printOutcome(out, res, f.dryRun) {
				failed = true
			}
		}
		if interrupted != nil {
			fmt.Fprintf(out, "\nInterrupted (%s): %s stopped where shown above", interrupted, fx.ID)
			if rest := len(plan) - 1 - i; rest > 0 {
				fmt.Fprintf(out, "; %s not applied", units.Count(rest, "more fix was", "more fixes were"))
			}
			fmt.Fprintln(out, ".")
			return ExitError{Code: 130}
		}
	}
	if f.dryRun {
		fmt.Fprintln(out, "\nDry run: nothing was changed.")
	}
	if failed {
		return ExitError{Code: 1}
	}
	return nil
}

// rememberPreview keeps proc.stale's part of the plan just shown as the
// user's preview (steps.RecordPreview); failing to keep it is said, not
// fatal: a later --yes then acts on the plan it prints.
func rememberPreview(a *App, h *host.Host, plan []steps.Fix) {
	if err := steps.RecordPreview(h, plan); err != nil {
		fmt.Fprintf(a.Stderr, "ncclwiz: %s\n", textsafe.Clean(err.Error()))
	}
}

// openFixes are the fixes of the plan, other than id, that could still
// answer a problem: possible here and not applied yet (steps.Judge).
func openFixes(plan []steps.Fix, id string, applied map[string]bool) []string {
	var open []string
	for _, fx := range plan {
		if fx.ID != id && fx.Impossible == "" && !applied[fx.ID] {
			open = append(open, fx.ID)
		}
	}
	return open
}

// applyInterruptible applies one fix with SIGINT, SIGTERM and SIGHUP
// turned into a cancelled context, so that the fix finishes (or leaves
// untouched) what it is on and returns what it did instead of the process
// dying mid-way. Outside Apply the signals act as usual. The signal that
// stopped it is returned, else nil.
func applyInterruptible(ctx context.Context, h *host.Host, fx steps.Fix, opts steps.ApplyOptions) (steps.Outcome, os.Signal, error) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	stopped := make(chan os.Signal, 1)
	go func() {
		select {
		case sig := <-sigs:
			cancel()
			stopped <- sig
		case <-done:
			stopped <- nil
		}
	}()
	res, err := fx.Apply(ctx, h, opts)
	close(done)
	got := <-stopped
	if got == nil && ctx.Err() != nil {
		got = interruptedBy{ctx.Err()} // the caller's context ended
	}
	return res, got, err
}

// interruptedBy names a cancellation that came from the caller's context.
type interruptedBy struct{ err error }

func (i interruptedBy) String() string { return i.err.Error() }
func (interruptedBy) Signal()          {}

// chosen keeps the planned fixes the user named, and says for the others
// why there is nothing to do.
func chosen(out io.Writer, plan []steps.Fix, notes map[string]string, ids []string) []steps.Fix {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var keep []steps.Fix
	for _, fx := range plan {
		if want[fx.ID] {
			keep = append(keep, fx)
			delete(want, fx.ID)
		}
	}
	var missing []string
	for id := range want {
		missing = append(missing, id)
	}
	sort.Strings(missing)
	for _, id := range missing {
		why := notes[id]
		if why == "" {
			why = noFixHere
		}
		fmt.Fprintf(out, "%s: %s.\n", id, textsafe.Clean(why))
	}
	return keep
}

// notPlanned is, for each of ids without a planned fix, why (as chosen
// prints it).
func notPlanned(plan []steps.Fix, notes map[string]string, ids []string) map[string]string {
	out := map[string]string{}
	for _, id := range ids {
		if slices.ContainsFunc(plan, func(fx steps.Fix) bool { return fx.ID == id }) {
			continue
		}
		why := notes[id]
		if why == "" {
			why = noFixHere
		}
		out[id] = why
	}
	return out
}

// noFixHere is why a named fix is not planned when the planner gave no reason.
const noFixHere = "nothing to do on this machine now"

func listFixes(out io.Writer, plan []steps.Fix) error {
	if len(plan) == 0 {
		_, err := fmt.Fprintln(out, "No fix applies to this machine now (`ncclwiz check` shows what was looked at).")
		return err
	}
	fmt.Fprintf(out, "%d fix%s for this machine:\n", len(plan), map[bool]string{true: "", false: "es"}[len(plan) == 1])
	for _, fx := range plan {
		printFix(out, fx, false)
	}
	_, err := fmt.Fprintln(out, "\nApply: ncclwiz fix --apply ID[,ID]   Preview: add --dry-run   Script: ncclwiz fix --export fix.sh")
	return err
}

func printFix(out io.Writer, fx steps.Fix, applying bool) {
	tags := []string{"risk: " + string(fx.Risk)}
	if fx.NeedsRoot {
		tags = append(tags, "needs root")
	}
	if fx.Manual {
		tags = append(tags, "advice")
	}
	if fx.Impossible != "" {
		tags = append(tags, "not possible here")
	}
	fmt.Fprintf(out, "\n%s — %s  [%s]\n", fx.ID, textsafe.Clean(fx.Title), strings.Join(tags, ", "))
	if len(fx.Answers) > 0 {
		fmt.Fprintf(out, "  answers: %s\n", strings.Join(fx.Answers, ", "))
	}
	for _, l := range textwrap.Lines(textsafe.Clean(fx.Summary), 76) {
		fmt.Fprintln(out, "  "+l)
	}
	if fx.Impossible != "" {
		fmt.Fprintf(out, "  not possible here: %s\n", textsafe.Clean(fx.Impossible))
		if !applying {
			fmt.Fprintf(out, "  instead: %s\n", textsafe.Clean(fx.Alternative))
		}
	}
	for _, w := range fx.Warnings {
		fmt.Fprintf(out, "  left alone: %s\n", textsafe.Clean(w))
	}
	if fx.Guide != "" {
		fmt.Fprintf(out, "  guide: ncclwiz guides %s\n", fx.Guide)
	}
	for _, l := range fx.Preview() {
		fmt.Fprintf(out, "    %s\n", textsafe.Clean(l))
	}
}

// printOutcome prints what a fix did and its proof; false when it failed.
func printOutcome(out io.Writer, res steps.Outcome, dryRun bool) bool {
	for _, c := range res.Changed {
		fmt.Fprintf(out, "  %s\n", textsafe.Clean(c))
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(out, "  left alone: %s\n", textsafe.Clean(s))
	}
	fmt.Fprintf(out, "  %s\n", textsafe.Clean(res.Summary))
	if dryRun {
		return true
	}
	for _, r := range res.Recheck {
		fmt.Fprintf(out, "  re-check %s: %s\n", r.ID, worstText(r))
	}
	switch {
	case res.Proof != "":
		fmt.Fprintf(out, "  proof: %s.\n", textsafe.Clean(res.Proof))
	case res.Verdict == steps.VerdictPassed:
		fmt.Fprintln(out, "  proof: the re-check no longer reports the problem.")
	case res.Verdict == steps.VerdictHandedOn:
		fmt.Fprintf(out, "  %s.\n", textsafe.Clean(steps.HandedOnText(res.Answered)))
	case res.Verdict == steps.VerdictFailed:
		for _, f := range res.Remaining {
			fmt.Fprintf(out, "  still reported: [%s] %s\n", f.Severity, textsafe.Clean(f.Title))
		}
		for _, a := range res.Answered {
			fmt.Fprintf(out, "  still reported: [%s] %s\n", a.Finding.Severity, textsafe.Clean(a.String()))
		}
		return false
	default:
		fmt.Fprintln(out, "  proof: not possible yet (see above); run `ncclwiz check` once it takes effect.")
	}
	return true
}

func worstText(r checks.Result) string {
	w := r.Worst()
	for _, f := range r.Findings {
		if f.Severity == w {
			return fmt.Sprintf("%s — %s", w, textsafe.Clean(f.Title))
		}
	}
	return w.String()
}

func exportFixes(a *App, h *host.Host, plan []steps.Fix, findings []checks.Finding, path string) error {
	if path == "-" {
		return steps.ExportScriptWith(a.Stdout, h, plan, findings, steps.ExportOptions{Version: a.VersionString()})
	}
	var b strings.Builder
	if err := steps.ExportScriptWith(&b, h, plan, findings, steps.ExportOptions{Version: a.VersionString()}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	// Never a half-written script, never written through a symlink.
	if err := safefile.Write(path, []byte(b.String()), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if name := steps.PracticeName(h); name != "" {
		fmt.Fprintf(a.Stderr, "wrote %s with %s: a practice script for the simulated scenario %s. Read it to see what the fixes would do there; "+
			"it runs none of them, and refuses --apply. For this machine: ncclwiz fix --export FILE (without --scenario)\n", textsafe.Sanitize(path), units.Count(len(plan), "fix", "fixes"), name)
		return nil
	}
	fmt.Fprintf(a.Stderr, "wrote %s with %s. Review it, then: bash %s (dry run), then bash %s --apply\n", textsafe.Sanitize(path), units.Count(len(plan), "fix", "fixes"), textsafe.Sanitize(path), textsafe.Sanitize(path))
	return nil
}
