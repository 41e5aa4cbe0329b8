// Package steps holds ncclwiz's fixes, without any UI (the wizard's flow
// lives in steps/flow, the screens in tui).
//
// # The fix model
//
// A Fix is planned for this machine from the findings that name it
// (Finding.Fixes). Planning reads the machine and freezes what the fix will
// act on — the exact segments, PIDs, sizes and lines — so that what the user
// previews is what Apply touches and what the exported script does:
//
//   - ID, Title, Summary (what it will do, in words), Answers (the check IDs
//     whose findings it answers) and Findings (their titles), Guide;
//   - Steps: the exact shell lines, shown as the preview and used by the
//     exported script, with root steps marked;
//   - Risk, NeedsRoot, Manual (only shows what to do), Impossible and
//     Alternative (cannot work here, e.g. inside a container, and what to do
//     instead);
//   - Apply, done in Go (no shell where Go can do it), re-proving each
//     precondition at the moment it acts, honouring ApplyOptions.DryRun;
//   - Recheck: the checks re-run as proof, reported in Outcome.Verdict.
//
// Plan orders fixes user-level first, then those needing root, then the
// impossible ones. ExportScript writes the same plan as a reviewable bash
// script (dry run by default).
//
// # Safety rules
//
//   - shm.cleanup removes only segments shm.Scan proved orphaned, that are
//     regular single-link files with printable names, owned by the user
//     (other users' only as root with PlanOptions.AllUsers); right before each
//     unlink it takes the kernel's write lease on it (granted only when no
//     other open file description exists anywhere), checks the device and
//     inode with fstatat(AT_SYMLINK_NOFOLLOW) and unlinks it while holding
//     the lease; a file that cannot be leased is moved aside and removed
//     only if a scan of every process and thread proves it unused (else it
//     is put back). Symlinks
//     are never followed or removed.
//   - proc.stale signals by PID only after re-reading the process's start
//     time (a recycled PID is never signalled); SIGKILL needs its own
//     consent (ApplyOptions.Kill or an interactive Confirm), never just Yes.
//   - Files ncclwiz writes (fstab, drop-ins) are backed up when they differ,
//     replaced atomically, and left alone when they already say the same.
//
// # Simulated hosts
//
// A practice scenario (host.Simulated) is a temporary copy of a fixture
// tree. Every fix works through the host seam: file fixes act on h.Path(…)
// (inside the copy), remounts and signals go through h.Act (which the
// scenario replaces with functions that edit its mountinfo and remove
// /proc/PID from the copy), and external commands (systemctl) are not run.
// So the wizard shows a real before/after and the real machine is never
// touched.
package steps

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/host"
)

// Risk grades what can go wrong when a fix is applied.
type Risk string

// Risks.
const (
	RiskNone   Risk = "none"   // prints advice only
	RiskLow    Risk = "low"    // removes only what was proven unused
	RiskMedium Risk = "medium" // changes system configuration; reversible (backups)
	RiskHigh   Risk = "high"   // ends processes
)

// ApplyOptions carry consent and progress reporting into Apply.
type ApplyOptions struct {
	// Yes means the user consented to the fix as previewed (--yes, or the
	// wizard's confirmation).
	Yes bool
	// Confirm asks about an escalation beyond the preview (SIGKILL of a rank
	// that ignored SIGTERM). Nil means no one can be asked: escalations are
	// then not taken unless Kill is set.
	Confirm func(question string) bool
	// Progress receives one line per action taken.
	Progress func(string)
	// DryRun re-proves every precondition and reports what would be done,
	// changing nothing.
	DryRun bool
	// Kill consents in advance to SIGKILL for ranks that ignore SIGTERM.
	Kill bool
	// Grace is how long proc.stale waits after SIGTERM (default 10 s).
	Grace time.Duration
	// Preview, when set, is what the user last saw (LastPreview):
	// proc.stale then acts only on the processes it listed and says why
	// any other is left alone or any listed one dropped out.
	Preview *Preview
	// Open names the other fixes of the plan that could still answer a
	// problem (possible here, not yet applied). A problem the re-check still
	// reports that one of them also answers is not held against this fix
	// (see Judge).
	Open []string
}

func (o ApplyOptions) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

// Verdicts of an Outcome.
const (
	VerdictPassed   = "passed"    // the re-check no longer reports what the fix answers
	VerdictFailed   = "failed"    // it still does, and no other open fix answers it
	VerdictHandedOn = "handed-on" // done; what is still reported, another open fix answers (Outcome.Answered)
	VerdictUnproven = "unproven"  // no re-check can prove it (yet): see Summary
	VerdictDryRun   = "dry-run"
)

// Outcome reports what applying a fix changed.
type Outcome struct {
	Summary string
	// Changed lists each change made ("removed /dev/shm/nccl-ab12cd (9.2 MiB)").
	Changed []string
	// Skipped lists what was left alone, and why.
	Skipped []string
	// Before and After hold the measured state (used bytes, size …).
	Before, After map[string]any
	// Recheck holds the re-run checks that prove (or disprove) the fix.
	Recheck []checks.Result
	// Remaining are re-check problems that still name this fix and that no
	// other open fix answers: they count against it.
	Remaining []checks.Finding
	// Answered are re-check problems that still name this fix but that
	// another open fix also answers (/dev/shm still full after a cleanup,
	// which the remount answers): named, not held against it.
	Answered []Answered
	// Verdict is one of the Verdict constants.
	Verdict string
	// Proof says how the fix verified itself when no check can (fstab is
	// read back and parsed).
	Proof string
}

// Passed reports whether the re-check proved the fix.
func (o Outcome) Passed() bool { return o.Verdict == VerdictPassed }

// Step is one group of shell lines of a fix.
type Step struct {
	Comment string
	// Lines are exact shell lines (comments allowed).
	Lines []string
	// Root steps need root; previews prefix their commands with sudo.
	Root bool
}

// Fix is one remedy, planned for this machine.
type Fix struct {
	ID, Title string
	// Summary says in words what applying it will do, with specifics.
	Summary string
	// Answers lists the check IDs whose findings it addresses; Findings
	// their titles.
	Answers  []string
	Findings []string
	// Guide is the guide that explains the problem it fixes.
	Guide     string
	Risk      Risk
	NeedsRoot bool
	// Manual fixes only show what to do (a snippet, or a command to run
	// elsewhere); applying one changes nothing.
	Manual bool
	// Impossible says why it cannot be applied here; Alternative what to do
	// instead.
	Impossible, Alternative string
	// Steps are the exact shell lines, for preview and export.
	Steps []Step
	// Recheck lists the check IDs that prove the fix worked.
	Recheck []string
	// Warnings are things the user should know before consenting (files
	// left alone, and why).
	Warnings []string

	asRoot bool
	// stale are proc.stale's targets, kept for RecordPreview.
	stale  []rank
	apply  func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error)
	script func(s *script)
}

// Preview returns the shell lines of the fix; root commands are prefixed
// with sudo unless ncclwiz already runs as root.
func (f Fix) Preview() []string {
	var out []string
	for _, s := range f.Steps {
		if s.Comment != "" {
			out = append(out, "# "+s.Comment)
		}
		heredoc := ""
		for _, l := range s.Lines {
			switch {
			case heredoc != "":
				if l == heredoc {
					heredoc = ""
				}
			case s.Root && !f.Manual && !f.asRoot && l != "" && l[0] != '#':
				l = "sudo " + l
			}
			if m := heredocStart.FindStringSubmatch(l); m != nil && heredoc == "" {
				heredoc = m[1]
			}
			out = append(out, l)
		}
	}
	return out
}

// heredocStart finds a here-document whose body follows (<<'EOF').
var heredocStart = regexp.MustCompile(`<<-?'?([A-Za-z_][A-Za-z0-9_]*)'?(?:\s|$)`)

// ErrNotApplicable is returned by Apply for impossible fixes.
var ErrNotApplicable = errors.New("this fix cannot be applied here")

// Apply performs the fix (or, with DryRun, proves what it would do) and
// re-runs its proof checks.
func (f Fix) Apply(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
	if f.Impossible != "" {
		return Outcome{}, fmt.Errorf("%s: %w: %s; instead: %s", f.ID, ErrNotApplicable, f.Impossible, f.Alternative)
	}
	if f.Manual || f.apply == nil {
		return Outcome{Summary: "nothing to apply here: " + f.Summary, Verdict: VerdictUnproven}, nil
	}
	// A simulation acts on its private copy only: without a root of its
	// own, its file fixes would reach the real /etc and /dev/shm.
	if h.Simulated && (h.Root == "" || h.Root == "/") {
		return Outcome{}, fmt.Errorf("%s: a simulated host must have its own root; refusing to act on /", f.ID)
	}
	if f.NeedsRoot && !h.IsRoot() && !h.Simulated && !o.DryRun {
		return Outcome{}, fmt.Errorf("%s needs root: run sudo ncclwiz fix --apply %s, or export a script (ncclwiz fix --export fix.sh) for an administrator", f.ID, f.ID)
	}
	out, err := f.apply(ctx, h, o)
	if err != nil {
		return out, fmt.Errorf("%s: %w", f.ID, err)
	}
	if o.DryRun {
		out.Verdict = VerdictDryRun
		return out, nil
	}
	if ctx.Err() != nil {
		// Interrupted: the outcome says how far it got; a re-check now
		// would only be cancelled too.
		out.Verdict = VerdictUnproven
		out.Proof = "none yet, it was interrupted; `ncclwiz check` shows what is left"
		return out, nil
	}
	if len(f.Recheck) > 0 {
		out.Recheck = Recheck(ctx, h, f.Recheck)
		j := Judge(f.ID, out.Recheck, o.Open)
		out.Remaining, out.Answered, out.Verdict = j.Remaining, j.Answered, j.Verdict
	}
	if out.Verdict == "" {
		out.Verdict = VerdictUnproven
	}
	return out, nil
}

// Answered is a problem the re-check still reports that other open fixes
// answer.
type Answered struct {
	Finding checks.Finding
	// By are the open fixes that answer it.
	By []string
}

// String names the problem and the fixes that answer it.
func (a Answered) String() string {
	return a.Finding.Title + ", which " + strings.Join(a.By, " or ") + " answers"
}

// HandedOnText is the handed-on verdict in words, for every front end.
func HandedOnText(as []Answered) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.String()
	}
	return "done; the re-check still reports " + strings.Join(parts, "; ")
}

// Judgement is the verdict on an applied fix.
type Judgement struct {
	Verdict   string
	Remaining []checks.Finding
	Answered  []Answered
}

// Judge is the one verdict rule, for the CLI and the wizard alike. From the
// checks re-run after fix id: failed when a problem finding still names the
// fix and no other open fix answers it; handed-on when every such problem is
// answered by another open fix (the fix did its part; what is left is
// another fix's job); unproven when no re-check could run in full; else
// passed.
func Judge(id string, rs []checks.Result, open []string) Judgement {
	var j Judgement
	ran := 0
	for _, r := range rs {
		complete := !r.Panicked
		for _, f := range r.Findings {
			if f.Severity == checks.Skipped {
				complete = false
			}
			if !f.Severity.IsProblem() || !slices.Contains(f.Fixes, id) {
				continue
			}
			var by []string
			for _, other := range f.Fixes {
				if other != id && slices.Contains(open, other) && !slices.Contains(by, other) {
					by = append(by, other)
				}
			}
			if len(by) == 0 {
				j.Remaining = append(j.Remaining, f)
			} else {
				j.Answered = append(j.Answered, Answered{Finding: f, By: by})
			}
		}
		if complete {
			ran++
		}
	}
	switch {
	case len(j.Remaining) > 0:
		j.Verdict = VerdictFailed
	case len(j.Answered) > 0:
		j.Verdict = VerdictHandedOn
	case ran == 0:
		j.Verdict = VerdictUnproven
	default:
		j.Verdict = VerdictPassed
	}
	return j
}

// Recheck runs the named checks again, one by one, with the engine's
// protections (timeouts, panic isolation). Unknown IDs are skipped: a
// domain may not be built into this binary.
func Recheck(ctx context.Context, h *host.Host, ids []string) []checks.Result {
	reg, err := all.Registry()
	if err != nil {
		return nil
	}
	var out []checks.Result
	for _, id := range ids {
		if c, ok := reg.Get(id); ok {
			out = append(out, checks.RunOne(ctx, h, c))
		}
	}
	return out
}

// PlanOptions tune planning.
type PlanOptions struct {
	// Want names fixes the user asked for explicitly; they are planned even
	// when no finding names them.
	Want []string
	// AllUsers lets shm.cleanup include other users' orphaned segments
	// (root only), listed separately in the preview.
	AllUsers bool
}

// request is what planners get: the findings naming their fix.
type request struct {
	findings map[string][]checks.Finding
	want     map[string]bool
	opts     PlanOptions
	// notes collects why a requested fix was not planned.
	notes map[string]string
}

func (r *request) wanted(id string) bool { return r.want[id] || len(r.findings[id]) > 0 }

func (r *request) note(id, why string) *Fix {
	if r.wanted(id) {
		r.notes[id] = why
	}
	return nil
}

// answers lists the check IDs and titles of the findings naming id.
func (r *request) answers(id string) (ids, titles []string) {
	seen := map[string]bool{}
	for _, f := range r.findings[id] {
		if !seen[f.Check] {
			seen[f.Check] = true
			ids = append(ids, f.Check)
		}
		titles = append(titles, f.Title)
	}
	sort.Strings(ids)
	return ids, titles
}

type planner struct {
	id   string
	plan func(ctx context.Context, h *host.Host, r *request) *Fix
	// with plans this fix too when one of these is wanted (persisting a
	// remount).
	with []string
}

// planners in display order within each group.
var planners = []planner{
	{"shm.cleanup", planCleanup, nil},
	{"proc.stale", planStale, nil},
	{"env.export", planEnv, nil},
	{"launch.single-gpu", planSingleGPU, nil},
	{"container.shm", planContainer, nil},
	{"shm.remount", planRemount, nil},
	{"shm.persist", planPersist, []string{"shm.remount"}},
	{"systemd.removeipc", planRemoveIPC, nil},
	{"limits.memlock", planMemlock, nil},
}

// IDs lists every fix ncclwiz knows.
func IDs() []string {
	out := make([]string, len(planners))
	for i, p := range planners {
		out[i] = p.id
	}
	return out
}

// Known reports whether id is a fix ID.
func Known(id string) bool { return slices.Contains(IDs(), id) }

// Plan returns the fixes that apply to the problems found, in order.
func Plan(ctx context.Context, h *host.Host, findings []checks.Finding) []Fix {
	fs, _ := PlanWith(ctx, h, findings, PlanOptions{})
	return fs
}

// PlanFor plans the named fixes even when no finding asked for them (an
// explicit `ncclwiz fix --apply ID`), plus whatever the findings ask for.
func PlanFor(ctx context.Context, h *host.Host, findings []checks.Finding, ids []string) []Fix {
	fs, _ := PlanWith(ctx, h, findings, PlanOptions{Want: ids})
	return fs
}

// PlanWith plans with options and also returns, for fixes that were asked
// for but are not needed or possible now, the reason.
func PlanWith(ctx context.Context, h *host.Host, findings []checks.Finding, opts PlanOptions) ([]Fix, map[string]string) {
	r := &request{findings: map[string][]checks.Finding{}, want: map[string]bool{}, opts: opts, notes: map[string]string{}}
	for _, f := range findings {
		for _, id := range f.Fixes {
			// Informational findings only feed the env snippet ("set
			// NCCL_DEBUG=INFO for the next run"); other fixes answer problems.
			if f.Severity.IsProblem() || (f.Severity == checks.Info && id == "env.export") {
				r.findings[id] = append(r.findings[id], f)
			}
		}
	}
	for _, id := range opts.Want {
		r.want[id] = true
	}
	var out []Fix
	for _, p := range planners {
		if !r.wanted(p.id) && !slices.ContainsFunc(p.with, r.wanted) {
			continue
		}
		if f := p.plan(ctx, h, r); f != nil {
			f.asRoot = h.IsRoot()
			if len(f.Answers) == 0 {
				for _, id := range append([]string{p.id}, p.with...) {
					a, t := r.answers(id)
					for _, x := range a {
						if !slices.Contains(f.Answers, x) {
							f.Answers = append(f.Answers, x)
						}
					}
					f.Findings = append(f.Findings, t...)
				}
			}
			out = append(out, *f)
		} else if _, ok := r.notes[p.id]; !ok && r.wanted(p.id) {
			r.notes[p.id] = "nothing to do on this machine now"
		}
	}
	rank := func(f Fix) int {
		switch {
		case f.Impossible != "":
			return 2
		case f.NeedsRoot:
			return 1
		}
		return 0
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out, r.notes
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
