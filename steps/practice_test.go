package steps

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/scenario"
)

// scenarioFindings runs every check on a scenario, as `ncclwiz --scenario
// NAME fix` does.
func scenarioFindings(t *testing.T, h *host.Host) []checks.Finding {
	t.Helper()
	reg, err := all.Registry()
	if err != nil {
		t.Fatal(err)
	}
	return checks.Flatten(checks.Run(context.Background(), h, reg.All(), checks.Options{}))
}

// treeDigest hashes every file, link and directory mode under root: two
// equal digests mean nothing there changed.
func treeDigest(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsPermission(err) || os.IsNotExist(err) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		key := fmt.Sprintf("%v %d", fi.Mode(), fi.Size())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			key += " -> " + l
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err == nil {
				key += fmt.Sprintf(" %x", sha256.Sum256(b))
			}
		}
		out[p] = key
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffDigest(a, b map[string]string) []string {
	var d []string
	for k, v := range a {
		if b[k] != v {
			d = append(d, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, k)
		}
	}
	sort.Strings(d)
	return d
}

// realState is what a fix could change on the real machine: the files
// fixes write under /etc, the real /dev/shm's size and mount, and the
// entries of the real /dev/shm named like the simulation's segments
// (other tests running at the same time may use the rest of /dev/shm).
func realState(t *testing.T, shmNames []string) string {
	t.Helper()
	var b strings.Builder
	paths := []string{"/etc/fstab", "/etc/systemd/logind.conf.d", "/etc/security/limits.d"}
	for _, n := range shmNames {
		paths = append(paths, filepath.Join("/dev/shm", n))
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			fmt.Fprintf(&b, "%s absent\n", p)
			continue
		}
		d := treeDigest(t, p)
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s %s\n", k, d[k])
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil {
		fmt.Fprintf(&b, "shm blocks %d bsize %d\n", st.Blocks, st.Bsize)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == "/dev/shm" {
			b.WriteString(strings.Join(f[4:], " ") + "\n")
		}
	}
	return b.String()
}

// countingRunner fails the test on any external command: a fix applied to
// a simulation must not run one (systemctl, mount).
type countingRunner struct {
	t     *testing.T
	calls *[]string
}

func (c countingRunner) Run(_ context.Context, _ time.Duration, name string, args ...string) (host.CommandResult, error) {
	*c.calls = append(*c.calls, strings.TrimSpace(name+" "+strings.Join(args, " ")))
	return host.CommandResult{ExitCode: 1}, fmt.Errorf("%s: %w", name, host.ErrCommandNotFound)
}

// Every fix, applied with consent on every practice scenario, changes only
// the scenario's private tree: remounts and signals go through the
// scenario's own actions on its own /dev/shm and /proc, no external command
// runs, and the real /etc files, /dev/shm and its mount are unchanged.
func TestEveryFixOnEveryScenarioTouchesOnlyTheScenario(t *testing.T) {
	list, err := scenario.List()
	if err != nil {
		t.Fatal(err)
	}
	names := scenarioShmNames(t)
	realBefore := realState(t, names)
	ctx := context.Background()
	for _, info := range list {
		t.Run(info.Name, func(t *testing.T) {
			s, err := scenario.Build(info.Name)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			h := s.Host
			if h.Root == "" || h.Root == "/" {
				t.Fatalf("a scenario's root is the real root: %q", h.Root)
			}
			findings := scenarioFindings(t, h)
			plan, _ := PlanWith(ctx, h, findings, PlanOptions{Want: IDs(), AllUsers: true})
			var cmds []string
			h.Runner = countingRunner{t: t, calls: &cmds}
			simAct := h.Act
			var acted []string
			h.Act = host.Actions{
				Remount: func(dir string, size uint64, opts []string) error {
					acted = append(acted, "remount "+dir)
					if !within(dir, h.Root) {
						t.Errorf("remount of %s, outside the scenario %s", dir, h.Root)
						return fmt.Errorf("refused by the test")
					}
					return simAct.Remount(dir, size, opts)
				},
				Signal: func(pid int, sig syscall.Signal) error {
					acted = append(acted, fmt.Sprintf("signal %d", pid))
					if _, err := os.Stat(h.Path(fmt.Sprintf("/proc/%d", pid))); err != nil {
						t.Errorf("signal to pid %d, which is not a simulated process", pid)
						return fmt.Errorf("refused by the test")
					}
					return simAct.Signal(pid, sig)
				},
			}
			treeBefore := treeDigest(t, h.Root)
			applied := 0
			for _, fx := range plan {
				if fx.Impossible != "" || fx.Manual {
					continue
				}
				applied++
				if _, err := fx.Apply(ctx, h, ApplyOptions{Yes: true, Kill: true, Grace: time.Millisecond}); err != nil {
					t.Logf("%s: %v", fx.ID, err)
				}
			}
			if len(cmds) > 0 {
				t.Errorf("external commands ran for a simulation: %q", cmds)
			}
			changed := diffDigest(treeBefore, treeDigest(t, h.Root))
			for _, p := range changed {
				if !within(p, h.Root) {
					t.Errorf("changed outside the scenario: %s", p)
				}
			}
			if applied > 0 && len(changed) == 0 && len(acted) == 0 {
				t.Errorf("%d fixes applied but the simulation did not change", applied)
			}
			t.Logf("%d fixes applied; %d paths changed in the simulation; actions %q", applied, len(changed), acted)
		})
	}
	if after := realState(t, names); after != realBefore {
		t.Errorf("the real machine changed:\n%s\n---\n%s", realBefore, after)
	}
}

// scenarioShmNames lists the /dev/shm entries of every scenario.
func scenarioShmNames(t *testing.T) []string {
	t.Helper()
	list, err := scenario.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, info := range list {
		s, err := scenario.Build(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(s.Host.ShmReal())
		for _, e := range ents {
			names = append(names, e.Name())
		}
		_ = s.Close()
	}
	if len(names) == 0 {
		t.Fatal("no scenario has segments")
	}
	return names
}

func within(p, root string) bool {
	root = filepath.Clean(root)
	p = filepath.Clean(p)
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// practicePlan plans the fixes the report exported from
// shm-orphans, on the simulation.
func practicePlan(t *testing.T, h *host.Host, ids ...string) ([]Fix, []checks.Finding) {
	t.Helper()
	findings := scenarioFindings(t, h)
	plan, notes := PlanWith(context.Background(), h, findings, PlanOptions{Want: ids})
	var keep []Fix
	for _, fx := range plan {
		for _, id := range ids {
			if fx.ID == id {
				keep = append(keep, fx)
			}
		}
	}
	if len(keep) == 0 {
		t.Fatalf("nothing planned for %v: %v", ids, notes)
	}
	return keep, findings
}

// shmOrphansPlan is the shm-orphans scenario's host (closed when the test
// ends) with every step it plans and the findings behind them.
func shmOrphansPlan(t *testing.T) (*host.Host, []Fix, []checks.Finding) {
	t.Helper()
	s, err := scenario.Build("shm-orphans")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	plan, findings := practicePlan(t, s.Host, "shm.cleanup", "shm.remount", "shm.persist", "systemd.removeipc", "limits.memlock")
	return s.Host, plan, findings
}

// exportPlan is the script of plan as exported for h.
func exportPlan(t *testing.T, h *host.Host, plan []Fix, findings []checks.Finding) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ExportScriptWith(&buf, h, plan, findings, ExportOptions{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A script exported from a scenario is marked, dry-runs as a practice
// script and refuses --apply before any action.
func TestPracticeScriptRefuses(t *testing.T) {
	h, plan, findings := shmOrphansPlan(t)
	b := exportPlan(t, h, plan, findings)
	script := string(b)
	shellcheck(t, script)
	checkScriptSafety(t, script)
	if strings.Contains(script, "bash THIS_SCRIPT --apply") {
		t.Error("a practice script tells how to apply it")
	}
	if !strings.Contains(script, PracticeMarker("shm-orphans")) || !strings.Contains(script, "NCCLWIZ_PRACTICE=shm-orphans\n") {
		t.Fatalf("no practice marker:\n%s", script)
	}
	path := filepath.Join(t.TempDir(), "f.sh")
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		cmd := exec.Command("bash", append([]string{path}, args...)...)
		cmd.Dir = t.TempDir()
		// The edited script stops at its first act, after fstab_set made its
		// temporary copy: keep that in the test's own directory.
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run()
	if code != 0 || !strings.Contains(out, "PRACTICE SCRIPT") || strings.Contains(out, "would run") {
		t.Errorf("dry run (exit %d):\n%s", code, out)
	}
	out, code = run("--apply")
	if code != 3 || !strings.Contains(out, "refusing --apply") || strings.Contains(out, "  + ") {
		t.Errorf("--apply (exit %d):\n%s", code, out)
	}
	// With the guard edited out, act still refuses (a second line only).
	edited := strings.Replace(script, "if [ -n \"$NCCLWIZ_PRACTICE\" ]; then\n  if [ \"$APPLY\" = 1 ]", "if false; then\n  if [ \"$APPLY\" = 1 ]", 1)
	if edited == script {
		t.Fatal("guard not found")
	}
	if err := os.WriteFile(path, []byte(edited), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code = run("--apply")
	if code != 3 || !strings.Contains(out, "refused, a practice script never acts") {
		t.Errorf("edited --apply (exit %d):\n%s", code, out)
	}
	// A real machine's script carries no marker.
	real := *h
	real.Simulated = false
	realScript := string(exportPlan(t, &real, plan, findings))
	if strings.Contains(realScript, "ncclwiz-practice-scenario") || !strings.Contains(realScript, "NCCLWIZ_PRACTICE=''\n") {
		t.Error("a real machine's script is marked as practice")
	}
}
