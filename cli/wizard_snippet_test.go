package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// The wizard's env snippet lands in the user's cache directory, readable
// by them alone, replaced (not appended) on the next copy.
func TestSaveEnvSnippet(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	for _, snip := range []string{"export NCCL_DEBUG=INFO\n", "export NCCL_SOCKET_IFNAME=eth0\n"} {
		path, err := saveEnvSnippet(snip)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(cache, "ncclwiz", "env-snippet.sh"); path != want {
			t.Errorf("saved to %s, want %s", path, want)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != snip {
			t.Errorf("file holds %q (%v), want %q", got, err, snip)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
		}
	}
	// A symlink in its place is refused, not followed.
	path := filepath.Join(cache, "ncclwiz", "env-snippet.sh")
	os.Remove(path)
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := saveEnvSnippet("x\n"); err == nil {
		t.Error("a symlink at the snippet's path was written through")
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("the symlink's target was created")
	}
}
