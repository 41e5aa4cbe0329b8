package envsnippet

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ncclwiz/ncclwiz/envvars"
)

var sample = []Var{
	{Name: "NCCL_SOCKET_IFNAME", Value: "=eth0", Reason: "the interface of the default route"},
	{Name: "NCCL_DEBUG", Value: "INFO", Reason: "log transports and errors of the next run"},
	{Name: "NCCL_IB_HCA", Value: "^=mlx5_1", Reason: "mlx5_1 ports are down"},
	{Name: "TORCH_NCCL_DUMP_ON_TIMEOUT", Value: "1", Reason: "dump the flight recorder when a collective times out"},
	{Name: "NCCL_SHM_DISABLE", Value: "1", Reason: "moves local traffic to the network", LastResort: true},
}

// hostile values must come out of every format exactly.
var hostile = []Var{{Name: "NCCL_SOCKET_IFNAME", Value: `^docker,lo 'x' "y" $HOME \ #z`, Reason: "a reason with\nnewline and \x1b[31m escape"}}

func TestRenderAllFormats(t *testing.T) {
	for _, f := range Formats {
		out, err := Render(f, sample)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range sample {
			if !strings.Contains(out, v.Name) {
				t.Errorf("%s lacks %s:\n%s", f, v.Name, out)
			}
		}
		// A last-resort setting is never active: every line naming it is a comment.
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "NCCL_SHM_DISABLE") && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				t.Errorf("%s: last resort is active: %q", f, l)
			}
		}
	}
	got, _ := Render("bash", sample)
	for _, want := range []string{"export NCCL_IB_HCA='^=mlx5_1'\n", "export NCCL_SOCKET_IFNAME='=eth0'\n", "# export NCCL_SHM_DISABLE=1\n", "# last resort, uncomment only if"} {
		if !strings.Contains(got, want) {
			t.Errorf("bash lacks %q:\n%s", want, got)
		}
	}
	got, _ = Render("slurm", sample)
	if !strings.Contains(got, "#SBATCH --export=ALL,NCCL_DEBUG=INFO,NCCL_IB_HCA=^=mlx5_1,NCCL_SOCKET_IFNAME==eth0,TORCH_NCCL_DUMP_ON_TIMEOUT=1\n") {
		t.Errorf("slurm:\n%s", got)
	}
}

func TestRefusesInventedAndUnsafe(t *testing.T) {
	for _, v := range []Var{
		{Name: "NCCL_TIMEOUT", Value: "1800"}, {Name: "NCCL_SHM_DIR", Value: "/x"},
		{Name: "NCCL_ASYNC_ERROR_HANDLING", Value: "1"}, {Name: "NCCL_SHM_USE_CUDA_MEMCPY", Value: "1"},
		{Name: "NCCL_DEBUG", Value: "INFO\nrm -rf /"}, {Name: "NCCL_DEBUG", Value: "INFO\x1b]0;x\a"}, {Name: "LD_PRELOAD", Value: "/x.so"},
	} {
		if _, err := Render("bash", []Var{v}); err == nil {
			t.Errorf("%s=%q accepted", v.Name, v.Value)
		}
	}
	if _, err := Render("ini", sample); err == nil {
		t.Error("unknown format accepted")
	}
}

func TestMergeAndConflicts(t *testing.T) {
	vs, cs := Merge([]Var{
		{Name: "NCCL_DEBUG", Value: "INFO", Reason: "a", From: "env.nccl"},
		{Name: "NCCL_DEBUG", Value: "INFO", Reason: "b", From: "explain"},
		{Name: "NCCL_SOCKET_IFNAME", Value: "eth0", From: "net.interfaces"},
		{Name: "NCCL_SOCKET_IFNAME", Value: "ib0", From: "net.rdma"},
		{Name: "NCCL_IB_DISABLE", Value: "1", From: "net.rdma"},
		{Name: "NCCL_IB_DISABLE", Value: "0", Priority: 10, From: "user"},
	})
	if len(vs) != 2 || vs[0].Name != "NCCL_DEBUG" || vs[0].Reason != "a; b" || vs[1].Value != "0" {
		t.Errorf("merged %+v", vs)
	}
	if len(cs) != 1 || cs[0].Name != "NCCL_SOCKET_IFNAME" || !strings.Contains(cs[0].String(), "eth0 (net.interfaces) vs NCCL_SOCKET_IFNAME=ib0") {
		t.Errorf("conflicts %+v", cs)
	}
	if _, err := Render("bash", []Var{{Name: "NCCL_DEBUG", Value: "INFO"}, {Name: "NCCL_DEBUG", Value: "WARN"}}); err == nil {
		t.Error("conflicting values rendered")
	}
}

// Every variable name in every format's output is one ncclwiz may suggest.
func TestSnippetsNameOnlySuggestibleVariables(t *testing.T) {
	name := regexp.MustCompile(`\b(?:NCCL|TORCH|CUDA|GLOO|MASTER)_[A-Z0-9_]+\b`)
	for _, f := range Formats {
		out, err := Render(f, sample)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(out, -1) {
			if v, ok := envvars.Lookup(n); !ok || !v.Suggestible() {
				t.Errorf("%s output names %s", f, n)
			}
		}
	}
}

func writeTemp(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "snippet")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The formats evaluate to the exact values, however hostile.
func TestRoundTrips(t *testing.T) {
	want := hostile[0].Value
	for _, shell := range []string{"bash", "zsh", "fish"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Logf("%s not installed; skipped", shell)
			continue
		}
		out, err := Render(shell, hostile)
		if err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command(path, "-c", "source "+writeTemp(t, out)+"; printf %s \"$NCCL_SOCKET_IFNAME\"").Output()
		if err != nil || string(got) != want {
			t.Errorf("%s round trip = %q %v, want %q", shell, got, err, want)
		}
	}
	if py, err := exec.LookPath("python3"); err == nil {
		out, _ := Render("python", hostile)
		got, err := exec.Command(py, "-c", out+"\nimport sys; sys.stdout.write(os.environ['NCCL_SOCKET_IFNAME'])").Output()
		if err != nil || string(got) != want {
			t.Errorf("python round trip = %q %v", got, err)
		}
		// python-dotenv's rules for '…' (literal) and "…" (\" escapes).
		if _, err := Render("dotenv", hostile); err == nil {
			t.Error("dotenv accepted a value with ' and $, which compose would interpolate")
		}
		dv := []Var{{Name: "NCCL_SOCKET_IFNAME", Value: `a 'b' "c" #d`}}
		out, _ = Render("dotenv", dv)
		prog := `import sys
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if not line or line.startswith("#"): continue
    k, v = line.split("=", 1)
    if v[:1] == "'": v = v[1:-1]
    elif v[:1] == '"': v = v[1:-1].replace('\\"', '"')
    sys.stdout.write(v)
`
		got, err = exec.Command(py, "-c", prog, writeTemp(t, out)).Output()
		if err != nil || string(got) != dv[0].Value {
			t.Errorf("dotenv round trip = %q %v\n%s", got, err, out)
		}
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		out, _ := Render("docker", hostile)
		var opts string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "-e ") {
				opts = l
			}
		}
		got, err := exec.Command(bash, "-c", "set -- "+opts+"; printf %s \"$2\"").Output()
		if err != nil || string(got) != "NCCL_SOCKET_IFNAME="+want {
			t.Errorf("docker round trip = %q %v", got, err)
		}
		out, _ = Render("slurm", hostile)
		got, err = exec.Command(bash, "-c", "source "+writeTemp(t, out)+"; printf %s \"$NCCL_SOCKET_IFNAME\"").Output()
		if err != nil || string(got) != want {
			t.Errorf("slurm body round trip = %q %v\n%s", got, err, out)
		}
	}
	out, _ := Render("k8s", hostile)
	var spec struct {
		Env []struct{ Name, Value string } `yaml:"env"`
	}
	if err := yaml.Unmarshal([]byte(out), &spec); err != nil || len(spec.Env) != 1 || spec.Env[0].Value != want {
		t.Errorf("k8s round trip = %+v %v\n%s", spec, err, out)
	}
	// Reasons never break out of their comment line.
	for _, f := range Formats {
		out, _ := Render(f, hostile)
		if strings.Contains(out, "\x1b") || strings.Contains(out, "\nnewline") {
			t.Errorf("%s: reason escaped its comment:\n%q", f, out)
		}
	}
}

// A snippet from a practice scenario is marked and changes nothing where
// it is pasted: in every format each line is a comment, and sourcing the
// bash one sets no variable.
func TestPracticeSnippetIsInert(t *testing.T) {
	for _, f := range Formats {
		out, err := RenderWith(f, sample, Options{Practice: "shm-orphans"})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !strings.Contains(out, "ncclwiz-practice-scenario: shm-orphans") {
			t.Errorf("%s: no marker:\n%s", f, out)
		}
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			// "# " or blank: a "#" glued to a word is a directive to sbatch
			// (#SBATCH), qsub (#PBS), bsub (#BSUB) or SGE (#$) — issue 22
			// item 16 found a live "#SBATCH --export=…" here.
			if tl := strings.TrimSpace(l); tl != "" && tl != "#" && !strings.HasPrefix(tl, "# ") {
				t.Errorf("%s: active line %q", f, l)
			}
		}
		plain, _ := Render(f, sample)
		if strings.Contains(plain, "practice") {
			t.Errorf("%s: a real machine's snippet is marked", f)
		}
	}
	out, _ := RenderWith("bash", sample, Options{Practice: "x"})
	got, err := exec.Command("env", "-i", "bash", "-c", out+"\nenv | grep -c '^NCCL_' || true").CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "0" {
		t.Errorf("sourcing the practice snippet set variables: %s %v", got, err)
	}
}

// Only removals: every format still renders, the shells' and Python's
// snippets run and remove the variable, and a name ncclwiz does not govern
// is never unset.
func TestRemovalsOnly(t *testing.T) {
	rm := []Var{{Name: "NCCL_TIMEOUT", Unset: true, Reason: "does not exist", SetIn: []string{"~/.bashrc:3: export NCCL_TIMEOUT=1800"}}}
	for _, f := range Formats {
		out, err := Render(f, rm)
		if err != nil || !strings.Contains(out, "NCCL_TIMEOUT") || !strings.Contains(out, "~/.bashrc:3") {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
	sh, _ := Render("bash", rm)
	if got, err := exec.Command("env", "-i", "NCCL_TIMEOUT=1", "bash", "-c", sh+"\necho \"[${NCCL_TIMEOUT-unset}]\"").CombinedOutput(); err != nil || strings.TrimSpace(string(got)) != "[unset]" {
		t.Errorf("bash: %q %v", got, err)
	}
	if python, err := exec.LookPath("python3"); err == nil {
		py, _ := Render("python", rm)
		cmd := exec.Command(python, "-c", py+"\nprint(os.environ.get('NCCL_TIMEOUT', 'unset'))")
		cmd.Env = []string{"NCCL_TIMEOUT=1"}
		if got, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(got)) != "unset" {
			t.Errorf("python: %q %v", got, err)
		}
	}
	for _, bad := range []Var{{Name: "PATH", Unset: true}, {Name: "NCCL_X;rm -rf /", Unset: true}, {Name: "NCCL_TIMEOUT", Unset: true, Code: "x\x1b[2J"}} {
		if _, err := Render("bash", []Var{bad}); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

// The zsh snippet, sourced by zsh with EXTENDED_GLOB (common in users'
// setups), sets exactly the values: NCCL's "^" exclusion and "=" exact-match
// prefixes are zsh operators when bare.
func TestZshSnippetSetsTheValues(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh not installed (apt-get install zsh)")
	}
	vs := []Var{
		{Name: "NCCL_IB_HCA", Value: "^=mlx5_1", Reason: "r"},
		{Name: "NCCL_SOCKET_IFNAME", Value: "=eth0", Reason: "r"},
		{Name: "GLOO_SOCKET_IFNAME", Value: "^docker,lo", Reason: "r"},
	}
	out, err := Render("zsh", vs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command("env", "-i", zsh, "-f", "-o", "extendedglob", "-c",
		out+"\nprint -r -- \"$NCCL_IB_HCA|$NCCL_SOCKET_IFNAME|$GLOO_SOCKET_IFNAME\"").CombinedOutput()
	if want := "^=mlx5_1|=eth0|^docker,lo"; err != nil || strings.TrimSpace(string(got)) != want {
		t.Fatalf("zsh read %q (%v), want %q; snippet:\n%s", got, err, want, out)
	}
}
