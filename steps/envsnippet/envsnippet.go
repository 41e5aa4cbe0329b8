// Package envsnippet renders environment settings for the places a
// researcher sets them: a shell, a Python entry point, a dotenv file, a
// Slurm batch script, docker run and a Kubernetes pod spec. Every variable
// must be one ncclwiz may suggest (envvars.Suggestible).
package envsnippet

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/envvars"
)

// Var is one setting with the reason it is suggested.
type Var struct {
	Name, Value, Reason string
}

// Formats lists the supported formats.
var Formats = []string{"bash", "zsh", "fish", "python", "dotenv", "slurm", "docker", "k8s"}

// Validate refuses variables ncclwiz must not suggest and values that
// cannot be expressed safely.
func Validate(vs []Var) error {
	for _, v := range vs {
		ev, ok := envvars.Lookup(v.Name)
		if !ok || !ev.Suggestible() {
			return fmt.Errorf("%s is not a variable ncclwiz can recommend", v.Name)
		}
		if strings.ContainsAny(v.Value, "\x00\n\r") {
			return fmt.Errorf("%s: value contains a line break or NUL", v.Name)
		}
	}
	return nil
}

// Sorted returns vs ordered by name with duplicates removed (last wins).
func Sorted(vs []Var) []Var {
	m := map[string]Var{}
	for _, v := range vs {
		m[v.Name] = v
	}
	out := make([]Var, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// shQuote quotes for POSIX sh/bash/zsh.
func shQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r == '/' || r == ':' || r == ',' || r == '=' || r == '^' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fishQuote quotes for fish, where backslash and ' are special in '...'.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func comment(prefix, reason string) string {
	if reason == "" {
		return ""
	}
	return "  " + prefix + " " + strings.ReplaceAll(reason, "\n", " ")
}

// Render writes vs in the given format.
func Render(format string, vs []Var) (string, error) {
	if err := Validate(vs); err != nil {
		return "", err
	}
	vs = Sorted(vs)
	var b strings.Builder
	switch format {
	case "bash", "zsh", "sh":
		b.WriteString("# NCCL settings suggested by ncclwiz; source this file before launching.\n")
		for _, v := range vs {
			fmt.Fprintf(&b, "export %s=%s%s\n", v.Name, shQuote(v.Value), comment("#", v.Reason))
		}
	case "fish":
		b.WriteString("# NCCL settings suggested by ncclwiz; source this file before launching.\n")
		for _, v := range vs {
			fmt.Fprintf(&b, "set -gx %s %s%s\n", v.Name, fishQuote(v.Value), comment("#", v.Reason))
		}
	case "python":
		b.WriteString("# Put this at the very top of your entry point, before importing torch:\n# NCCL reads its environment when the first communicator is created.\nimport os\n\n")
		for _, v := range vs {
			fmt.Fprintf(&b, "os.environ[%s] = %s%s\n", strconv.Quote(v.Name), strconv.Quote(v.Value), comment("#", v.Reason))
		}
	case "dotenv":
		b.WriteString("# NCCL settings suggested by ncclwiz\n")
		for _, v := range vs {
			if v.Reason != "" {
				fmt.Fprintf(&b, "# %s\n", v.Reason)
			}
			fmt.Fprintf(&b, "%s=%s\n", v.Name, dotenvQuote(v.Value))
		}
	case "slurm":
		var parts []string
		for _, v := range vs {
			// --export splits on commas; such values cannot be passed here.
			if strings.ContainsAny(v.Value, ", \"'") {
				return "", fmt.Errorf("%s=%s cannot be written in #SBATCH --export (comma, space or quote); export it in the batch script instead", v.Name, v.Value)
			}
			parts = append(parts, v.Name+"="+v.Value)
		}
		b.WriteString("# Add to your batch script (ALL keeps the rest of your environment):\n")
		fmt.Fprintf(&b, "#SBATCH --export=ALL,%s\n", strings.Join(parts, ","))
		for _, v := range vs {
			if v.Reason != "" {
				fmt.Fprintf(&b, "#   %s: %s\n", v.Name, v.Reason)
			}
		}
	case "docker":
		b.WriteString("# Add these flags to your docker run command:\n")
		for _, v := range vs {
			fmt.Fprintf(&b, "  -e %s \\%s\n", shQuote(v.Name+"="+v.Value), comment("#", v.Reason))
		}
	case "k8s", "kubernetes":
		b.WriteString("# Container spec, under the training container:\nenv:\n")
		for _, v := range vs {
			if v.Reason != "" {
				fmt.Fprintf(&b, "  # %s\n", v.Reason)
			}
			fmt.Fprintf(&b, "  - name: %s\n    value: %s\n", v.Name, strconv.Quote(v.Value))
		}
	default:
		return "", fmt.Errorf("unknown format %q (one of %s)", format, strings.Join(Formats, ", "))
	}
	return b.String(), nil
}

func dotenvQuote(s string) string {
	if strings.ContainsAny(s, " #'\"\\$") {
		return strconv.Quote(s)
	}
	return s
}
