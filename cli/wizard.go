package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/cluster"
	"github.com/ncclwiz/ncclwiz/cluster/nodes"
	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/guides/render"
	"github.com/ncclwiz/ncclwiz/guideui"
	"github.com/ncclwiz/ncclwiz/hang"
	hostpkg "github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/safefile"
	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/steps"
	"github.com/ncclwiz/ncclwiz/tui"
	"github.com/ncclwiz/ncclwiz/validate"
)

// runWizard starts the interactive wizard on the terminal.
func runWizard(cmd *cobra.Command, a *App) error {
	h, err := a.Host()
	if err != nil {
		return err
	}
	reg, err := all.Registry()
	if err != nil {
		return fmt.Errorf("build check registry: %w", err)
	}
	deps := wizardDeps(a, reg.All())
	deps.Host = h
	deps.MultiNode, deps.NodeList = multiNode(a.Env, h.Name)
	if a.scenario != nil {
		deps.SuggestedLog = a.scenario.LogPath
	}
	ctx, stop := signal.NotifyContext(cmdContext(cmd), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	opt := tui.Options{ASCII: termio.NoColor(a.Env, a.NoColor) || !termio.UnicodeOK(a.Env), Lang: a.Lang}
	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithEnvironment(a.Env)}
	if f, ok := a.Stdin.(*os.File); ok {
		popts = append(popts, tea.WithInput(f))
	}
	popts = append(popts, tea.WithOutput(a.Stdout))
	if termio.NoColor(a.Env, a.NoColor) {
		// colorprofile alone ignores NO_COLOR values that are not booleans.
		popts = append(popts, tea.WithColorProfile(colorprofile.Ascii))
	}
	model := tui.New(ctx, deps, opt)
	final, err := tea.NewProgram(model, popts...).Run()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("wizard: %w", err)
	}
	if fm, ok := final.(tui.Model); ok {
		line, code := fm.ExitSummary()
		if line != "" {
			fmt.Fprintln(a.Stdout, line)
		}
		if code != 0 {
			return ExitError{Code: code}
		}
	}
	return nil
}

// wizardDeps connects the wizard to the rest of ncclwiz.
func wizardDeps(a *App, cs []checks.Check) tui.Deps {
	d := tui.Deps{Checks: cs}
	lib, err := guides.Load()
	if err != nil {
		d.GuidesError = err.Error()
	} else {
		lang := wizardLang(a)
		d.Guide = func(id string) (tui.GuideDoc, bool) {
			g, ok := lib.Get(id, lang)
			if !ok {
				return tui.GuideDoc{}, false
			}
			return tui.GuideDoc{ID: g.ID, Title: g.Title, Summary: g.Summary}, true
		}
		style := render.Dark
		if termio.NoColor(a.Env, a.NoColor) || !termio.UnicodeOK(a.Env) {
			style = render.ASCII
		}
		d.Browser = func(o guideui.Options) guideui.Model {
			o.Lang, o.Style, o.Dark = lang, style, true
			return guideui.New(lib, o)
		}
	}
	// Each planning run is kept: the views the wizard shows carry the run's
	// number, and ApplyFix applies that run's frozen fix (its exact segments,
	// PIDs and sizes), never a fresh plan, so what runs is what was shown.
	// Fix.Apply re-proves every precondition as it acts and reports what it
	// left alone.
	var host *hostpkg.Host
	plans := &planStore{}
	d.PlanFixes = func(ctx context.Context, fs []checks.Finding) []tui.FixView {
		if host == nil {
			host, _ = a.Host()
		}
		plan := steps.Plan(ctx, host, fs)
		n := plans.add(plan)
		var out []tui.FixView
		for _, f := range plan {
			out = append(out, tui.FixView{ID: f.ID, Title: f.Title, Summary: f.Summary, Risk: string(f.Risk), NeedsRoot: f.NeedsRoot,
				Impossible: f.Impossible, Alternative: f.Alternative, Preview: f.Preview(), Answers: f.Answers, Manual: f.Manual,
				Warnings: f.Warnings, Plan: n})
		}
		return out
	}
	d.ApplyFix = func(ctx context.Context, v tui.FixView, open []string, progress func(string)) tui.FixResult {
		fx, ok := plans.fix(v.Plan, v.ID)
		if !ok {
			return tui.FixResult{ID: v.ID, Err: fmt.Errorf("%s is not in the plan that was shown; nothing applied", v.ID)}
		}
		h, err := a.Host()
		if err != nil {
			return tui.FixResult{ID: v.ID, Err: err}
		}
		// The wizard asked for consent before starting; escalations (SIGKILL)
		// are not confirmed from here, so they are not taken.
		res, err := fx.Apply(ctx, h, steps.ApplyOptions{Yes: true, Progress: progress, Open: open})
		out := tui.FixResult{ID: v.ID, Summary: res.Summary, Changed: res.Changed, Skipped: res.Skipped, Recheck: res.Recheck,
			Verdict: res.Verdict, Remaining: res.Remaining, Proof: res.Proof, Err: err}
		if len(res.Answered) > 0 {
			out.HandedOn = steps.HandedOnText(res.Answered)
		}
		return out
	}
	d.ExplainLog = func(ctx context.Context, path string) (tui.LogResult, error) {
		return ExplainForWizard(ctx, a, wizardLang(a), path)
	}
	d.ExplainText = func(ctx context.Context, text string) (tui.LogResult, error) {
		return ExplainTextForWizard(ctx, a, wizardLang(a), text)
	}
	d.HangJobs = func(ctx context.Context) ([]tui.HangJob, error) { return wizardHangJobs(ctx, a) }
	d.InspectHang = func(ctx context.Context, id int, progress func(string)) (tui.HangReport, error) {
		return wizardInspectHang(ctx, a, id, progress)
	}
	d.ClusterCheck = func(ctx context.Context, list string, progress func(string)) (tui.ClusterReport, error) {
		return wizardClusterCheck(ctx, a, list, progress)
	}
	d.CanValidate = func(ctx context.Context) (bool, string) {
		h, err := a.Host()
		if err != nil {
			return false, err.Error()
		}
		plan, err := validate.Prepare(ctx, h, validate.Options{})
		if err != nil {
			var cr *validate.CannotRunError
			if errors.As(err, &cr) {
				return false, cr.Text()
			}
			return false, err.Error()
		}
		plan.Close()
		return true, ""
	}
	d.Validate = func(ctx context.Context, event func(string)) (tui.ValidationResult, error) {
		h, err := a.Host()
		if err != nil {
			return tui.ValidationResult{}, err
		}
		// The candidate fix rung tries what the checks recommend now.
		var env []string
		if fs, ferr := findingsNow(ctx, h); ferr == nil {
			env = steps.CandidateEnv(h.Env, fs)
		}
		res, err := validate.Run(ctx, h, validate.Options{Env: env, OnEvent: func(e validate.Event) {
			if e.Kind != validate.EventLog {
				event(e.String())
			}
		}})
		if res == nil {
			return tui.ValidationResult{}, err
		}
		out := tui.ValidationResult{Pass: res.Pass, Verdict: res.Verdict}
		for _, r := range res.Rungs {
			out.Lines = append(out.Lines, fmt.Sprintf("%s: %s — %s", r.Rung.ID, r.Status, r.Summary()))
		}
		return out, err
	}
	d.ExportScript = func(path string, ids []string, fs []checks.Finding) error {
		h, err := a.Host()
		if err != nil {
			return err
		}
		ctx := context.Background()
		cur, err := findingsNow(ctx, h)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return err
		}
		defer f.Close()
		plan := steps.PlanFor(ctx, h, cur, ids)
		return steps.ExportScript(ctx, f, h, plan, append(fs, cur...), a.VersionString())
	}
	d.EnvSnippet = func(fs []checks.Finding) string {
		vars := steps.EnvChanges(fs)
		if len(vars) == 0 {
			return ""
		}
		h, err := a.Host()
		if err != nil {
			return ""
		}
		s, err := steps.EnvSnippet(h, "bash", vars)
		if err != nil {
			return ""
		}
		return s
	}
	d.SaveEnvSnippet = saveEnvSnippet
	return d
}

// saveEnvSnippet keeps the wizard's env snippet in the user's cache
// directory ($XDG_CACHE_HOME or ~/.cache), readable by them alone: the
// copy that reaches the user when OSC 52 does not.
func saveEnvSnippet(snippet string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w", err)
	}
	dir = filepath.Join(dir, "ncclwiz")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	path := filepath.Join(dir, "env-snippet.sh")
	if err := safefile.Write(path, []byte(snippet), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// wizardLang picks the guide language: --lang, else the locale.
func wizardLang(a *App) string {
	if l := guides.NormalizeLang(a.Lang); l != "" {
		return l
	}
	for _, k := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if v := termio.Getenv(a.Env, k); v != "" {
			if l := guides.NormalizeLang(v); l != "" {
				return l
			}
			return guides.English
		}
	}
	return guides.English
}

// planStore keeps every plan the wizard was shown, by number.
type planStore struct {
	mu    sync.Mutex
	plans [][]steps.Fix
}

// add keeps a plan and returns its number.
func (s *planStore) add(p []steps.Fix) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plans = append(s.plans, p)
	return len(s.plans) - 1
}

// fix returns the fix with id from plan n.
func (s *planStore) fix(n int, id string) (steps.Fix, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 0 || n >= len(s.plans) {
		return steps.Fix{}, false
	}
	return steps.ByID(s.plans[n], id)
}

// wizardHangJobs lists the jobs `ncclwiz hang` would choose from. A
// practice server is read through its own process table (the host seam);
// it says plainly when there is no live job there.
func wizardHangJobs(ctx context.Context, a *App) ([]tui.HangJob, error) {
	h, err := a.Host()
	if err != nil {
		return nil, err
	}
	jobs, unread, err := hang.Discover(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("read the process table: %w", err)
	}
	if len(jobs) == 0 && h.Simulated {
		return nil, noLiveJob{}
	}
	if len(jobs) == 0 && len(unread) > 0 {
		_, err := hang.Pick(nil, 0)
		return nil, fmt.Errorf("%w; %s", err, hang.UnreadableNote(unread, h.IsRoot()))
	}
	out := make([]tui.HangJob, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, tui.HangJob{ID: j.ID(), Ranks: len(j.Ranks), Age: j.Age, Command: j.Command()})
	}
	return out, nil
}

// noLiveJob says, in the wizard's words, that a practice server runs no job.
type noLiveJob struct{}

func (noLiveJob) Error() string {
	return "This is a practice scenario: there is no live job to inspect. On the machine where the job hangs, run `ncclwiz` there (or `ncclwiz hang`) while it hangs."
}

// wizardInspectHang is `ncclwiz hang --pid id`: the same hang.Inspect, the
// same plain report. py-spy is not run from here: the report names
// `ncclwiz hang --py-spy`, which asks before it attaches.
func wizardInspectHang(ctx context.Context, a *App, id int, progress func(string)) (tui.HangReport, error) {
	h, err := a.Host()
	if err != nil {
		return tui.HangReport{}, err
	}
	o := hang.Options{Interval: hang.DefaultInterval}
	ras := "asking NCCL's RAS port where the job has one, "
	if h.Simulated {
		ras = "" // a practice server has no RAS port; the real one is never asked
	}
	progress(fmt.Sprintf("watching the ranks of job %d for %s; %sreading flight-recorder dumps", id, o.Interval, ras))
	// The same discovery, inspection and verdict as `ncclwiz hang --pid id`.
	r, _, err := hang.Run(ctx, h, id, o)
	if err != nil {
		return tui.HangReport{}, fmt.Errorf("job %d: %w (it may have ended)", id, err)
	}
	if ctx.Err() != nil {
		return tui.HangReport{}, fmt.Errorf("inspect job %d: %w", id, ctx.Err())
	}
	out := tui.HangReport{Verdict: r.Verdict, Summary: r.Summary, Suspects: r.Suspects, Confidence: r.Confidence, Guide: "hang"}
	out.HasRaw = r.RAS != nil && r.RAS.Raw != ""
	out.Render = func(width int, raw bool) string {
		var b strings.Builder
		if err := hang.WritePlain(&b, r, raw, width); err != nil {
			return err.Error()
		}
		return b.String()
	}
	return out, nil
}

// wizardClusterCheck is `ncclwiz cluster check` over the list: --hosts,
// or the Slurm job's own step when the list is the allocation's.
func wizardClusterCheck(ctx context.Context, a *App, list string, progress func(string)) (tui.ClusterReport, error) {
	ns, err := nodes.ParseHosts(list)
	if err != nil {
		return tui.ClusterReport{}, fmt.Errorf("node list %q: %w", list, err)
	}
	if len(ns) == 0 {
		return tui.ClusterReport{}, errors.New("the node list is empty")
	}
	f := clusterFlags{hosts: list, engine: "auto", connectTimeout: 10 * time.Second, timeout: 120 * time.Second, fanout: 32, copyMode: "auto", maxRows: 50}
	via := "ssh (pdsh when installed)"
	if job, nl := termio.Getenv(a.Env, "SLURM_JOB_ID"), slurmNodeList(a.Env); job != "" && nl == list {
		f.hosts, f.nodelist, f.slurmJob = "", list, job
		via = "srun in Slurm job " + job
	}
	progress(fmt.Sprintf("running `ncclwiz check --json` on %s over %s, up to %d at once, %s per node", units.Count(len(ns), "node"), via, f.fanout, f.timeout))
	run, res, err := collectCluster(ctx, a, f)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return tui.ClusterReport{}, ue.error
		}
		return tui.ClusterReport{}, err
	}
	s := res.Summary
	out := tui.ClusterReport{Summary: fmt.Sprintf("%s: %d checked, %d not reachable, %s differ", units.Count(s.Nodes, "node"), s.Checked, s.Unreachable, units.Count(s.Disagreements, "fact"))}
	for _, n := range res.Nodes {
		if n.Status != cluster.StatusOK {
			out.Suspects = append(out.Suspects, n.Name)
		}
	}
	for _, sp := range res.Suspects {
		if !slices.Contains(out.Suspects, sp.Node) {
			out.Suspects = append(out.Suspects, sp.Node)
		}
	}
	if len(out.Suspects) > 0 {
		out.Summary += "; look at " + strings.Join(out.Suspects, ", ")
	}
	env, noColor := a.Env, a.NoColor
	out.Render = func(width int) string {
		var b strings.Builder
		o := termio.New(&b, env, noColor)
		o.Width = width
		if err := cluster.WritePlain(o, run, res, cluster.PlainOptions{MaxRows: f.maxRows}); err != nil {
			return err.Error()
		}
		return b.String()
	}
	return out, nil
}

// slurmNodeList is the allocation's node list, when inside one.
func slurmNodeList(env []string) string {
	if v := termio.Getenv(env, "SLURM_JOB_NODELIST"); v != "" {
		return v
	}
	return termio.Getenv(env, "SLURM_NODELIST")
}

// multiNode says why the job looks multi-node — a Slurm node list, a
// hostfile (PBS, Open MPI), MASTER_ADDR naming another machine — and the
// node list to pre-fill, or "" when it looks single-node. It reads only the
// environment and the hostfile it names (no DNS: a name that is not this
// host's counts as another machine).
func multiNode(env []string, hostname string) (why, list string) {
	if nl := slurmNodeList(env); nl != "" {
		return "Slurm node list " + textsafe.Clean(nl), nl
	}
	for _, k := range []string{"PBS_NODEFILE", "OMPI_MCA_orte_default_hostfile", "OMPI_MCA_rmaps_base_default_hostfile"} {
		path := termio.Getenv(env, k)
		if path == "" {
			continue
		}
		hs, err := nodes.ReadHostfile(path)
		if err != nil || len(hs) == 0 {
			return "hostfile " + textsafe.Clean(path), ""
		}
		return "hostfile " + textsafe.Clean(path), strings.Join(slices.Compact(hs), ",")
	}
	addr := termio.Getenv(env, "MASTER_ADDR")
	if addr == "" || localAddr(addr, hostname) {
		return "", ""
	}
	return "MASTER_ADDR=" + textsafe.Clean(addr) + " is another machine", ""
}

// localAddr reports whether addr names this machine.
func localAddr(addr, hostname string) bool {
	short := func(s string) string { s, _, _ = strings.Cut(strings.ToLower(s), "."); return s }
	if strings.EqualFold(addr, "localhost") || (hostname != "" && short(addr) == short(hostname)) {
		return true
	}
	ip := net.ParseIP(addr)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range ifs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}
