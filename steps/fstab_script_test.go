package steps

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptFstabSetLeavesNoTempWhenRenameFails reproduces issue 14 item 8:
// the exported script's fstab_set (and put_file) could not replace the
// file — here it is a bind mount, so rename(2) fails with EBUSY, in a
// private mount namespace — and left "<dir>/.fstab.ncclwiz.*" behind.
func TestScriptFstabSetLeavesNoTempWhenRenameFails(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private mount namespace (CI runs as root)")
	}
	for _, tool := range []string{"unshare", "mount", "bash", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	etc := filepath.Join(dir, "etc")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	const fstab = "UUID=abcd / ext4 errors=remount-ro 0 1\n"
	for _, p := range []string{filepath.Join(etc, "fstab"), filepath.Join(dir, "fstab.src"), filepath.Join(etc, "limits.conf"), filepath.Join(dir, "limits.src")} {
		if err := os.WriteFile(p, []byte(fstab), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := "set -euo pipefail\nNCCLWIZ_PRACTICE=''\n" + scriptPrelude + helperText["fstab_set"] + helperText["put_file"] +
		`fstab_set "$ETC/fstab" /dev/shm 1g rw,nosuid,nodev
put_file "$ETC/limits.conf" "new content" || true
echo "FAILED=$FAILED"
`
	sh := filepath.Join(dir, "fix.sh")
	if err := os.WriteFile(sh, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// Both targets become mount points: mv cannot rename over them.
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount --bind "$1/fstab.src" "$1/etc/fstab" && mount --bind "$1/limits.src" "$1/etc/limits.conf" && ETC="$1/etc" exec bash "$1/fix.sh" --apply`, "sh", dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "failed (exit") || !strings.Contains(string(out), "FAILED=2") {
		t.Fatalf("the renames did not fail as set up:\n%s", out)
	}
	left, err := filepath.Glob(filepath.Join(etc, ".*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("temporary files left behind: %v\n%s", left, out)
	}
	if b, _ := os.ReadFile(filepath.Join(etc, "fstab")); string(b) != fstab {
		t.Errorf("fstab changed: %q", b)
	}
}
