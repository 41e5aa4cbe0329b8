// Package tui renders the ncclwiz wizard with bubbletea v2: one root model
// that routes by stage (steps/flow) to small child models whose View returns
// a string. Every side effect (running checks, rendering a guide, applying a
// fix, launching the collective test) happens in a tea.Cmd that calls the
// functions in Deps, so the models stay testable with fakes.
package tui

import (
	"context"

	"github.com/ncclwiz/ncclwiz/guideui"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
)

// GuideDoc is a guide as the wizard shows it.
type GuideDoc struct {
	ID, Title, Summary string
	// Markdown is the body without front matter.
	Markdown string
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

// LogDiagnosis is one diagnosis of an explained log.
type LogDiagnosis struct {
	ID, Title, Confidence string
	RootCause             bool
	Guide                 string
	Evidence              []string
	Fixes                 []string
}

// LogResult is the explainer's answer for a log.
type LogResult struct {
	Summary   string
	Version   string
	Diagnoses []LogDiagnosis
	Digest    []string
}

// ValidationResult is the collective test's verdict.
type ValidationResult struct {
	Pass    bool
	Verdict string
	Lines   []string
}

// Deps are the wizard's connections to the rest of ncclwiz. Nil functions
// make the corresponding feature say it is unavailable rather than fail.
type Deps struct {
	Host   *host.Host
	Checks []checks.Check

	Guide     func(id string) (GuideDoc, bool)
	Learn     func() []GuideDoc
	AllGuides func() []GuideDoc
	// Browser builds the guide browser for the Learn (learn=true) and
	// Guides stages; nil falls back to the simple viewer.
	Browser func(learn bool) guideui.Model
	// GuidesError says why guides are unavailable, when they are.
	GuidesError string
	// Render turns markdown into styled text wrapped at width.
	Render func(md string, width int) (string, error)

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

	ExplainLog func(ctx context.Context, path string) (LogResult, error)
	// SuggestedLog pre-fills the log path (a practice scenario's log).
	SuggestedLog string

	// CanValidate says whether a collective test can run, and if not why.
	CanValidate func(ctx context.Context) (bool, string)
	Validate    func(ctx context.Context, event func(string)) (ValidationResult, error)
}
