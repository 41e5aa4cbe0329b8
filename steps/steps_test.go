package steps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/envvars"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
	"github.com/ncclwiz/ncclwiz/steps/envsnippet"
)

func fixtureHostWithEverything(t *testing.T) *host.Host {
	t.Helper()
	h := ft.Tree(t, map[string]any{
		"/proc/self/mountinfo": "25 22 0:23 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,size=65536k\n",
		"/proc/self/status":    "NSpid:\t42\nCapEff:\t000001ffffffffff\n",
		"/proc/meminfo":        "MemTotal:       65536000 kB\n",
		"/dev/shm/nccl-old001": "x",
		"/etc/fstab":           "UUID=abcd / ext4 defaults 0 1\n",
	}, host.FixtureSpec{UID: os.Geteuid(), Statfs: map[string]host.StatFS{"/dev/shm": ft.StatfsTmpfs(64<<20, 60<<20)}})
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(filepath.Join(h.Root, "dev/shm/nccl-old001"), old, old)
	return h
}

func TestPlanOnlyWhatFindingsAskFor(t *testing.T) {
	h := fixtureHostWithEverything(t)
	ctx := context.Background()
	if fs := Plan(ctx, h, nil); len(fs) != 0 {
		t.Errorf("no findings, but planned %d fixes", len(fs))
	}
	info := []checks.Finding{{Check: "host.ipc", Severity: checks.Info, Fixes: []string{"systemd.removeipc"}}}
	if fs := Plan(ctx, h, info); len(fs) != 0 {
		t.Errorf("an informational finding planned %v", fs)
	}
	fs := Plan(ctx, h, []checks.Finding{{Check: "shm.mount", Severity: checks.Warn, Fixes: []string{"shm.remount", "shm.cleanup"}}})
	ids := map[string]bool{}
	for _, f := range fs {
		ids[f.ID] = true
	}
	if !ids["shm.cleanup"] || !ids["shm.remount"] || !ids["shm.persist"] {
		t.Errorf("planned %v", ids)
	}
	// User-level fixes come before root ones.
	sawRoot := false
	for _, f := range fs {
		if f.NeedsRoot {
			sawRoot = true
		} else if sawRoot && f.Impossible == "" {
			t.Errorf("%s (user) listed after a root fix", f.ID)
		}
	}
}

func TestSimulatedPersistEditsTheTree(t *testing.T) {
	h := fixtureHostWithEverything(t)
	h.Simulated = true
	ctx := context.Background()
	fx, ok := ByID(PlanFor(ctx, h, nil, []string{"shm.persist"}), "shm.persist")
	if !ok {
		t.Fatal("not planned")
	}
	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(h.Root, "etc/fstab"))
	if !strings.Contains(string(b), "/dev/shm") || !strings.Contains(string(b), "size=31g") {
		t.Errorf("fstab in the simulation:\n%s\noutcome %+v", b, out)
	}
}

func TestManualAndImpossibleFixesDoNotApply(t *testing.T) {
	h := fixtureHostWithEverything(t)
	ctx := context.Background()
	for _, f := range PlanFor(ctx, h, nil, []string{"container.shm", "launch.single-gpu"}) {
		if !f.Manual {
			continue
		}
		out, err := f.Apply(ctx, h, ApplyOptions{Yes: true})
		if err != nil || len(out.Changed) != 0 {
			t.Errorf("%s: manual fix changed something: %+v %v", f.ID, out, err)
		}
	}
}

func TestEnvFromFindings(t *testing.T) {
	fs := []checks.Finding{
		{Severity: checks.Warn, Fixes: []string{"env.export"}, Evidence: map[string]any{
			"recommended_env":        map[string]string{"NCCL_SOCKET_IFNAME": "=eth0"},
			"recommended_env_reason": map[string]string{"NCCL_SOCKET_IFNAME": "default route"}}},
		{Severity: checks.Info, Fixes: []string{"env.export"}, Evidence: map[string]any{
			"recommended_env": map[string]any{"NCCL_DEBUG": "INFO"}}},
	}
	vars := EnvFrom(fs)
	if len(vars) != 2 || vars[1].Name != "NCCL_SOCKET_IFNAME" || vars[1].Reason != "default route" {
		t.Errorf("vars = %+v", vars)
	}
	fx, ok := ByID(Plan(context.Background(), &host.Host{Root: t.TempDir()}, fs), "env.export")
	if !ok || !strings.Contains(strings.Join(fx.Preview(), "\n"), "export NCCL_SOCKET_IFNAME==eth0") {
		t.Errorf("env.export = %+v", fx)
	}
}

// Every variable in every snippet a fix can print must be one ncclwiz may
// suggest.
func TestSnippetsOnlyUseRealVariables(t *testing.T) {
	h := fixtureHostWithEverything(t)
	var text strings.Builder
	for _, f := range PlanFor(context.Background(), h, nil, IDs()) {
		text.WriteString(f.Summary + "\n" + strings.Join(f.Preview(), "\n") + "\n")
	}
	for _, s := range ContainerSnippets("docker") {
		text.WriteString(strings.Join(s.Lines, "\n"))
	}
	for _, name := range envNames(text.String()) {
		if v, ok := envvars.Lookup(name); !ok || !v.Suggestible() {
			t.Errorf("fix text mentions %s, which ncclwiz must not suggest", name)
		}
	}
	if _, err := envsnippet.Render("bash", []envsnippet.Var{{Name: "NCCL_TIMEOUT", Value: "1"}}); err == nil {
		t.Error("snippet accepted NCCL_TIMEOUT")
	}
}

func envNames(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r == '_' || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) {
		if strings.HasPrefix(f, "NCCL_") || strings.HasPrefix(f, "TORCH_NCCL_") || strings.HasPrefix(f, "TORCH_DISTRIBUTED_") {
			out = append(out, f)
		}
	}
	return out
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"/dev/shm/nccl-a1": "/dev/shm/nccl-a1", "it's": `'it'\''s'`, "a b": "'a b'", "": "''"} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
