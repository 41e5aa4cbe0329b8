package steps

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/envvars"
	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
	"github.com/ncclwiz/ncclwiz/scenario"
	"github.com/ncclwiz/ncclwiz/steps/envsnippet"
)

const staleStat = "777 (python) S 1 777 777 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 424242 0 0 0"

// fixtureHost is a small machine: a 64 MiB /dev/shm with one orphan, one
// segment held by a live process, a symlink and another user's orphan; a
// leftover rank (pid 777, launcher gone); fstab and logind.conf.
func fixtureHost(t testing.TB) *host.Host {
	t.Helper()
	uid := os.Geteuid()
	h := ft.Tree(t, map[string]any{
		"/proc/self/mountinfo":     "25 22 0:23 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,size=65536k\n",
		"/proc/self/status":        "NSpid:\t42\nCapEff:\t000001ffffffffff\n",
		"/proc/meminfo":            "MemTotal:       67108864 kB\n",
		"/proc/uptime":             "10000.0 100.0\n",
		"/dev/shm/nccl-old001":     "x",
		"/dev/shm/nccl-held02":     "x",
		"/dev/shm/nccl-other3":     "x",
		"/dev/shm/nccl-link04":     ft.Symlink("/etc/passwd"),
		"/proc/4242/fd/7":          ft.Symlink("/dev/shm/nccl-held02"),
		"/proc/4242/maps":          "",
		"/proc/4242/status":        "Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n",
		"/proc/4242/stat":          "4242 (python) S 4000 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5000 0 0 0",
		"/proc/777/stat":           staleStat,
		"/proc/777/status":         "Uid:\t" + itoa(uid) + "\t" + itoa(uid) + "\t" + itoa(uid) + "\t" + itoa(uid) + "\n",
		"/proc/777/cmdline":        "python\x00train.py\x00--local-rank=3\x00",
		"/proc/777/environ":        "RANK=3\x00LOCAL_RANK=3\x00WORLD_SIZE=8\x00TORCHELASTIC_RUN_ID=none\x00",
		"/proc/1/stat":             "1 (systemd) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0 0",
		"/proc/1/status":           "Name:\tsystemd\nNSpid:\t1\n",
		"/proc/777/comm":           "python\n",
		"/proc/777/fd":             nil,
		"/proc/777/maps":           "",
		"/etc/fstab":               "UUID=abcd / ext4 defaults 0 1\n",
		"/etc/systemd/logind.conf": "[Login]\n#RemoveIPC=yes\n",
		"/run/systemd/seats":       nil,
	}, host.FixtureSpec{UID: uid, Statfs: map[string]host.StatFS{"/dev/shm": ft.StatfsTmpfs(64<<20, 60<<20)}})
	old := time.Now().Add(-time.Hour)
	for _, n := range []string{"nccl-old001", "nccl-held02", "nccl-other3"} {
		_ = os.Chtimes(filepath.Join(h.Root, "dev/shm", n), old, old)
	}
	if uid == 0 {
		_ = os.Chown(filepath.Join(h.Root, "dev/shm/nccl-other3"), 4321, 4321)
	}
	return h
}

func itoa(i int) string { return strconv.Itoa(i) }

func want(check string, sev checks.Severity, ids ...string) checks.Finding {
	return checks.Finding{Check: check, Severity: sev, Title: "t " + check, Fixes: ids}
}

func ids(fs []Fix) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

func TestPlanOnlyWhatFindingsAskFor(t *testing.T) {
	h := fixtureHost(t)
	ctx := context.Background()
	if fs := Plan(ctx, h, nil); len(fs) != 0 {
		t.Errorf("no findings, but planned %v", ids(fs))
	}
	if fs := Plan(ctx, h, []checks.Finding{want("host.ipc", checks.Info, "systemd.removeipc")}); len(fs) != 0 {
		t.Errorf("an informational finding planned %v", ids(fs))
	}
	fs, notes := PlanWith(ctx, h, []checks.Finding{want("shm.mount", checks.Error, "shm.remount", "shm.cleanup")}, PlanOptions{Want: []string{"limits.memlock", "env.export"}})
	got := strings.Join(ids(fs), ",")
	if got != "shm.cleanup,shm.remount,shm.persist,limits.memlock" {
		t.Errorf("planned %s", got)
	}
	if !strings.Contains(notes["env.export"], "no environment change") {
		t.Errorf("env.export note %q", notes["env.export"])
	}
	cl, _ := ByID(fs, "shm.cleanup")
	if len(cl.Answers) != 1 || cl.Answers[0] != "shm.mount" || cl.Guide != "shm-stale-segments" {
		t.Errorf("cleanup answers %v guide %s", cl.Answers, cl.Guide)
	}
	// Preview: the orphan only; the held segment, the symlink and the other
	// user's file are named as left alone (the symlink with its target).
	pv := strings.Join(cl.Preview(), "\n")
	if !strings.Contains(pv, "rm -- "+h.ShmLogical()+"/nccl-old001") || strings.Contains(pv, "held02") || strings.Contains(pv, "link04") {
		t.Errorf("preview:\n%s", pv)
	}
	warn := strings.Join(cl.Warnings, "\n")
	if !strings.Contains(warn, "nccl-link04: a symlink to /etc/passwd") {
		t.Errorf("warnings:\n%s", warn)
	}
	if os.Geteuid() == 0 && (!strings.Contains(warn, "nccl-other3: owned by uid 4321") || strings.Contains(pv, "other3")) {
		t.Errorf("other user's file: warnings %s preview %s", warn, pv)
	}
	rm, _ := ByID(fs, "shm.remount")
	if !strings.Contains(strings.Join(rm.Preview(), "\n"), "mount -o remount,size=8g /dev/shm") || !strings.Contains(rm.Summary, "size=8g — room for an 8-GPU node") {
		t.Errorf("remount: %v %s", rm.Preview(), rm.Summary)
	}
}

func TestPlanOrderUserRootImpossible(t *testing.T) {
	h := fixtureHost(t)
	// A docker container without CAP_SYS_ADMIN: remount becomes impossible.
	if err := os.WriteFile(filepath.Join(h.Root, ".dockerenv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.Root, "proc/self/status"), []byte("NSpid:\t42\nCapEff:\t00000000a80425fb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, notes := PlanWith(context.Background(), h, nil, PlanOptions{Want: []string{"shm.remount", "systemd.removeipc", "shm.cleanup", "container.shm", "proc.stale"}})
	got := strings.Join(ids(fs), ",")
	if got != "proc.stale,container.shm,systemd.removeipc,shm.remount" {
		t.Errorf("order %s", got)
	}
	// In a container other processes may share /dev/shm: nothing is orphaned.
	if !strings.Contains(notes["shm.cleanup"], "no segment in /dev/shm is proven orphaned") {
		t.Errorf("cleanup note %q", notes["shm.cleanup"])
	}
	rm, _ := ByID(fs, "shm.remount")
	if !strings.Contains(rm.Impossible, "docker container") || !strings.Contains(rm.Alternative, "container.shm") {
		t.Errorf("remount in a container: %q / %q", rm.Impossible, rm.Alternative)
	}
	if _, err := rm.Apply(context.Background(), h, ApplyOptions{Yes: true}); err == nil {
		t.Error("an impossible fix applied")
	}
	cs, _ := ByID(fs, "container.shm")
	if !strings.HasPrefix(cs.Steps[0].Comment, "docker:") || !strings.Contains(strings.Join(cs.Preview(), "\n"), "--shm-size=8g") {
		t.Errorf("container.shm for docker:\n%s", strings.Join(cs.Preview(), "\n"))
	}
}

// Cleanup on a fixture tree (no root needed): the orphan goes, everything
// else stays; a dry run changes nothing; a second run has nothing to do.
func TestCleanupFixture(t *testing.T) {
	h := fixtureHost(t)
	ctx := context.Background()
	fx, ok := ByID(PlanFor(ctx, h, nil, []string{"shm.cleanup"}), "shm.cleanup")
	if !ok {
		t.Fatal("not planned")
	}
	shm := filepath.Join(h.Root, "dev/shm")
	dry, err := fx.Apply(ctx, h, ApplyOptions{DryRun: true})
	if err != nil || dry.Verdict != VerdictDryRun || !strings.Contains(strings.Join(dry.Changed, "\n"), "would remove") {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if _, err := os.Lstat(filepath.Join(shm, "nccl-old001")); err != nil {
		t.Fatal("dry run removed the orphan")
	}
	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil {
		t.Fatal(err)
	}
	// nccl-other3 belongs to another user only when the test can chown it.
	for name, gone := range map[string]bool{"nccl-old001": true, "nccl-held02": false, "nccl-link04": false, "nccl-other3": os.Geteuid() != 0} {
		_, err := os.Lstat(filepath.Join(shm, name))
		if (err != nil) != gone {
			t.Errorf("%s: exists=%v, want gone=%v", name, err == nil, gone)
		}
	}
	// The orphan finding is gone; the fixture's statfs is fixed, so shm.mount
	// still calls /dev/shm full and the verdict says the problem remains.
	if len(out.Changed) != map[bool]int{true: 1, false: 2}[os.Geteuid() == 0] || out.Verdict != VerdictFailed || len(out.Remaining) != 1 || out.Remaining[0].Check != "shm.mount" {
		t.Errorf("outcome %+v", out)
	}
	for _, r := range out.Recheck {
		for _, f := range r.Findings {
			if f.Check == "shm.segments" && f.Severity.IsProblem() {
				t.Errorf("re-check still reports %q", f.Title)
			}
		}
	}
	if b, _ := os.ReadFile("/etc/passwd"); len(b) == 0 {
		t.Error("symlink target damaged")
	}
	again, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil || len(again.Changed) != 0 || !strings.Contains(strings.Join(again.Skipped, ""), "already gone") {
		t.Errorf("second apply: %+v %v", again, err)
	}
	// With the remount still open in the plan, the full /dev/shm is its
	// job: named, not held against the cleanup (Judge).
	handed, err := fx.Apply(ctx, h, ApplyOptions{Yes: true, Open: []string{"shm.remount"}})
	if err != nil || handed.Verdict != VerdictHandedOn || len(handed.Remaining) != 0 || len(handed.Answered) != 1 ||
		handed.Answered[0].Finding.Check != "shm.mount" || !slices.Equal(handed.Answered[0].By, []string{"shm.remount"}) {
		t.Errorf("apply with the remount open: %+v %v", handed, err)
	}
}

// proc.stale: SIGTERM by PID; a rank that ignores it gets SIGKILL only with
// Kill or a Confirm that says yes — never because of Yes alone.
func TestStaleEscalation(t *testing.T) {
	for _, tt := range []struct {
		name     string
		stubborn bool
		opts     ApplyOptions
		wantSigs string
		gone     bool
	}{
		{"obeys SIGTERM", false, ApplyOptions{Yes: true}, "TERM", true},
		{"ignores SIGTERM, Yes only", true, ApplyOptions{Yes: true}, "TERM", false},
		{"ignores SIGTERM, Confirm no", true, ApplyOptions{Yes: true, Confirm: func(string) bool { return false }}, "TERM", false},
		{"ignores SIGTERM, Confirm yes", true, ApplyOptions{Yes: true, Confirm: func(q string) bool { return strings.Contains(q, "pid 777") }}, "TERM KILL", true},
		{"ignores SIGTERM, --kill", true, ApplyOptions{Yes: true, Kill: true}, "TERM KILL", true},
		{"dry run", false, ApplyOptions{DryRun: true}, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each judges with a CPU sample of a second
			h := fixtureHost(t)
			var sigs []string
			h.Act.Signal = func(pid int, sig syscall.Signal) error {
				if pid != 777 {
					t.Errorf("signalled pid %d", pid)
				}
				name := map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGKILL: "KILL"}[sig]
				sigs = append(sigs, name)
				if sig == syscall.SIGKILL || !tt.stubborn {
					return os.RemoveAll(h.Path("/proc/777"))
				}
				return nil
			}
			ctx := context.Background()
			fx, ok := ByID(PlanFor(ctx, h, nil, []string{"proc.stale"}), "proc.stale")
			if !ok {
				t.Fatal("not planned")
			}
			if pv := strings.Join(fx.Preview(), "\n"); !strings.Contains(pv, "kill -TERM 777") || !strings.Contains(pv, "rank 3") {
				t.Errorf("preview:\n%s", pv)
			}
			tt.opts.Grace = 200 * time.Millisecond
			out, err := fx.Apply(ctx, h, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(sigs, " "); got != tt.wantSigs {
				t.Errorf("signals %q, want %q (outcome %+v)", got, tt.wantSigs, out)
			}
			_, err = os.Stat(h.Path("/proc/777"))
			if gone := err != nil; gone != tt.gone {
				t.Errorf("gone = %v, want %v", gone, tt.gone)
			}
		})
	}
}

// A PID reused by another process (different start time) is never signalled.
func TestStaleRecycledPID(t *testing.T) {
	h := fixtureHost(t)
	h.Act.Signal = func(pid int, sig syscall.Signal) error { t.Errorf("signalled %d", pid); return nil }
	ctx := context.Background()
	fx, ok := ByID(PlanFor(ctx, h, nil, []string{"proc.stale"}), "proc.stale")
	if !ok {
		t.Fatal("not planned")
	}
	if err := os.WriteFile(h.Path("/proc/777/stat"), []byte(strings.Replace(staleStat, "424242", "999999", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true, Kill: true})
	if err != nil || !strings.Contains(strings.Join(out.Skipped, ""), "already ended") {
		t.Errorf("%+v %v", out, err)
	}
}

// On a practice scenario every fix acts on the scenario's private copy:
// segments, size, fstab and drop-ins change there, the real machine does not.
func TestSimulatedScenarioChangesOnlyItsCopy(t *testing.T) {
	s, err := scenario.Build("shm-orphans")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := s.Host
	ctx := context.Background()
	realFstab, _ := os.ReadFile("/etc/fstab")
	before, _ := os.ReadDir(h.ShmReal())
	fs := PlanFor(ctx, h, nil, []string{"shm.cleanup", "shm.remount", "shm.persist", "systemd.removeipc", "limits.memlock"})
	for _, fx := range fs {
		if fx.Impossible != "" || fx.Manual {
			continue
		}
		out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
		if err != nil {
			t.Errorf("%s: %v", fx.ID, err)
			continue
		}
		if fx.ID != "systemd.removeipc" && fx.ID != "limits.memlock" && out.Verdict == VerdictFailed {
			t.Errorf("%s: re-check failed: %+v", fx.ID, out.Remaining)
		}
	}
	after, _ := os.ReadDir(h.ShmReal())
	if len(after) >= len(before) {
		t.Errorf("cleanup removed nothing in the simulation: %d -> %d entries", len(before), len(after))
	}
	for _, e := range after {
		if e.Name() == "nccl-Live01" {
			goto live
		}
	}
	t.Error("the simulated live segment was removed")
live:
	if b, _ := os.ReadFile(filepath.Join(h.Root, "etc/fstab")); !strings.Contains(string(b), "/dev/shm") {
		t.Errorf("simulated fstab: %q", b)
	}
	if b, _ := os.ReadFile("/etc/fstab"); !bytes.Equal(b, realFstab) {
		t.Error("the real /etc/fstab changed")
	}
	if _, err := os.Stat(filepath.Join(h.Root, memlockDropIn.path)); err != nil {
		t.Error("simulated memlock drop-in not written")
	}
	st, _ := h.Statfs(h.ShmLogical())
	if st.Total() <= 128<<20 {
		t.Errorf("simulated /dev/shm not grown: %d", st.Total())
	}
}

func TestEnvExport(t *testing.T) {
	fs := []checks.Finding{
		{Check: "net.interfaces", Severity: checks.Error, Fixes: []string{"env.export"}, Evidence: map[string]any{
			"recommended_env":        map[string]string{"NCCL_SOCKET_IFNAME": "=eth0", "NCCL_SHM_DISABLE": "1"},
			"recommended_env_reason": map[string]string{"NCCL_SOCKET_IFNAME": "eth0 routes to MASTER_ADDR"}}},
		{Check: "env.nccl", Severity: checks.Info, Fixes: []string{"env.export"}, Evidence: map[string]any{
			"recommended_env": map[string]any{"NCCL_DEBUG": "INFO", "NCCL_TIMEOUT": "1800"}}},
		{Check: "net.rdma", Severity: checks.Warn, Fixes: []string{"env.export"}, Evidence: map[string]any{
			"recommended_env": map[string]string{"NCCL_IB_DISABLE": "1"}}},
		{Check: "gpu.topology", Severity: checks.Warn, Fixes: []string{"env.export"}, Evidence: map[string]any{
			"recommended_env": map[string]string{"NCCL_IB_DISABLE": "0"}}},
	}
	vars, conflicts, invalid := EnvPlan(fs, nil)
	var names []string
	for _, v := range vars {
		names = append(names, v.Name)
	}
	if strings.Join(names, ",") != "NCCL_DEBUG,NCCL_SHM_DISABLE,NCCL_SOCKET_IFNAME" {
		t.Errorf("vars %v", names)
	}
	if len(conflicts) != 1 || conflicts[0].Name != "NCCL_IB_DISABLE" || len(invalid) != 1 || !strings.Contains(invalid[0], "NCCL_TIMEOUT") {
		t.Errorf("conflicts %v invalid %v", conflicts, invalid)
	}
	h := &host.Host{Root: t.TempDir(), Env: []string{"NCCL_DEBUG=INFO"}}
	fx, ok := ByID(Plan(context.Background(), h, fs), "env.export")
	if !ok {
		t.Fatal("env.export not planned")
	}
	pv := strings.Join(fx.Preview(), "\n")
	if !strings.Contains(pv, "export NCCL_SOCKET_IFNAME='=eth0'") || !strings.Contains(pv, "# export NCCL_SHM_DISABLE=1") || strings.Contains(pv, "NCCL_DEBUG") {
		t.Errorf("preview:\n%s", pv)
	}
	w := strings.Join(fx.Warnings, "\n")
	if !strings.Contains(w, "already set in this environment: NCCL_DEBUG=INFO") || !strings.Contains(w, "NCCL_IB_DISABLE=1 (net.rdma) vs NCCL_IB_DISABLE=0 (gpu.topology)") {
		t.Errorf("warnings:\n%s", w)
	}
}

var envName = regexp.MustCompile(`\b(?:NCCL|TORCH_NCCL|TORCH_DISTRIBUTED|CUDA|GLOO)_[A-Z0-9_]+\b`)

// Every environment variable in every text a fix can produce — summaries,
// previews, every snippet format, the exported script — is one ncclwiz may
// suggest.
func TestEveryMentionedVariableIsSuggestible(t *testing.T) {
	h := fixtureHost(t)
	var text strings.Builder
	var recommended []envsnippet.Var
	for _, v := range envvars.All() {
		if v.Suggestible() {
			recommended = append(recommended, envsnippet.Var{Name: v.Name, Value: "1", Reason: "test"})
		}
	}
	fs := []checks.Finding{{Check: "x", Severity: checks.Warn, Fixes: []string{"env.export"}, Evidence: map[string]any{
		"recommended_env": map[string]string{"NCCL_SOCKET_IFNAME": "eth0", "NCCL_SHM_DISABLE": "1", "NCCL_CUMEM_HOST_ENABLE": "0",
			"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1", "NCCL_DEBUG": "INFO", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}}}}
	plan := PlanFor(context.Background(), h, fs, IDs())
	for _, f := range plan {
		text.WriteString(f.Title + "\n" + f.Summary + "\n" + f.Impossible + "\n" + f.Alternative + "\n" + strings.Join(f.Preview(), "\n") + "\n" + strings.Join(f.Warnings, "\n"))
	}
	for _, rt := range []string{"docker", "kubernetes", "podman", "apptainer", "containerd", "lxc", "none"} {
		for _, s := range ContainerSnippets(rt, shm.RecommendSize(64<<30, 0)) {
			text.WriteString(s.Comment + "\n" + strings.Join(s.Lines, "\n") + "\n")
		}
	}
	for _, format := range envsnippet.Formats {
		out, err := envsnippet.Render(format, EnvChanges(fs))
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(out)
	}
	var buf bytes.Buffer
	if err := ExportScriptWith(&buf, h, plan, fs, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	text.WriteString(buf.String())
	for _, n := range envName.FindAllString(text.String(), -1) {
		if v, ok := envvars.Lookup(n); !ok || !v.Suggestible() {
			t.Errorf("a fix mentions %s, which ncclwiz must not suggest", n)
		}
	}
	if len(recommended) == 0 {
		t.Fatal("no suggestible variables in envvars")
	}
	if _, err := envsnippet.Render("bash", recommended); err != nil {
		t.Errorf("a suggestible variable is refused: %v", err)
	}
}

// Every guide a fix points to exists.
func TestGuidesExist(t *testing.T) {
	lib, err := guides.Load()
	if err != nil {
		t.Fatal(err)
	}
	h := fixtureHost(t)
	fs := []checks.Finding{{Check: "x", Severity: checks.Warn, Fixes: []string{"env.export"}, Evidence: map[string]any{
		"recommended_env": map[string]string{"NCCL_DEBUG": "INFO"}}}}
	plan := PlanFor(context.Background(), h, fs, IDs())
	if len(plan) < 7 {
		t.Errorf("only %d fixes planned: %v", len(plan), ids(plan))
	}
	for _, f := range plan {
		if f.Guide == "" {
			t.Errorf("%s names no guide", f.ID)
			continue
		}
		if _, ok := lib.Get(f.Guide, "en"); !ok {
			t.Errorf("%s names guide %q, which does not exist", f.ID, f.Guide)
		}
	}
}

func shellcheck(t *testing.T, script string) {
	t.Helper()
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Log("shellcheck not installed (CI installs it); lint skipped")
		return
	}
	cmd := exec.Command(sc, "-s", "bash", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// Every kind of fix, exported from a fixture host: shellcheck-clean, valid
// bash, no name patterns, no globs in rm, dry run by default.
func TestExportedScriptEveryFix(t *testing.T) {
	h := fixtureHost(t)
	fs := []checks.Finding{
		{Check: "shm.segments", Severity: checks.Warn, Title: "1 orphaned NCCL segment \x1b[31mred\x1b[0m\nsecond line", Fixes: []string{"shm.cleanup"}},
		{Check: "x", Severity: checks.Warn, Fixes: []string{"env.export"}, Evidence: map[string]any{"recommended_env": map[string]string{"NCCL_DEBUG": "INFO"}}},
	}
	plan := PlanFor(context.Background(), h, fs, IDs())
	var buf bytes.Buffer
	if err := ExportScript(context.Background(), &buf, h, plan, fs, "test"); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	shellcheck(t, s)
	if out, err := exec.Command("bash", "-n", "-c", s).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v %s", err, out)
	}
	for _, want := range []string{"set -euo pipefail", "APPLY=0", "== %s", "section 'steps that need root'", "remove_unused", "stop_rank 777 424242",
		"remount_shm /dev/shm 8g", "fstab_set \"$ETC/fstab\" /dev/shm 8g rw,nosuid,nodev", "RemoveIPC=no", "memlock",
		"#   [warn] shm.segments: 1 orphaned NCCL segment \\x1b[31mred\\x1b[0m second line"} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q", want)
		}
	}
	checkScriptSafety(t, s)
}

// checkScriptSafety: no pkill/killall, no rm of a glob or recursive rm, no
// SIGKILL, no raw control bytes.
func checkScriptSafety(t *testing.T, s string) {
	t.Helper()
	for i, line := range strings.Split(s, "\n") {
		code, _, _ := strings.Cut(line, "#")
		if strings.Contains(code, "pkill") || strings.Contains(code, "killall") {
			t.Errorf("line %d ends processes by name: %s", i+1, line)
		}
		if f := strings.Fields(code); len(f) > 0 {
			for j, w := range f {
				if (w == "rm" || strings.HasSuffix(w, "rm")) && j+1 < len(f) {
					rest := strings.Join(f[j+1:], " ")
					if strings.Contains(rest, "*") || strings.Contains(rest, " -r") || strings.HasPrefix(rest, "-r") || strings.HasPrefix(rest, "-rf") {
						t.Errorf("line %d removes a glob or recursively: %s", i+1, line)
					}
				}
			}
		}
		if strings.Contains(code, "kill -KILL") || strings.Contains(code, "kill -9") {
			if !strings.Contains(line, "say ") {
				t.Errorf("line %d sends SIGKILL: %s", i+1, line)
			}
		}
	}
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			t.Fatalf("raw control byte %q in the script", r)
		}
	}
}

// /dev/shm as a symlink to /run/shm (old Debian): cleanup works through it,
// inside the fixture's root.
func TestCleanupThroughSymlinkedShmDir(t *testing.T) {
	uid := os.Geteuid()
	h := ft.Tree(t, map[string]any{
		"/proc/self/mountinfo": "25 22 0:23 / /run/shm rw,nosuid,nodev - tmpfs tmpfs rw,size=65536k\n",
		"/proc/self/status":    "NSpid:\t42\n",
		"/run/shm/nccl-old001": "x",
		"/dev/shm":             ft.Symlink("../run/shm"), // relative: an absolute link would leave the fixture root
	}, host.FixtureSpec{UID: uid, Statfs: map[string]host.StatFS{"/dev/shm": ft.StatfsTmpfs(64<<20, 1<<20)}})
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(filepath.Join(h.Root, "run/shm/nccl-old001"), old, old)
	ctx := context.Background()
	fs, notes := PlanWith(ctx, h, nil, PlanOptions{Want: []string{"shm.cleanup"}})
	fx, ok := ByID(fs, "shm.cleanup")
	if !ok {
		t.Fatalf("not planned: %s", notes["shm.cleanup"])
	}
	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil || len(out.Changed) != 1 || exists(filepath.Join(h.Root, "run/shm/nccl-old001")) {
		t.Errorf("%+v %v", out, err)
	}
	if fi, err := os.Lstat(filepath.Join(h.Root, "dev/shm")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the directory symlink was touched")
	}
}
