package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ncclwiz/ncclwiz/scenario"
)

// mustMatchSchema validates doc against docs/<name> and decodes it into v.
func mustMatchSchema(t *testing.T, name, doc string, v any) {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile(filepath.Join("..", "docs", name))
	if err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, doc)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("output does not match docs/%s: %v\n%s", name, err, doc)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(doc), v); err != nil {
			t.Fatal(err)
		}
	}
}

// fixIDLine is a fix's heading in the plain `fix` listing.
var fixIDLine = regexp.MustCompile(`(?m)^([a-z]+\.[a-z0-9.-]+) — `)

// Every practice scenario's plan and environment, as JSON, matches its
// schema and says what the plain output says.
func TestFixAndEnvJSONMatchSchemas(t *testing.T) {
	list, err := scenario.List()
	if err != nil {
		t.Fatal(err)
	}
	sawFix, sawVar := false, false
	for _, sc := range list {
		t.Run(sc.Name, func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, "fix", "--json", "--scenario", sc.Name)
			if code != 0 {
				t.Fatalf("fix --json: exit %d: %s", code, errOut)
			}
			var plan fixPlanJSON
			mustMatchSchema(t, "fix.schema.json", out, &plan)
			plain, _, _ := runCLI(t, nil, "fix", "--scenario", sc.Name)
			var want []string
			for _, m := range fixIDLine.FindAllStringSubmatch(plain, -1) {
				want = append(want, m[1])
			}
			var got []string
			for _, fx := range plan.Fixes {
				got = append(got, fx.ID)
				if len(fx.Preview) == 0 && fx.Impossible == "" {
					t.Errorf("%s: no preview lines", fx.ID)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("fix --json lists %q, plain fix lists %q", got, want)
			}
			if !plan.Simulated {
				t.Error("a scenario's plan is not marked simulated")
			}
			sawFix = sawFix || len(got) > 0

			out, errOut, code = runCLI(t, nil, "env", "--json", "--scenario", sc.Name)
			if code != 0 {
				t.Fatalf("env --json: exit %d: %s", code, errOut)
			}
			var env envJSON
			mustMatchSchema(t, "env.schema.json", out, &env)
			snippet, _, _ := runCLI(t, nil, "env", "--shell", "bash", "--scenario", sc.Name)
			for _, v := range env.Vars {
				if !strings.Contains(snippet, v.Name) {
					t.Errorf("env --json has %s, the bash snippet does not:\n%s", v.Name, snippet)
				}
				sawVar = true
			}
		})
	}
	if !sawFix || !sawVar {
		t.Fatalf("no scenario produced a fix (%v) or a variable (%v): the comparison proved nothing", sawFix, sawVar)
	}
}

func TestFixJSONWithApply(t *testing.T) {
	out, errOut, code := runCLI(t, nil, "fix", "--json", "--apply", "shm.cleanup,proc.stale", "--dry-run", "--scenario", "shm-orphans")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan fixPlanJSON
	mustMatchSchema(t, "fix.schema.json", out, &plan)
	if len(plan.Fixes) != 1 || plan.Fixes[0].ID != "shm.cleanup" {
		t.Fatalf("want only shm.cleanup planned, got %+v", plan.Fixes)
	}
	if !strings.Contains(plan.NotPlanned["proc.stale"], "no leftover rank") {
		t.Fatalf("proc.stale has no reason in not_planned: %v", plan.NotPlanned)
	}
	for _, args := range [][]string{
		{"--apply", "shm.cleanup"},
		{"--apply", "shm.cleanup", "--yes"},
		{"--export", "-"},
	} {
		_, errOut, code := runCLI(t, nil, append([]string{"fix", "--json", "--scenario", "shm-orphans"}, args...)...)
		if code != 2 || !strings.Contains(errOut, "--json prints the plan and applies nothing") {
			t.Errorf("fix --json %q: exit %d, %q; want a usage error", args, code, errOut)
		}
	}
}

func TestListChecksAndVersionJSON(t *testing.T) {
	out, errOut, code := runCLI(t, nil, "check", "--list-checks", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc checkListJSON
	mustMatchSchema(t, "checks.schema.json", out, &doc)
	plain, _, _ := runCLI(t, nil, "check", "--list-checks")
	if rows := strings.Count(strings.TrimSpace(plain), "\n"); rows != len(doc.Checks) {
		t.Fatalf("--list-checks shows %d checks, --json %d", rows, len(doc.Checks))
	}

	out, errOut, code = runCLI(t, nil, "version", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v versionInfo
	mustMatchSchema(t, "version.schema.json", out, &v)
	line, _, _ := runCLI(t, nil, "version")
	if !strings.Contains(line, v.Version) || !strings.Contains(line, v.GoVersion) {
		t.Fatalf("version says %q, --json %+v", line, v)
	}
}

// The schemas are closed: a field the code adds without documenting it
// fails validation.
func TestNewSchemasRejectUndocumentedFields(t *testing.T) {
	for _, c := range []struct{ schema, args string }{
		{"fix.schema.json", "fix --json --scenario shm-orphans"},
		{"env.schema.json", "env --json --scenario wrong-ifname"},
		{"checks.schema.json", "check --list-checks --json"},
		{"version.schema.json", "version --json"},
		{"guides.schema.json", "guides --list --json"},
	} {
		out, _, _ := runCLI(t, nil, strings.Fields(c.args)...)
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatal(err)
		}
		m["undocumented"] = true
		b, _ := json.Marshal(m)
		sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "docs", c.schema))
		if err != nil {
			t.Fatal(err)
		}
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if sch.Validate(inst) == nil {
			t.Errorf("%s accepts an undocumented field", c.schema)
		}
	}
}

func TestManPages(t *testing.T) {
	out, errOut, code := runCLI(t, nil, "man")
	if code != 0 || !strings.Contains(out, `.TH "NCCLWIZ" "1"`) || !strings.Contains(out, "walks you from an NCCL error") {
		t.Fatalf("man to stdout: exit %d, %s\n%.400s", code, errOut, out)
	}
	dir := filepath.Join(t.TempDir(), "man1")
	if _, errOut, code := runCLI(t, nil, "man", dir); code != 0 {
		t.Fatalf("man DIR: exit %d: %s", code, errOut)
	}
	for _, page := range []string{"ncclwiz.1", "ncclwiz-check.1", "ncclwiz-fix.1", "ncclwiz-env.1", "ncclwiz-test.1", "ncclwiz-cluster-check.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("man DIR did not write %s: %v", page, err)
			continue
		}
		if !bytes.Contains(b, []byte(".SH")) {
			t.Errorf("%s is not a man page:\n%.300s", page, b)
		}
	}
	fixPage, _ := os.ReadFile(filepath.Join(dir, "ncclwiz-fix.1"))
	if !bytes.Contains(fixPage, []byte(`--json`)) {
		t.Error("ncclwiz-fix.1 does not document --json")
	}
}

// fix --export writes through internal/safefile: an executable script,
// and never through a symlink planted at the name.
func TestFixExportWritesSafely(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "fix.sh")
	if _, errOut, code := runCLI(t, nil, "fix", "--export", p, "--scenario", "shm-orphans"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("exported script: %v %v", fi, err)
	}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sh")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, nil, "fix", "--export", link, "--scenario", "shm-orphans")
	if code == 0 || !strings.Contains(errOut, "symbolic link") {
		t.Fatalf("export through a symlink: exit %d, %q", code, errOut)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the symlink's target was written: %q", b)
	}
}
