package cli

import (
	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/steps"
	"github.com/ncclwiz/ncclwiz/steps/envsnippet"
)

// The --json documents of fix, env, check --list-checks and version. Each
// has a schema under docs/ (schema 1); fields may be added within a schema
// number, removing or changing one bumps it. Strings that may come from the
// machine are sanitised and redacted as the plain output is.

// fixPlanJSON is `fix --json` (docs/fix.schema.json).
type fixPlanJSON struct {
	Schema    int       `json:"schema"`
	Tool      string    `json:"tool"`
	Version   string    `json:"version"`
	Simulated bool      `json:"simulated"`
	Fixes     []fixJSON `json:"fixes"`
	// NotPlanned says, for each fix named with --apply that has nothing to
	// do here, why.
	NotPlanned map[string]string `json:"not_planned"`
}

type fixJSON struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Summary     string   `json:"summary"`
	Risk        string   `json:"risk"`
	NeedsRoot   bool     `json:"needs_root"`
	Manual      bool     `json:"manual"`
	Answers     []string `json:"answers"`
	Findings    []string `json:"findings"`
	Guide       string   `json:"guide,omitempty"`
	Impossible  string   `json:"impossible,omitempty"`
	Alternative string   `json:"alternative,omitempty"`
	Warnings    []string `json:"warnings"`
	Recheck     []string `json:"recheck"`
	Preview     []string `json:"preview"`
	Items       []item   `json:"items,omitempty"`
}

// item is a choice of a fix (proc.stale's PIDs, for --pid).
type item struct {
	ID     string `json:"id"`
	Label  string `json:"label"`
	Group  string `json:"group"`
	Chosen bool   `json:"chosen"`
}

func fixPlanDoc(a *App, simulated bool, plan []steps.Fix, notPlanned map[string]string) fixPlanJSON {
	doc := fixPlanJSON{Schema: 1, Tool: "ncclwiz", Version: a.VersionString(), Simulated: simulated,
		Fixes: []fixJSON{}, NotPlanned: map[string]string{}}
	for id, why := range notPlanned {
		doc.NotPlanned[id] = textsafe.Clean(why)
	}
	for _, fx := range plan {
		doc.Fixes = append(doc.Fixes, fixJSON{
			ID: fx.ID, Title: textsafe.Clean(fx.Title), Summary: textsafe.Clean(fx.Summary),
			Risk: string(fx.Risk), NeedsRoot: fx.NeedsRoot, Manual: fx.Manual,
			Answers: nonNil(fx.Answers), Findings: cleanAll(fx.Findings), Guide: fx.Guide,
			Impossible: textsafe.Clean(fx.Impossible), Alternative: textsafe.Clean(fx.Alternative),
			Warnings: cleanAll(fx.Warnings), Recheck: nonNil(fx.Recheck), Preview: cleanAll(fx.Preview()),
			Items: items(fx.Items),
		})
	}
	return doc
}

func items(its []steps.Item) []item {
	var out []item
	for _, it := range its {
		out = append(out, item{ID: it.ID, Label: textsafe.Clean(it.Label), Group: textsafe.Clean(it.Group), Chosen: it.Chosen})
	}
	return out
}

// envJSON is `env --json` (docs/env.schema.json).
type envJSON struct {
	Schema    int            `json:"schema"`
	Tool      string         `json:"tool"`
	Version   string         `json:"version"`
	Simulated bool           `json:"simulated"`
	Vars      []envVarJSON   `json:"vars"`
	Conflicts []conflictJSON `json:"conflicts"`
	Dropped   []string       `json:"dropped"`
}

type envVarJSON struct {
	Name       string   `json:"name"`
	Value      string   `json:"value"`
	Unset      bool     `json:"unset"`
	LastResort bool     `json:"last_resort"`
	Reason     string   `json:"reason"`
	From       string   `json:"from"`
	Code       string   `json:"code,omitempty"`
	SetIn      []string `json:"set_in"`
}

type conflictJSON struct {
	Name   string       `json:"name"`
	Values []envVarJSON `json:"values"`
}

func envVar(v envsnippet.Var) envVarJSON {
	return envVarJSON{Name: v.Name, Value: textsafe.Sanitize(textsafe.RedactEnv(v.Name, v.Value)), Unset: v.Unset,
		LastResort: v.LastResort, Reason: textsafe.Clean(v.Reason), From: v.From, Code: textsafe.Clean(v.Code), SetIn: cleanAll(v.SetIn)}
}

func envDoc(a *App, simulated bool, vars []envsnippet.Var, conflicts []envsnippet.Conflict, dropped []string) envJSON {
	doc := envJSON{Schema: 1, Tool: "ncclwiz", Version: a.VersionString(), Simulated: simulated,
		Vars: []envVarJSON{}, Conflicts: []conflictJSON{}, Dropped: cleanAll(dropped)}
	for _, v := range vars {
		doc.Vars = append(doc.Vars, envVar(v))
	}
	for _, c := range conflicts {
		cj := conflictJSON{Name: c.Name, Values: []envVarJSON{}}
		for _, v := range c.Values {
			cj.Values = append(cj.Values, envVar(v))
		}
		doc.Conflicts = append(doc.Conflicts, cj)
	}
	return doc
}

// checkListJSON is `check --list-checks --json` (docs/checks.schema.json).
type checkListJSON struct {
	Schema int             `json:"schema"`
	Tool   string          `json:"tool"`
	Checks []checkInfoJSON `json:"checks"`
}

type checkInfoJSON struct {
	ID       string   `json:"id"`
	Category string   `json:"category"`
	Tier     string   `json:"tier"`
	Needs    []string `json:"needs"`
	Title    string   `json:"title"`
}

func checkListDoc(cs []checks.Check) checkListJSON {
	doc := checkListJSON{Schema: 1, Tool: "ncclwiz", Checks: []checkInfoJSON{}}
	for _, c := range cs {
		needs := []string{}
		for _, n := range c.Needs {
			needs = append(needs, string(n))
		}
		doc.Checks = append(doc.Checks, checkInfoJSON{ID: c.ID, Category: c.Category, Tier: string(c.Tier), Needs: needs, Title: c.Title})
	}
	return doc
}

func cleanAll(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, textsafe.Clean(s))
	}
	return out
}
