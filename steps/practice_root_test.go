package steps

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nsResult is what a script did inside a private mount namespace.
type nsResult struct {
	exit      string // the script's exit status
	shmBlocks string // statfs of the private /dev/shm after the run: "blocks bsize"
	out       string
}

// runInPrivateNamespace runs `bash script ARGS` as root in a new mount
// namespace where etcCopy is bound over /etc and a 1 MiB tmpfs over
// /dev/shm, the layout of issue 13 item 4 without risk to this machine.
// systemctl is a stub, should a script reach it.
func runInPrivateNamespace(t *testing.T, script, etcCopy string, args ...string) nsResult {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho \"systemctl $*\" >&2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	inner := `set -u
mount --make-rprivate / || exit 90
mount --bind "$ETC_COPY" /etc || exit 91
mount -t tmpfs -o size=1m ncclwiz-test-scen /dev/shm || exit 92
rc=0
bash "$SCRIPT" "$@" || rc=$?
echo "NSRESULT exit=$rc shm=$(stat -f -c '%b %S' /dev/shm)"
`
	cmd := exec.Command("unshare", append([]string{"-m", "--propagation", "private", "bash", "-c", inner, "inner"}, args...)...)
	cmd.Env = append(os.Environ(), "ETC_COPY="+etcCopy, "SCRIPT="+script, "PATH="+bin+":"+os.Getenv("PATH"))
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unshare: %v\n%s", err, out)
	}
	var r nsResult
	r.out = string(out)
	for _, l := range strings.Split(r.out, "\n") {
		if rest, ok := strings.CutPrefix(l, "NSRESULT "); ok {
			e, s, _ := strings.Cut(rest, " shm=")
			r.exit = strings.TrimPrefix(e, "exit=")
			r.shmBlocks = s
		}
	}
	if r.exit == "" {
		t.Fatalf("no result from the namespace:\n%s", out)
	}
	return r
}

// copyEtc copies the real /etc (a few MiB) with its modes and links.
func copyEtc(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "etc")
	if out, err := exec.Command("cp", "-a", "/etc", dst).CombinedOutput(); err != nil {
		// Unreadable special files do not matter to the test; the copy
		// must exist and hold fstab.
		t.Logf("cp -a /etc: %v %s", err, out)
	}
	if _, err := os.Stat(dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func needRootNamespaces(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private mount namespace (CI runs as root)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	if out, err := exec.Command("unshare", "-m", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot create a mount namespace here: %v %s", err, out)
	}
}

// Issue 13 item 4: `ncclwiz --scenario shm-orphans fix --export f.sh; bash
// f.sh --apply` remounted the real /dev/shm and rewrote the real
// /etc/fstab. Run that script with --apply as root in a private mount
// namespace (a copy of /etc bound over /etc, a 1 MiB tmpfs over /dev/shm):
// it must exit non-zero and change neither the /etc copy, nor the private
// tmpfs, nor the real /dev/shm. The same plan exported as a real machine's
// script does change both, so the harness sees a change when there is one.
func TestPracticeScriptInPrivateNamespace(t *testing.T) {
	needRootNamespaces(t)
	h, plan, findings := shmOrphansPlan(t)
	script := filepath.Join(t.TempDir(), "f.sh")
	if err := os.WriteFile(script, exportPlan(t, h, plan, findings), 0o755); err != nil {
		t.Fatal(err)
	}
	etc := copyEtc(t)
	names := scenarioShmNames(t)
	realBefore := realState(t, names)
	etcBefore := treeDigest(t, etc)

	r := runInPrivateNamespace(t, script, etc, "--apply")
	if r.exit == "0" {
		t.Errorf("the practice script exited 0 with --apply:\n%s", r.out)
	}
	if !strings.Contains(r.out, "refusing --apply") || strings.Contains(r.out, "  + ") {
		t.Errorf("output:\n%s", r.out)
	}
	if d := diffDigest(etcBefore, treeDigest(t, etc)); len(d) > 0 {
		t.Errorf("the /etc copy changed: %v\n%s", d, r.out)
	}
	if r.shmBlocks != "256 4096" {
		t.Errorf("the private /dev/shm was resized: %q (want 1 MiB = 256 4096)\n%s", r.shmBlocks, r.out)
	}
	if after := realState(t, names); after != realBefore {
		t.Errorf("the real machine changed:\n%s\n---\n%s", realBefore, after)
	}

	// Control: the same remount and fstab steps in a real machine's script.
	ctl, cf := practicePlan(t, h, "shm.remount", "shm.persist")
	realHost := *h
	realHost.Simulated = false
	if err := os.WriteFile(script, exportPlan(t, &realHost, ctl, cf), 0o755); err != nil {
		t.Fatal(err)
	}
	r = runInPrivateNamespace(t, script, etc, "--apply")
	if r.exit != "0" || r.shmBlocks == "256 4096" {
		t.Errorf("control: the real-machine script did not act (exit %s, shm %q):\n%s", r.exit, r.shmBlocks, r.out)
	}
	if d := diffDigest(etcBefore, treeDigest(t, etc)); len(d) == 0 {
		t.Errorf("control: the /etc copy did not change:\n%s", r.out)
	}
	if after := realState(t, names); after != realBefore {
		t.Errorf("control: the real machine changed:\n%s\n---\n%s", realBefore, after)
	}
}
