package ownedtmp

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const prefix = "ncclwiz-test-"

// A run directory is swept only when its owner is provably gone; live
// owners, unknown owners, other users' directories, other PID namespaces
// and symlinks are left alone.
func TestSweep(t *testing.T) {
	parent := t.TempDir()
	me, err := owner()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(me)
	start, _ := strconv.ParseUint(f[1], 10, 64)
	mk := func(name, owner string) string {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	dead := mk(prefix+"dead", strings.Join([]string{f[0], strconv.FormatUint(start+1, 10), f[2], f[3]}, " "))
	rebooted := mk(prefix+"rebooted", strings.Join([]string{f[0], f[1], f[2], "another-boot"}, " "))
	live := mk(prefix+"live", me)
	unknown := mk(prefix+"unknown", "")
	otherNS := mk(prefix+"otherns", strings.Join([]string{"1", "1", "pid:[1]", f[3]}, " "))
	other := mk("unrelated", strings.Join([]string{f[0], "1", f[2], f[3]}, " "))
	if err := os.Symlink(dead, filepath.Join(parent, prefix+"link")); err != nil {
		t.Fatal(err)
	}
	got := Sweep(parent, prefix)
	slices.Sort(got)
	if want := []string{dead, rebooted}; !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	for _, d := range []string{live, unknown, otherNS, other, filepath.Join(parent, prefix+"link")} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s should be left: %v", d, err)
		}
	}
	if os.Geteuid() == 0 {
		// Another user's directory, even with a dead owner, is not ours.
		d := mk(prefix+"nobody", strings.Join([]string{f[0], "1", f[2], f[3]}, " "))
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if got := Sweep(parent, prefix); len(got) != 0 {
			t.Errorf("removed %v", got)
		}
	}
}
