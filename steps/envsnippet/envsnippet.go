// Package envsnippet renders environment settings for the places a
// researcher sets them: bash/zsh, fish, a Python entry point, a dotenv
// file, a Slurm batch script, docker run and a Kubernetes container spec.
//
// Every variable must be one ncclwiz may suggest (envvars.Suggestible);
// values with control bytes are refused and reasons are sanitised, so a
// snippet can never smuggle a line (or a terminal escape) into a script.
// A variable marked LastResort (NCCL_SHM_DISABLE=1, say) is written
// commented out with its reason: the user opts in by uncommenting it.
package envsnippet

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/envvars"
	"github.com/ncclwiz/ncclwiz/internal/practice"
	"github.com/ncclwiz/ncclwiz/internal/shellquote"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// Var is one setting with the reason it is suggested.
type Var struct {
	Name, Value, Reason string
	// LastResort settings are written commented out: they work around a
	// problem at a cost (NCCL_SHM_DISABLE=1 moves local traffic to the
	// network) and should only be used when the real fix cannot be made.
	LastResort bool
	// Priority decides between findings that want different values: the
	// higher wins; equal priorities are a conflict (see Merge).
	Priority int
	// From names where the recommendation came from (a check ID, "user").
	From string
	// Unset asks to remove the variable (an invented, removed or renamed
	// name): `unset` in shells, os.environ.pop in Python, "remove the
	// entry" for docker and Kubernetes. Value is empty then.
	Unset bool
	// Code is a line for the training script that does what the variable
	// was meant to (init_process_group(timeout=…) for NCCL_TIMEOUT); it is
	// printed as a comment in every format.
	Code string
	// SetIn lists where the variable is set ("~/.bashrc:12: export
	// NCCL_TIMEOUT=1800"): lines to delete by hand, since a snippet cannot
	// undo a shell's startup file.
	SetIn []string
}

// varName is what an environment variable's name may be in a snippet.
func varName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// Formats lists the supported formats, in the order help texts show them.
var Formats = []string{"bash", "zsh", "fish", "python", "dotenv", "slurm", "docker", "k8s"}

var aliases = map[string]string{"sh": "bash", "kubernetes": "k8s", "kube": "k8s", "python3": "python", "env": "dotenv", ".env": "dotenv", "sbatch": "slurm"}

// Normalize maps a format name or alias to one of Formats.
func Normalize(format string) (string, error) {
	f := strings.ToLower(strings.TrimSpace(format))
	if a, ok := aliases[f]; ok {
		f = a
	}
	for _, k := range Formats {
		if f == k {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown format %q (one of %s)", format, strings.Join(Formats, ", "))
}

// Validate refuses variables ncclwiz must not suggest and values that
// cannot be written safely.
func Validate(vs []Var) error {
	for _, v := range vs {
		for _, x := range append([]string{v.Code}, v.SetIn...) {
			if !textsafe.IsClean(x) {
				return fmt.Errorf("%s: a note contains control characters", textsafe.Sanitize(v.Name))
			}
		}
		if v.Unset {
			// Removing is always allowed for a name ncclwiz governs or
			// knows (invented and deprecated names are why it is removed).
			if _, known := envvars.Lookup(v.Name); !varName(v.Name) || (!known && !envvars.Governed(v.Name)) {
				return fmt.Errorf("%s is not an NCCL/PyTorch variable ncclwiz would remove", textsafe.Sanitize(v.Name))
			}
			continue
		}
		ev, ok := envvars.Lookup(v.Name)
		if !ok {
			return fmt.Errorf("%s is not a variable ncclwiz knows; it suggests only documented NCCL/PyTorch/CUDA variables", textsafe.Sanitize(v.Name))
		}
		if !ev.Suggestible() {
			why := string(ev.Status)
			if ev.ReplacedBy != "" {
				why += "; use " + ev.ReplacedBy
			} else if ev.Advice != "" {
				why += "; " + ev.Advice
			}
			return fmt.Errorf("%s is not one ncclwiz recommends (%s)", v.Name, why)
		}
		if !textsafe.IsClean(v.Value) || strings.ContainsAny(v.Value, "\t") {
			return fmt.Errorf("%s: the value contains control characters", v.Name)
		}
	}
	return nil
}

// Conflict is a variable two findings want set to different values.
type Conflict struct {
	Name   string
	Values []Var
}

func (c Conflict) String() string {
	var parts []string
	for _, v := range c.Values {
		s := fmt.Sprintf("%s=%s", c.Name, v.Value)
		if v.Unset {
			s = "unset " + c.Name
		}
		if v.From != "" {
			s += " (" + v.From + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " vs ")
}

// Merge resolves duplicates: the same value merges (reasons joined), a
// higher Priority wins, and different values at the same priority are a
// conflict, left out of the result. The result is sorted by name.
func Merge(vs []Var) ([]Var, []Conflict) {
	byName := map[string][]Var{}
	for _, v := range vs {
		byName[v.Name] = append(byName[v.Name], v)
	}
	var out []Var
	var conflicts []Conflict
	for name, cands := range byName {
		best := cands[0].Priority
		for _, c := range cands {
			best = max(best, c.Priority)
		}
		var top []Var
		for _, c := range cands {
			if c.Priority == best {
				top = append(top, c)
			}
		}
		merged, ok := top[0], true
		for _, c := range top[1:] {
			if c.Value != merged.Value || c.Unset != merged.Unset {
				ok = false
				break
			}
			if merged.Code == "" {
				merged.Code = c.Code
			}
			for _, w := range c.SetIn {
				if !slices.Contains(merged.SetIn, w) {
					merged.SetIn = append(merged.SetIn, w)
				}
			}
			if c.Reason != "" && !strings.Contains(merged.Reason, c.Reason) {
				merged.Reason = strings.TrimPrefix(merged.Reason+"; "+c.Reason, "; ")
			}
			merged.LastResort = merged.LastResort && c.LastResort
		}
		if !ok {
			conflicts = append(conflicts, Conflict{Name: name, Values: top})
			continue
		}
		out = append(out, merged)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	sort.Slice(conflicts, func(i, j int) bool { return conflicts[i].Name < conflicts[j].Name })
	return out, conflicts
}

// Sorted returns vs merged and ordered by name (conflicting variables are
// dropped; use Merge to report them).
func Sorted(vs []Var) []Var {
	out, _ := Merge(vs)
	return out
}

// fishQuote quotes for fish, where \ and ' are the escapes inside '…'.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// pyQuote writes a Python string literal (Go's escapes are valid Python
// escapes for the printable text Validate allows).
func pyQuote(s string) string { return strconv.Quote(s) }

// yamlQuote writes a YAML double-quoted scalar; for printable text Go's
// escapes (\" and \\) are YAML's.
func yamlQuote(s string) string { return strconv.Quote(s) }

// dotenvQuote: python-dotenv and docker compose read '…' literally; a
// value holding a single quote needs "…", where \\ and \" are escapes in
// both but $ means interpolation in compose, so such a value with a $ (or
// a backslash) has no portable spelling and is refused. Plain values stay
// bare, which `docker run --env-file` (no quote removal at all) needs.
func dotenvQuote(v Var) (string, error) {
	s := v.Value
	if s != "" && !strings.ContainsAny(s, " #'\"\\$`") {
		return s, nil
	}
	if !strings.Contains(s, "'") {
		return "'" + s + "'", nil
	}
	if strings.ContainsAny(s, "$\\") {
		return "", fmt.Errorf("%s: a value with both a single quote and $ or \\ cannot be written portably in a dotenv file; use another format", v.Name)
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`, nil
}

// reason renders a reason for a one-line comment.
func reason(v Var) string {
	r := textsafe.Sanitize(strings.TrimSpace(v.Reason))
	if v.LastResort {
		r = strings.TrimPrefix("last resort, uncomment only if the fixes cannot be applied: "+r, ": ")
	}
	return r
}

// slurmSafe reports whether a value can sit in #SBATCH --export=…, which
// splits on commas and whitespace.
func slurmSafe(s string) bool { return s != "" && !strings.ContainsAny(s, ", \"'\\$") }

// Options tune RenderWith.
type Options struct {
	// Practice names the practice scenario the settings were found on: the
	// snippet is then marked and every line is commented out, because it
	// describes a simulated server, not the machine it may be pasted on.
	Practice string
}

// Render writes vs in the given format; see RenderWith.
func Render(format string, vs []Var) (string, error) { return RenderWith(format, vs, Options{}) }

// RenderWith writes vs in the given format. Duplicates are merged; a
// conflict is an error (the caller decides which value to keep).
func RenderWith(format string, vs []Var, opt Options) (string, error) {
	out, err := render(format, vs)
	if err != nil || opt.Practice == "" {
		return out, err
	}
	var b strings.Builder
	b.WriteString("# " + practice.Marker(textsafe.Sanitize(opt.Practice)) + "\n")
	b.WriteString("# PRACTICE SNIPPET: these settings were found on a simulated server. Every line is\n" +
		"# commented out so that pasting or sourcing it changes nothing; run ncclwiz env\n" +
		"# without --scenario for this machine's settings.\n")
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if !inert(l) {
			l = "# " + l
		}
		b.WriteString(l + "\n")
	}
	return b.String(), nil
}

// inert reports whether a line of a snippet does nothing wherever it is
// pasted: blank, or a comment that starts "# ". A "#" glued to a word is
// not a comment everywhere: sbatch reads "#SBATCH --export=…" as an option
// (so do qsub's "#PBS", bsub's "#BSUB", SGE's "#$" and a kernel's "#!").
func inert(l string) bool {
	t := strings.TrimSpace(l)
	return t == "" || t == "#" || strings.HasPrefix(t, "# ")
}

func render(format string, vs []Var) (string, error) {
	f, err := Normalize(format)
	if err != nil {
		return "", err
	}
	if err := Validate(vs); err != nil {
		return "", err
	}
	vs, conflicts := Merge(vs)
	if len(conflicts) > 0 {
		var cs []string
		for _, c := range conflicts {
			cs = append(cs, c.String())
		}
		return "", fmt.Errorf("findings disagree: %s", strings.Join(cs, "; "))
	}
	var unsets []Var
	sets := vs[:0:0]
	for _, v := range vs {
		if v.Unset {
			unsets = append(unsets, v)
		} else {
			sets = append(sets, v)
		}
	}
	vs = sets
	var b strings.Builder
	const head = "# NCCL/PyTorch settings suggested by ncclwiz, each with its reason.\n"
	line := func(v Var, text string) {
		if v.LastResort {
			text = "# " + text
		}
		b.WriteString(text + "\n")
	}
	// why writes the reason as a comment line, if there is one.
	why := func(prefix string, v Var) {
		if r := reason(v); r != "" {
			b.WriteString(prefix + r + "\n")
		}
	}
	norm := f
	if len(vs) == 0 {
		f = "" // only removals: no section of settings to write
	}
	switch f {
	case "bash", "zsh":
		b.WriteString(head + "# Source this file (or paste the lines) in the shell or job script that launches training.\n")
		for _, v := range vs {
			why("# ", v)
			line(v, fmt.Sprintf("export %s=%s", v.Name, shellquote.Quote(v.Value)))
		}
	case "fish":
		b.WriteString(head + "# Source this file in the fish session that launches training.\n")
		for _, v := range vs {
			why("# ", v)
			line(v, fmt.Sprintf("set -gx %s %s", v.Name, fishQuote(v.Value)))
		}
	case "python":
		b.WriteString(head + "# Put this at the very top of the training entry point, before torch is imported:\n" +
			"# NCCL and PyTorch read these when the process group is created.\nimport os\n\n")
		for _, v := range vs {
			why("# ", v)
			line(v, fmt.Sprintf("os.environ[%s] = %s", pyQuote(v.Name), pyQuote(v.Value)))
		}
	case "dotenv":
		b.WriteString(head + "# For docker --env-file, docker compose env_file or python-dotenv.\n")
		for _, v := range vs {
			q, err := dotenvQuote(v)
			if err != nil {
				return "", err
			}
			why("# ", v)
			line(v, v.Name+"="+q)
		}
	case "slurm":
		var parts, body []Var
		for _, v := range vs {
			if v.LastResort {
				continue
			}
			if slurmSafe(v.Value) {
				parts = append(parts, v)
			} else {
				body = append(body, v)
			}
		}
		b.WriteString(head + "# In the batch script; ALL keeps the rest of the submitting environment.\n")
		for _, v := range vs {
			why("#   "+v.Name+": ", v)
		}
		if len(parts) > 0 {
			var kv []string
			for _, v := range parts {
				kv = append(kv, v.Name+"="+v.Value)
			}
			b.WriteString("#SBATCH --export=ALL," + strings.Join(kv, ",") + "\n")
		}
		if len(body) > 0 {
			b.WriteString("# These values contain commas, spaces or quotes, which --export cannot carry; export them in the script body:\n")
			for _, v := range body {
				b.WriteString(fmt.Sprintf("export %s=%s\n", v.Name, shellquote.Quote(v.Value)))
			}
		}
		for _, v := range vs {
			if v.LastResort {
				b.WriteString(fmt.Sprintf("# export %s=%s\n", v.Name, shellquote.Quote(v.Value)))
			}
		}
	case "docker":
		b.WriteString(head + "# Add these options to docker run (or podman run), before the image name:\n")
		for _, v := range vs {
			why("#   "+v.Name+": ", v)
		}
		var opts []string
		for _, v := range vs {
			if !v.LastResort {
				opts = append(opts, "-e "+shellquote.Quote(v.Name+"="+v.Value))
			}
		}
		if len(opts) > 0 {
			b.WriteString(strings.Join(opts, " ") + "\n")
		}
		for _, v := range vs {
			if v.LastResort {
				b.WriteString("# -e " + shellquote.Quote(v.Name+"="+v.Value) + "\n")
			}
		}
	case "k8s":
		b.WriteString(head + "# Under the training container of the pod spec:\nenv:\n")
		for _, v := range vs {
			why("  # ", v)
			item := fmt.Sprintf("  - name: %s\n    value: %s", v.Name, yamlQuote(v.Value))
			if v.LastResort {
				item = "  # - name: " + v.Name + "\n  #   value: " + yamlQuote(v.Value)
			}
			b.WriteString(item + "\n")
		}
	}
	if len(unsets) > 0 {
		if len(vs) == 0 {
			b.WriteString(head)
			if norm == "python" {
				b.WriteString("import os\n\n")
			}
		}
		b.WriteString(removeSection(norm, unsets))
	}
	for _, v := range append(sets, unsets...) {
		b.WriteString(notes(v))
	}
	return b.String(), nil
}

// removeSection writes, in the format's own idiom, how to remove variables
// that should not be set: unset in shells (and in a batch script's body,
// since --export=ALL passes the submitting shell's variables on),
// os.environ.pop in Python; dotenv, docker and Kubernetes hold entries,
// which are to be deleted.
func removeSection(f string, vs []Var) string {
	var b strings.Builder
	b.WriteString("# Remove these: they do nothing, or have a new name.\n")
	for _, v := range vs {
		if r := reason(v); r != "" {
			b.WriteString("# " + v.Name + ": " + r + "\n")
		}
		switch f {
		case "bash", "zsh", "slurm":
			b.WriteString("unset " + v.Name + "\n")
		case "fish":
			b.WriteString("set -e " + v.Name + "\n")
		case "python":
			b.WriteString(fmt.Sprintf("os.environ.pop(%s, None)\n", pyQuote(v.Name)))
		case "dotenv":
			b.WriteString("# delete the line " + v.Name + "=… from this file and from other env files\n")
		case "docker":
			b.WriteString("# delete -e " + v.Name + "=… from the docker run command (and " + v.Name + " from --env-file files and compose environment:)\n")
		case "k8s":
			b.WriteString("# delete the env entry \"- name: " + v.Name + "\" from the container spec (and from ConfigMaps it is loaded from)\n")
		}
	}
	return b.String()
}

// notes writes a variable's code line and the places it is set, as
// comments (the same in every format).
func notes(v Var) string {
	var b strings.Builder
	if v.Code != "" {
		b.WriteString("# instead of " + v.Name + ", in the training script: " + textsafe.Sanitize(v.Code) + "\n")
	}
	for _, w := range v.SetIn {
		b.WriteString("# " + v.Name + " is set in " + textsafe.Sanitize(w) + ": delete that line (ncclwiz does not edit it)\n")
	}
	return b.String()
}
