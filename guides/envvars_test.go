package guides_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/envvars"
)

// envNameRe finds names in the namespaces envvars governs completely.
var envNameRe = regexp.MustCompile(`\b(?:NCCL|TORCH_NCCL|TORCH_DISTRIBUTED)_[A-Z0-9_]*[A-Z0-9]`)

// Shapes that tell the reader to set a variable. A guide may name an
// invented or deprecated variable to warn about it, but never in one of
// these shapes.
var (
	exportRe    = regexp.MustCompile(`\bexport\s+([A-Z][A-Z0-9_]*)=`)
	dockerERe   = regexp.MustCompile(`(?:-e|--env)[ =]([A-Z][A-Z0-9_]*)=`)
	osEnvRe     = regexp.MustCompile(`os\.environ(?:\[\s*|\.setdefault\(\s*|\.update\(\s*\{?\s*)["']([A-Z][A-Z0-9_]*)["']`)
	assignRe    = regexp.MustCompile(`(?:^|[\s;(` + "`" + `'"])([A-Z][A-Z0-9_]*)=\S`)
	yamlNameRe  = regexp.MustCompile(`name:\s*["']?([A-Z][A-Z0-9_]*)["']?\s*(,\s*value:)?`)
	yamlValueRe = regexp.MustCompile(`^\s*value:`)
	// Prose that mentions a setting only to warn against it.
	negationRe = regexp.MustCompile(`(?i)\b(not|no|never|nothing|does ?n[o']t|don't|remove|drop|unset|instead|deprecated|invented|old name|exist)\b|不存在|不要|弃用|删除|去掉|没有`)
)

// envProblem is one violation in a guide.
type envProblem struct {
	Line int
	Name string
	Why  string
}

// checkEnvNames scans a guide file (front matter included) for variable
// names: every governed name must be in envvars, and every name the text
// tells the reader to set (export, NAME=value in code, -e NAME=,
// os.environ[...], a k8s env entry, or NAME=value in prose that does not
// warn against it) must be Suggestible.
func checkEnvNames(text string) []envProblem {
	var out []envProblem
	inFence := false
	pendingName := "" // a k8s env "- name: X" waiting for its "value:" line
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = !inFence
			continue
		}
		for _, name := range envNameRe.FindAllString(line, -1) {
			v, ok := envvars.Lookup(name)
			switch {
			case !ok:
				out = append(out, envProblem{n, name, "not in the known-variables table (envvars)"})
			case v.Source == "":
				out = append(out, envProblem{n, name, "the known-variables table cites no source for it"})
			}
		}
		recommended := map[string]bool{}
		for _, re := range []*regexp.Regexp{exportRe, dockerERe, osEnvRe} {
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				recommended[m[1]] = true
			}
		}
		if pendingName != "" && yamlValueRe.MatchString(line) {
			recommended[pendingName] = true
		}
		pendingName = ""
		if m := yamlNameRe.FindStringSubmatch(line); m != nil {
			if m[2] != "" {
				recommended[m[1]] = true
			} else {
				pendingName = m[1]
			}
		}
		if inFence || !negationRe.MatchString(line) {
			for _, m := range assignRe.FindAllStringSubmatch(line, -1) {
				recommended[m[1]] = true
			}
		}
		for name := range recommended {
			v, ok := envvars.Lookup(name)
			if !ok && !envvars.Governed(name) {
				continue // not a variable ncclwiz governs (e.g. CUDA_VISIBLE_DEVICES is listed, PATH is not)
			}
			if !ok || !v.Suggestible() {
				why := "recommends setting a variable that is not Suggestible"
				if ok {
					why += " (status " + string(v.Status) + ")"
					if v.ReplacedBy != "" {
						why += "; use " + v.ReplacedBy
					}
				}
				out = append(out, envProblem{n, name, why})
			}
		}
	}
	return out
}

func TestGuideEnvironmentVariablesAreReal(t *testing.T) {
	l := load(t)
	seen := 0
	for _, g := range allGuides(l) {
		raw, err := os.ReadFile(g.File)
		if err != nil {
			t.Fatalf("%s: %v", g.File, err)
		}
		seen++
		for _, p := range checkEnvNames(string(raw)) {
			t.Errorf("%s:%d: %s: %s", g.File, p.Line, p.Name, p.Why)
		}
	}
	if seen == 0 {
		t.Fatal("no guide files scanned")
	}
}

// TestEnvCheckerCatchesInventedAdvice proves the scan on synthetic guides:
// it must fail a guide that recommends an invented or deprecated variable
// in any of the usual shapes, and pass one that only warns about them.
func TestEnvCheckerCatchesInventedAdvice(t *testing.T) {
	bad := map[string]string{
		"export in prose":     "Set a longer timeout:\n\n`export NCCL_TIMEOUT=1800`\n",
		"export in code":      "```\nexport NCCL_TIMEOUT=1800\n```\n",
		"prefix in code":      "```\nNCCL_ASYNC_ERROR_HANDLING=1 torchrun train.py\n```\n",
		"docker -e":           "`docker run -e NCCL_SHM_DIR=/data/shm image`\n",
		"docker --env":        "```\ndocker run --env NCCL_SHM_DIR=/data/shm image\n```\n",
		"os.environ":          "```python\nos.environ[\"NCCL_TIMEOUT\"] = \"1800\"\n```\n",
		"os.environ.setdef":   "```python\nos.environ.setdefault('NCCL_BLOCKING_WAIT', '1')\n```\n",
		"k8s env":             "```yaml\nenv:\n  - name: NCCL_SHM_USE_CUDA_MEMORY\n    value: \"1\"\n```\n",
		"k8s env inline":      "```yaml\nenv: [{name: NCCL_TIMEOUT, value: \"1800\"}]\n```\n",
		"inline assignment":   "For stability use `NCCL_IB_GDR_LEVEL=2`.\n",
		"unknown NCCL name":   "The `NCCL_MAGIC_FIX` variable helps.\n",
		"unknown torch name":  "Try `TORCH_NCCL_MAKE_IT_WORK`.\n",
		"front matter":        "---\nsummary: \"set NCCL_FOO_BAR\"\n---\nbody\n",
		"removed in 2.30.7":   "```\nexport NCCL_SHM_USE_CUDA_MEMCPY=1\n```\n",
		"deprecated channels": "```\nNCCL_MAX_NCHANNELS=4 python train.py\n```\n",
	}
	for name, text := range bad {
		if len(checkEnvNames(text)) == 0 {
			t.Errorf("%s: the checker accepted\n%s", name, text)
		}
	}
	good := map[string]string{
		"warning":       "There is no `NCCL_TIMEOUT`; NCCL_SHM_DIR does not exist either.\n",
		"warn assign":   "`NCCL_TIMEOUT=1800` does nothing: NCCL has no such variable.\n",
		"deprecated":    "Old scripts set `NCCL_ASYNC_ERROR_HANDLING=1`; it is deprecated, use `TORCH_NCCL_ASYNC_ERROR_HANDLING` instead.\n",
		"real export":   "```\nexport NCCL_DEBUG=INFO\nexport TORCH_NCCL_ASYNC_ERROR_HANDLING=3\n```\n",
		"real docker":   "`docker run -e NCCL_SOCKET_IFNAME==eth0 image`\n",
		"log line":      "```\nNCCL INFO NCCL_P2P_LEVEL set by environment to LOC\n```\n",
		"other var":     "```\nexport PATH=/usr/bin\nCUDA_VISIBLE_DEVICES=0 python train.py\n```\n",
		"real in prose": "Set `NCCL_SHM_DISABLE=1` as a stop-gap.\n",
	}
	for name, text := range good {
		if p := checkEnvNames(text); len(p) != 0 {
			t.Errorf("%s: the checker rejected good text: %+v\n%s", name, p, text)
		}
	}
}
