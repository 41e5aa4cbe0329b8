package validate

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The embedded scripts compile with the machine's python3.
func TestScriptsCompile(t *testing.T) {
	py := realPython(t)
	dir := t.TempDir()
	for name, src := range map[string][]byte{"collective.py": CollectiveScript, "probe.py": ProbeScript} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, src, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(py, "-m", "py_compile", path)
		cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+filepath.Join(dir, "cache"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s does not compile: %v\n%s", name, err, out)
		}
	}
}

// The script and the runner agree on the prefix and the default sizes.
func TestScriptConstantsMatchRunner(t *testing.T) {
	src := string(CollectiveScript)
	if !strings.Contains(src, `PREFIX = "`+ResultPrefix+`"`) {
		t.Error("the script's PREFIX differs from ResultPrefix")
	}
	m := regexp.MustCompile(`DEFAULT_SIZES = \[([0-9, ]+)\]`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("no DEFAULT_SIZES in the script")
	}
	var runner []string
	for _, s := range torchSizes(DefaultMaxBytes) {
		runner = append(runner, trimFloat(float64(s)))
	}
	if strings.ReplaceAll(m[1], " ", "") != strings.Join(runner, ",") {
		t.Errorf("script sizes %s, runner sizes %v", m[1], runner)
	}
}

// runScript runs collective.py as one rank (world size 1) with the fake
// torch package, and returns its lines and exit code.
func runScript(t *testing.T, env ...string) ([]string, int) {
	t.Helper()
	py := realPython(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "collective.py")
	if err := os.WriteFile(path, CollectiveScript, 0o600); err != nil {
		t.Fatal(err)
	}
	faketorch, _ := filepath.Abs("testdata/faketorch")
	cmd := exec.Command(py, path)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=1", "FAKE_TORCH_STORE=" + dir,
		"PYTHONPYCACHEPREFIX=" + filepath.Join(dir, "cache"), "NCCLWIZ_SIZES=8,1024", "PYTHONPATH=" + faketorch}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(out.String()), "\n"), code
}

// Every line the real script prints parses with the runner's parser.
func TestScriptOutputFormat(t *testing.T) {
	lines, code := runScript(t)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, strings.Join(lines, "\n"))
	}
	var kinds []string
	for _, l := range lines {
		s, ok, err := ParseScriptLine(l)
		if !ok || err != nil {
			t.Fatalf("unparsable line %q: %v", l, err)
		}
		kinds = append(kinds, s.Kind)
		if s.Kind == "result" && (s.OK == nil || !*s.OK || s.Dtype != "float32" || s.Iters == 0 || s.Count == 0) {
			t.Errorf("result %+v", s)
		}
		if s.Kind == "start" && (s.Torch != "2.5.1+fake" || s.NCCL != "2.21.5" || s.World != 1 || s.CC != "9.0") {
			t.Errorf("start %+v", s)
		}
	}
	if strings.Join(kinds, ",") != "start,result,result,result,result,done" {
		t.Errorf("kinds %v", kinds)
	}
}

// Errors become one JSON line and a non-zero exit.
func TestScriptErrorLine(t *testing.T) {
	lines, code := runScript(t, "FAKE_TORCH=nocuda")
	if code != 1 || len(lines) != 1 {
		t.Fatalf("exit %d: %q", code, lines)
	}
	s, ok, err := ParseScriptLine(lines[0])
	if !ok || err != nil || s.Kind != "error" || s.Stage != "select GPU" || s.Type != "RuntimeError" || len(s.Traceback) == 0 {
		t.Errorf("%+v %v", s, err)
	}
}

func TestProbeScript(t *testing.T) {
	py := realPython(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "probe.py")
	if err := os.WriteFile(path, ProbeScript, 0o600); err != nil {
		t.Fatal(err)
	}
	faketorch, _ := filepath.Abs("testdata/faketorch")
	for _, c := range []struct{ env, want string }{
		{"PYTHONPATH=" + faketorch, `"device_count": 8`},
		{"PYTHONPATH=" + filepath.Join(dir, "nothing"), `"error": "ModuleNotFoundError: No module named 'torch'"`},
	} {
		cmd := exec.Command(py, path)
		cmd.Env = []string{"PATH=/usr/bin:/bin", c.env, "PYTHONPYCACHEPREFIX=" + filepath.Join(dir, "cache")}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "NCCLWIZ_PROBE {") || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: %v %s", c.env, err, out)
		}
	}
}
