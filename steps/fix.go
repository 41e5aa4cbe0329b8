// Package steps holds ncclwiz's fixes, without any UI. A fix knows which
// findings it answers, says in words what it will do, shows the exact shell
// lines it stands for (the preview, and the body of an exported script),
// says whether it needs root or cannot work here and what to do instead,
// applies itself in Go, and names the checks to re-run as proof.
//
// Nothing here changes the machine except Fix.Apply, and every Apply
// re-proves its precondition at the moment it acts.
package steps

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/host"
)

// Risk grades what can go wrong when a fix is applied.
type Risk string

// Risks.
const (
	RiskNone   Risk = "none"   // prints advice only
	RiskLow    Risk = "low"    // removes or writes only what was proven unused / ncclwiz's own files
	RiskMedium Risk = "medium" // changes system configuration; reversible
	RiskHigh   Risk = "high"   // ends processes
)

// ApplyOptions carry consent and progress reporting into Apply.
type ApplyOptions struct {
	// Yes is true when the user already consented (--yes, or the wizard's
	// confirmation); Confirm is asked for each extra risky step otherwise.
	Yes     bool
	Confirm func(question string) bool
	// Progress receives one line per action taken.
	Progress func(string)
	// AllUsers lets shm.cleanup remove other users' orphaned files (root only).
	AllUsers bool
	// ForceKill lets proc.stale escalate to SIGKILL without asking again.
	ForceKill bool
}

func (o ApplyOptions) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

func (o ApplyOptions) confirm(q string) bool {
	if o.Yes {
		return true
	}
	return o.Confirm != nil && o.Confirm(q)
}

// Outcome reports what applying a fix changed.
type Outcome struct {
	Summary string
	Changed []string
	Skipped []string
	Before  map[string]any
	After   map[string]any
	// Recheck holds the re-run checks that prove (or disprove) the fix.
	Recheck []checks.Result
}

// Step is one shell step of a fix: the exact lines, and whether it needs root.
type Step struct {
	Comment string
	Lines   []string
	Root    bool
}

// Fix is one remedy, planned for this machine.
type Fix struct {
	ID, Title string
	// Summary says in words what applying it will do, with specifics.
	Summary string
	// Answers lists the check IDs whose findings it addresses.
	Answers   []string
	Risk      Risk
	NeedsRoot bool
	// Manual fixes only show what to do (a snippet or a command to run
	// elsewhere); applying one changes nothing.
	Manual bool
	// Impossible says why it cannot run here; Alternative what to do instead.
	Impossible, Alternative string
	// Steps are the exact shell lines, for preview and export.
	Steps []Step
	// Recheck lists the check IDs that prove the fix worked.
	Recheck []string
	apply   func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error)
}

// Preview returns the shell lines of the fix, one per line, with root
// steps marked.
func (f Fix) Preview() []string {
	var out []string
	for _, s := range f.Steps {
		if s.Comment != "" {
			out = append(out, "# "+s.Comment)
		}
		for _, l := range s.Lines {
			if s.Root && !f.Manual {
				out = append(out, "sudo "+l)
			} else {
				out = append(out, l)
			}
		}
	}
	return out
}

// ErrNotApplicable is returned by Apply for manual or impossible fixes.
var ErrNotApplicable = errors.New("this fix cannot be applied here")

// Apply performs the fix and re-runs its proof checks.
func (f Fix) Apply(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
	if f.Impossible != "" {
		return Outcome{}, fmt.Errorf("%s: %w: %s", f.ID, ErrNotApplicable, f.Impossible)
	}
	if f.apply == nil {
		return Outcome{Summary: "nothing to apply: " + f.Summary}, nil
	}
	if f.NeedsRoot && !h.IsRoot() && !h.Simulated {
		return Outcome{}, fmt.Errorf("%s needs root: run sudo ncclwiz fix --apply %s, or export a script with ncclwiz fix --export", f.ID, f.ID)
	}
	out, err := f.apply(ctx, h, o)
	if err != nil {
		return out, fmt.Errorf("%s: %w", f.ID, err)
	}
	out.Recheck = Recheck(ctx, h, f.Recheck)
	return out, nil
}

// Recheck runs the named checks again.
func Recheck(ctx context.Context, h *host.Host, ids []string) []checks.Result {
	if len(ids) == 0 {
		return nil
	}
	reg, err := all.Registry()
	if err != nil {
		return nil
	}
	sel, err := reg.Select(ids)
	if err != nil {
		return nil
	}
	return checks.Run(ctx, h, sel, checks.Options{})
}

// Passed reports whether every re-checked check is free of warnings and errors.
func (o Outcome) Passed() bool {
	for _, r := range o.Recheck {
		if r.Worst().IsProblem() {
			return false
		}
	}
	return true
}

// planners build each fix for this machine, or return nil when it does not
// apply. Order is the order fixes are listed: user-level first.
var planners = []func(ctx context.Context, h *host.Host, w wanted) *Fix{
	planCleanup,
	planStale,
	planEnv,
	planSingleGPU,
	planContainer,
	planRemount,
	planPersist,
	planRemoveIPC,
	planMemlock,
}

// wanted is what the findings asked for: fix ID → the findings naming it.
type wanted map[string][]checks.Finding

func (w wanted) has(id string) bool { return len(w[id]) > 0 }

// Plan returns the fixes that apply to the problems found, in order.
func Plan(ctx context.Context, h *host.Host, findings []checks.Finding) []Fix {
	w := wanted{}
	for _, f := range findings {
		for _, id := range f.Fixes {
			// Informational findings only feed the env snippet (e.g. "set
			// NCCL_DEBUG=INFO for the next run"); other fixes answer problems.
			if f.Severity.IsProblem() || (f.Severity == checks.Info && id == "env.export") {
				w[id] = append(w[id], f)
			}
		}
	}
	var out []Fix
	for _, p := range planners {
		if f := p(ctx, h, w); f != nil {
			out = append(out, *f)
		}
	}
	// Fixes that can run come before impossible ones.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Impossible == "" && out[j].Impossible != "" })
	return out
}

// ByID finds a planned fix.
func ByID(fs []Fix, id string) (Fix, bool) {
	for _, f := range fs {
		if f.ID == id {
			return f, true
		}
	}
	return Fix{}, false
}

// IDs lists every fix ncclwiz knows, for --help and validation.
func IDs() []string {
	return []string{"shm.cleanup", "proc.stale", "env.export", "launch.single-gpu", "container.shm", "shm.remount", "shm.persist", "systemd.removeipc", "limits.memlock"}
}
