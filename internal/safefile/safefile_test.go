package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, p string)
		wantErr error
	}{
		{"missing", func(*testing.T, string) {}, nil},
		{"regular file", func(t *testing.T, p string) { must(t, os.WriteFile(p, []byte("old"), 0o666)) }, nil},
		{"symlink to a file", func(t *testing.T, p string) {
			must(t, os.WriteFile(p+".target", []byte("old"), 0o644))
			must(t, os.Symlink(p+".target", p))
		}, ErrSymlink},
		{"dangling symlink", func(t *testing.T, p string) { must(t, os.Symlink("/nonexistent/x", p)) }, ErrSymlink},
		{"directory", func(t *testing.T, p string) { must(t, os.Mkdir(p, 0o755)) }, ErrNotRegular},
		{"fifo", func(t *testing.T, p string) { must(t, syscall.Mkfifo(p, 0o644)) }, ErrNotRegular},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "out")
			tt.setup(t, p)
			err := Write(p, []byte("new"), 0o600)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Write: %v, want %v", err, tt.wantErr)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".out.ncclwiz-*")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
			if tt.wantErr != nil {
				return
			}
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Fatalf("result: %v %v", fi, err)
			}
			if b, _ := os.ReadFile(p); string(b) != "new" {
				t.Errorf("content %q", b)
			}
		})
	}
}

// A directory it cannot create files in: a clear error naming the path
// the user gave, and nothing left behind.
func TestWriteUnwritableDirectory(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing-dir", "out")
	err := Write(p, []byte("x"), 0o644)
	if err == nil || !errors.Is(err, os.ErrNotExist) || err.Error() != "write "+p+": no such file or directory" {
		t.Errorf("err = %v", err)
	}
}

func TestWriteHonoursUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "out")
	must(t, Write(p, []byte("x"), 0o644))
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v under umask 077, want 0600", fi.Mode().Perm())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Replacing a system file (/etc/fstab, a systemd drop-in) keeps the mode
// it had whatever the umask, and as root its owner.
func TestWriteWithExactPermAndOwner(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "fstab")
	must(t, WriteWith(p, []byte("x"), Options{Perm: 0o644, ExactPerm: true}))
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v with ExactPerm under umask 077, want 0644", fi.Mode().Perm())
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the chown case is not run")
		return
	}
	must(t, WriteWith(p, []byte("y"), Options{Perm: 0o640, ExactPerm: true, Chown: true, UID: 4242, GID: 4343}))
	fi, err := os.Stat(p)
	must(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 4242 || st.Gid != 4343 || fi.Mode().Perm() != 0o640 {
		t.Errorf("owner %d:%d mode %v, want 4242:4343 0640", st.Uid, st.Gid, fi.Mode().Perm())
	}
}

// Issue 25 item 7: an output file the user did not say to replace is never
// replaced — a file already there, a symlink there, or one that appears
// between the check and the rename — and no temporary file is left.
func TestWriteNoReplace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "fix.sh")
	if err := os.WriteFile(p, []byte("# my own important script\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteWith(p, []byte("new"), Options{Perm: 0o755, NoReplace: true})
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("err = %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "# my own important script\n" {
		t.Fatalf("replaced: %q", b)
	}
	if err := os.Symlink(filepath.Join(dir, "victim"), filepath.Join(dir, "link.sh")); err != nil {
		t.Fatal(err)
	}
	if err := WriteWith(filepath.Join(dir, "link.sh"), []byte("new"), Options{Perm: 0o755, NoReplace: true}); !errors.Is(err, ErrSymlink) {
		t.Fatalf("symlink: %v", err)
	}
	// A file that appears after the check: placeNew refuses it too.
	tmp := filepath.Join(dir, "tmp")
	if err := os.WriteFile(tmp, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := placeNew(tmp, p); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("placeNew over a file: %v", err)
	}
	if err := WriteWith(filepath.Join(dir, "new.sh"), []byte("new"), Options{Perm: 0o755, NoReplace: true}); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".ncclwiz-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
