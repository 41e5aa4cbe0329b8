// Package tui renders the ncclwiz wizard with bubbletea v2: one root model
// that routes by stage (steps/flow) to small child models whose View returns
// a string. Every side effect (running checks, rendering a guide, applying a
// fix, launching the collective test) happens in a tea.Cmd that calls the
// functions in Deps, so the models stay testable with fakes.
package tui

import (
	"context"
	"time"

	"github.com/ncclwiz/ncclwiz/guideui"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
)

// GuideDoc names a guide.
type GuideDoc struct {
	ID, Title, Summary string
}

// FixView describes a fix for the checklist and its preview.
type FixView struct {
	ID, Title, Summary string
	Risk               string
	NeedsRoot          bool
	// Impossible is non-empty when the fix cannot run here; Alternative
	// says what to do instead.
	Impossible, Alternative string
	// Preview holds the exact shell lines the fix stands for.
	Preview []string
	// Answers lists the check IDs whose findings it addresses.
	Answers []string
	// Manual fixes only show what to do; choosing one shows its lines.
	Manual bool
	// Warnings are what the fix will leave alone, and why.
	Warnings []string
	// Plan identifies the planning run this view came from: ApplyFix applies
	// that run's fix (frozen when it was planned), never a fresh plan, so what
	// is applied is what was previewed.
	Plan int
}

// Fix verdicts, as steps.Outcome reports them (the CLI passes them through).
const (
	VerdictPassed   = "passed"    // no re-check finding names the fix any more
	VerdictFailed   = "failed"    // one still does, and no other open fix answers it
	VerdictHandedOn = "handed-on" // done; what is still reported, another open fix answers
	VerdictUnproven = "unproven"  // done, but no check here can prove it
)

// FixResult is what applying one fix did.
type FixResult struct {
	ID      string
	Summary string
	Changed []string
	// Skipped is what the fix left alone, and why (a segment a process
	// opened after the preview).
	Skipped []string
	// Recheck holds the re-run checks that prove (or disprove) the fix.
	Recheck []checks.Result
	// Verdict is the fixer's judgement of the re-check (VerdictPassed,
	// VerdictFailed, VerdictUnproven), or "" when the fixer gave none: then
	// any problem in Recheck counts against it.
	Verdict string
	// Remaining are the re-check problems held against it (steps.Judge);
	// HandedOn says in words what is still reported but answered by other
	// open fixes; Proof is how a fix no check can judge verified itself.
	Remaining []checks.Finding
	HandedOn  string
	Proof     string
	Err       error
}

// LogDiagnosis is one diagnosis of an explained log: what the guide choice
// needs (the rendered report shows the rest).
type LogDiagnosis struct {
	ID, Title string
	RootCause bool
	Guide     string
}

// LogResult is the explainer's answer for a log.
type LogResult struct {
	Summary   string
	Diagnoses []LogDiagnosis
	// Nodes is how many machines the log's ranks ran on (0: unknown).
	Nodes int
	// Render draws the report `ncclwiz explain` prints — diagnoses,
	// evidence, notes, "Next" steps, digest, summary — wrapped at a width.
	// Pure formatting: the view may call it.
	Render func(width int) string
}

// ValidationResult is the collective test's verdict.
type ValidationResult struct {
	Pass    bool
	Verdict string
	Lines   []string
}

// HangJob is one distributed job running on this machine, for the user to
// pick when there are several.
type HangJob struct {
	ID      int // the launcher's PID, or the first rank's
	Ranks   int
	Age     time.Duration
	Command string
}

// HangReport is the verdict of a hang inspection.
type HangReport struct {
	// Verdict is hang's: "no_hang", "ended", "busy", "suspect" or "stuck".
	Verdict  string
	Summary  string
	Suspects []int
	// Confidence is "high", "medium" or "low".
	Confidence string
	// Guide is the guide the report names (g opens it).
	Guide string
	// Render draws the whole report — ranks, RAS, flight recorder, kernel,
	// evidence per source, verdict and next steps — at a width; raw adds
	// RAS's reply as NCCL wrote it (sanitised). Pure formatting: the view
	// may call it.
	Render func(width int, raw bool) string
	// HasRaw says whether RAS answered (w shows its raw reply).
	HasRaw bool
}

// ClusterReport is the aggregated cluster check.
type ClusterReport struct {
	Summary string
	// Suspects are the minority nodes, most suspicious first.
	Suspects []string
	// Render draws the nodes × facts table at a width (pure formatting).
	Render func(width int) string
}

// Deps are the wizard's connections to the rest of ncclwiz. Nil functions
// make the corresponding feature say it is unavailable rather than fail.
type Deps struct {
	Host   *host.Host
	Checks []checks.Check

	// Guide says whether a guide exists (and what it is called), so the
	// Explain stage lists only guides the library has.
	Guide func(id string) (GuideDoc, bool)
	// Browser builds the guide browser of the Explain, Learn and Guides
	// stages: the wizard sets the subset, Learn, Embedded and Keys; Browser
	// adds the language and style. Nil says guides are unavailable.
	Browser func(opt guideui.Options) guideui.Model
	// GuidesError says why guides are unavailable, when they are.
	GuidesError string

	// PlanFixes plans the fixes for the findings and keeps the plan, so that
	// ApplyFix can later apply exactly the fix a view was made from. It
	// reads the machine (for a second or more), so it is called only from
	// a tea.Cmd.
	PlanFixes func(ctx context.Context, findings []checks.Finding) []FixView
	// ApplyFix applies the planned fix behind the view (its Plan and ID).
	// Only the confirm step calls it, after the user's y. open names the
	// other fixes of the plan that could still answer a problem (possible,
	// not applied yet), for the verdict (steps.Judge).
	ApplyFix     func(ctx context.Context, fix FixView, open []string, progress func(string)) FixResult
	ExportScript func(path string, fixIDs []string, findings []checks.Finding) error
	// EnvSnippet reads the machine (the shell's rc files): tea.Cmd only.
	EnvSnippet func(findings []checks.Finding) string
	// SaveEnvSnippet writes the snippet to a file of the user's (under
	// their cache directory) and says where: c on Summary copies with OSC
	// 52, which not every terminal takes over SSH or tmux. tea.Cmd only.
	SaveEnvSnippet func(snippet string) (path string, err error)

	ExplainLog func(ctx context.Context, path string) (LogResult, error)
	// ExplainText explains a log pasted into the wizard (its text, not a
	// path), as `ncclwiz explain -` would read it from a pipe.
	ExplainText func(ctx context.Context, text string) (LogResult, error)
	// SuggestedLog pre-fills the log path (a practice scenario's log).
	SuggestedLog string

	// HangJobs lists the distributed jobs running here (reads /proc: tea.Cmd
	// only). On a practice server it lists the scenario's processes and says
	// plainly when there is no live job.
	HangJobs func(ctx context.Context) ([]HangJob, error)
	// InspectHang samples the job's ranks for seconds, asks RAS and reads
	// the flight-recorder dumps, as `ncclwiz hang --pid ID` does. Read-only:
	// it never signals or attaches (no py-spy from the wizard). progress
	// says what it is doing; ctx cancels it.
	InspectHang func(ctx context.Context, jobID int, progress func(string)) (HangReport, error)

	// MultiNode says why this job looks multi-node (MASTER_ADDR not local,
	// SLURM_* set, a hostfile), or "" when it does not: only then does
	// Findings offer "Check all nodes". NodeList pre-fills the node list.
	MultiNode string
	NodeList  string
	// ClusterCheck runs `ncclwiz cluster check` over the nodes given (a
	// list as --hosts takes it); progress says what it is doing.
	ClusterCheck func(ctx context.Context, nodes string, progress func(string)) (ClusterReport, error)

	// CanValidate says whether a collective test can run, and if not why.
	CanValidate func(ctx context.Context) (bool, string)
	Validate    func(ctx context.Context, event func(string)) (ValidationResult, error)
}
