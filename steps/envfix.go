package steps

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/steps/envsnippet"
)

// lastResort are settings that work around a failure at a real cost and
// are therefore only offered commented out: NCCL_SHM_DISABLE=1 sends all
// traffic between local ranks over the network transport.
var lastResort = map[string]string{
	"NCCL_SHM_DISABLE": "moves all traffic between ranks on this node to the network transport, which is much slower",
}

// EnvRequest is the environment the findings call for, before merging.
type EnvRequest struct {
	Vars []envsnippet.Var
	// Invalid lists recommendations dropped because ncclwiz may not
	// suggest them (a check asked for an unknown or deprecated name).
	Invalid []string
}

// envFrom collects Evidence["recommended_env"] (with
// Evidence["recommended_env_reason"]) from the findings. Errors outrank
// warnings outrank information when two findings disagree.
func envFrom(findings []checks.Finding) EnvRequest {
	var req EnvRequest
	for _, f := range findings {
		rec := toStringMap(f.Evidence["recommended_env"])
		why := toStringMap(f.Evidence["recommended_env_reason"])
		names := make([]string, 0, len(rec))
		for k := range rec {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			v := envsnippet.Var{Name: k, Value: rec[k], Reason: why[k], Priority: severityPriority(f.Severity), From: f.Check}
			if cost, ok := lastResort[k]; ok {
				v.LastResort = true
				v.Reason = strings.TrimPrefix(v.Reason+"; "+cost, "; ")
			}
			if err := envsnippet.Validate([]envsnippet.Var{v}); err != nil {
				req.Invalid = append(req.Invalid, fmt.Sprintf("%s (from %s): %v", k, f.Check, err))
				continue
			}
			req.Vars = append(req.Vars, v)
		}
		// Settings to remove (invented, removed and renamed names), with
		// what to do instead and where they are set.
		unset := toStringMap(f.Evidence["recommended_unset"])
		code := toStringMap(f.Evidence["recommended_code"])
		setIn := toListMap(f.Evidence["set_in"])
		names = names[:0]
		for k := range unset {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			v := envsnippet.Var{Name: k, Unset: true, Reason: unset[k], Code: code[k], SetIn: setIn[k], Priority: severityPriority(f.Severity), From: f.Check}
			if err := envsnippet.Validate([]envsnippet.Var{v}); err != nil {
				req.Invalid = append(req.Invalid, fmt.Sprintf("unset %s (from %s): %v", k, f.Check, err))
				continue
			}
			req.Vars = append(req.Vars, v)
		}
	}
	return req
}

func toListMap(v any) map[string][]string {
	switch m := v.(type) {
	case map[string][]string:
		return m
	case map[string]any:
		out := map[string][]string{}
		for k, x := range m {
			if xs, ok := x.([]any); ok {
				for _, e := range xs {
					if s, ok := e.(string); ok {
						out[k] = append(out[k], s)
					}
				}
			}
		}
		return out
	}
	return nil
}

func severityPriority(s checks.Severity) int {
	switch s {
	case checks.Error:
		return 3
	case checks.Warn:
		return 2
	case checks.Info:
		return 1
	}
	return 0
}

// EnvSnippet renders vars in a format for h: a practice scenario's snippet
// is marked and commented out (envsnippet.Options.Practice).
func EnvSnippet(h *host.Host, format string, vars []envsnippet.Var) (string, error) {
	return envsnippet.RenderWith(format, vars, envsnippet.Options{Practice: PracticeName(h)})
}

// CandidateEnv is the NCCL environment a job would have after the fixes
// the findings call for: the NCCL_* variables of env (KEY=VALUE, in order)
// without those to remove, with the recommended values set. Validation's
// candidate rung runs with it.
func CandidateEnv(env []string, findings []checks.Finding) []string {
	changes := EnvChanges(findings)
	if len(changes) == 0 {
		return nil
	}
	want := map[string]envsnippet.Var{}
	for _, v := range changes {
		want[v.Name] = v
	}
	var out []string
	done := map[string]bool{}
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "NCCL_") {
			continue
		}
		v, changed := want[k]
		switch {
		case changed && v.Unset:
			continue
		case changed:
			kv = k + "=" + v.Value
		}
		if !done[k] {
			out = append(out, kv)
			done[k] = true
		}
	}
	for _, v := range changes {
		if !v.Unset && !done[v.Name] {
			out = append(out, v.Name+"="+v.Value)
			done[v.Name] = true
		}
	}
	return out
}

// EnvChanges returns the settings and the removals the findings call for,
// merged, for a snippet.
func EnvChanges(findings []checks.Finding) []envsnippet.Var {
	vs, _ := envsnippet.Merge(envFrom(findings).Vars)
	return vs
}

// EnvPlan merges the findings' recommendations with the user's own
// settings (which win) and reports conflicts and dropped names.
func EnvPlan(findings []checks.Finding, user []envsnippet.Var) (vars []envsnippet.Var, conflicts []envsnippet.Conflict, invalid []string) {
	req := envFrom(findings)
	for _, u := range user {
		u.Priority, u.From = 100, "user"
		req.Vars = append(req.Vars, u)
	}
	vars, conflicts = envsnippet.Merge(req.Vars)
	return vars, conflicts, req.Invalid
}

func toStringMap(v any) map[string]string {
	switch m := v.(type) {
	case map[string]string:
		return m
	case map[string]any:
		out := map[string]string{}
		for k, x := range m {
			if s, ok := x.(string); ok {
				out[k] = s
			}
		}
		return out
	}
	return nil
}

func planEnv(_ context.Context, h *host.Host, r *request) *Fix {
	vars, conflicts, invalid := EnvPlan(r.findings["env.export"], nil)
	var already []string
	var todo []envsnippet.Var
	for _, v := range vars {
		cur, ok := h.LookupEnv(v.Name)
		switch {
		case v.Unset && !ok && len(v.SetIn) == 0:
			already = append(already, "no "+v.Name)
			continue
		case !v.Unset && ok && cur == v.Value:
			already = append(already, v.Name+"="+v.Value)
			continue
		}
		todo = append(todo, v)
	}
	if len(todo) == 0 {
		why := "the findings recommend no environment change"
		if len(already) > 0 {
			why = "already set here: " + strings.Join(already, ", ")
		}
		return r.note("env.export", why)
	}
	snippet, err := EnvSnippet(h, "bash", todo)
	if err != nil {
		return r.note("env.export", err.Error())
	}
	var names, gone, files []string
	for _, v := range todo {
		switch {
		case v.Unset:
			gone = append(gone, v.Name)
			files = append(files, v.SetIn...)
		case !v.LastResort:
			names = append(names, v.Name+"="+v.Value)
		}
	}
	var parts []string
	if len(names) > 0 {
		parts = append(parts, "set "+strings.Join(names, " "))
	}
	if len(gone) > 0 {
		parts = append(parts, "unset "+strings.Join(gone, " "))
	}
	title := capitalize(strings.Join(parts, "; ")) + " for the next run"
	if len(parts) == 0 {
		title = "Last-resort environment settings (commented out)"
	}
	var warnings []string
	for _, c := range conflicts {
		warnings = append(warnings, "findings disagree, so it is left out: "+c.String())
	}
	warnings = append(warnings, invalid...)
	if len(already) > 0 {
		warnings = append(warnings, "already set in this environment: "+strings.Join(already, ", "))
	}
	lines := strings.Split(strings.TrimRight(snippet, "\n"), "\n")
	// The guide of the most severe finding asking for it explains best.
	guide, best := "env-reference", -1
	for _, f := range r.findings["env.export"] {
		if p := severityPriority(f.Severity); f.Guide != "" && p > best {
			guide, best = f.Guide, p
		}
	}
	summary := "The environment the findings call for, each setting with its reason. ncclwiz cannot change the environment of your shell or of a job " +
		"that is already running: put these in the job script before launching. `ncclwiz env --shell bash|zsh|fish|python|dotenv|slurm|docker|k8s` " +
		"prints them for other places. A setting marked last resort is commented out: use it only if the real fix cannot be made."
	if len(gone) > 0 {
		summary += " Names that do nothing or were renamed are unset; the init_process_group(timeout=…) line, where shown, replaces NCCL_TIMEOUT."
	}
	steps := []Step{{Comment: "in the job script (or: ncclwiz env --shell bash > nccl.env; source nccl.env)", Lines: lines}}
	if len(files) > 0 {
		// Startup files set them again in every new shell: the user deletes
		// those lines (ncclwiz reads them, never edits them).
		summary += " They are also set in shell startup files: delete those lines by hand (ncclwiz does not edit them)."
		var del []string
		for _, w := range files {
			del = append(del, "#   "+w)
		}
		steps = append(steps, Step{Comment: "delete these lines by hand, then open a new shell", Lines: del})
	}
	return &Fix{
		ID: "env.export", Title: title,
		Summary: summary,
		Guide:   guide, Risk: RiskNone, Manual: true,
		Steps:    steps,
		Warnings: warnings,
	}
}
