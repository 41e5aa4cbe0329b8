package fstab

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const base = "# /etc/fstab: static file system information.\nUUID=abcd /               ext4    errors=remount-ro 0       1\n/swapfile none swap sw 0 0\n"

var shmOpts = []string{"rw", "nosuid", "nodev"}

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fstab")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func backups(t *testing.T, p string) []string {
	m, err := filepath.Glob(p + ".ncclwiz-*.bak")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAppendThenIdempotentThenResize(t *testing.T) {
	p := write(t, base)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ch, err := Edit(p, "/dev/shm", "size", "64g", shmOpts, now)
	if err != nil || !ch.Changed || !ch.Added || ch.Backup == "" {
		t.Fatalf("first edit: %+v %v", ch, err)
	}
	got := read(t, p)
	if !strings.HasPrefix(got, base) || !strings.HasSuffix(got, "\ntmpfs /dev/shm tmpfs rw,nosuid,nodev,size=64g 0 0\n") {
		t.Errorf("content:\n%s", got)
	}
	if read(t, ch.Backup) != base {
		t.Error("backup differs from the original")
	}
	if _, err := Parse([]byte(got)); err != nil {
		t.Errorf("result does not parse: %v", err)
	}

	// Again: nothing changes, no second backup, the file is not rewritten.
	fi1, _ := os.Stat(p)
	ch, err = Edit(p, "/dev/shm", "size", "64g", shmOpts, now.Add(time.Minute))
	if err != nil || ch.Changed || ch.Backup != "" {
		t.Errorf("second edit: %+v %v", ch, err)
	}
	fi2, _ := os.Stat(p)
	if read(t, p) != got || fi1.Sys().(*syscall.Stat_t).Ino != fi2.Sys().(*syscall.Stat_t).Ino {
		t.Error("idempotent edit rewrote the file")
	}
	if n := len(backups(t, p)); n != 1 {
		t.Errorf("%d backups, want 1", n)
	}

	// Another size replaces the option in place.
	ch, err = Edit(p, "/dev/shm", "size", "128g", shmOpts, now.Add(2*time.Minute))
	if err != nil || !ch.Changed || ch.Added {
		t.Fatalf("resize: %+v %v", ch, err)
	}
	got = read(t, p)
	if strings.Count(got, "/dev/shm") != 1 || !strings.Contains(got, "size=128g") || strings.Contains(got, "size=64g") {
		t.Errorf("resize:\n%s", got)
	}
}

func TestExistingEntryKeepsEverythingElse(t *testing.T) {
	in := base + "tmpfs\t/dev/shm/   tmpfs\trw,nosuid,nodev,size=8g,mode=1777\t0 0\n# trailing comment\n"
	out, ch, err := SetOption([]byte(in), "/dev/shm", "size", "32g", shmOpts)
	if err != nil || !ch.Changed {
		t.Fatal(err)
	}
	want := strings.Replace(in, "size=8g", "size=32g", 1)
	if string(out) != want {
		t.Errorf("got:\n%q\nwant:\n%q", out, want)
	}
	if ch.OldLine == "" || !strings.Contains(ch.NewLine, "size=32g") {
		t.Errorf("change %+v", ch)
	}
	// "defaults" alone gets the option appended.
	out, _, err = SetOption([]byte("none /dev/shm tmpfs defaults 0 0"), "/dev/shm", "size", "1g", nil)
	if err != nil || string(out) != "none /dev/shm tmpfs defaults,size=1g 0 0" {
		t.Errorf("defaults: %q %v", out, err)
	}
	// A file without a final newline gets one before the new entry.
	out, _, _ = SetOption([]byte("UUID=x / ext4 defaults 0 1"), "/dev/shm", "size", "1g", shmOpts)
	if !strings.HasPrefix(string(out), "UUID=x / ext4 defaults 0 1\n# added by ncclwiz") {
		t.Errorf("no newline: %q", out)
	}
}

func TestRefusesWhatItCannotParse(t *testing.T) {
	for _, in := range []string{
		base + "this line is broken\n",
		base + "tmpfs /dev/shm tmpfs defaults 0 0 extra junk\n",
		base + "tmpfs /dev/shm tmpfs size=1g 0 0\ntmpfs /dev/shm tmpfs size=2g 0 0\n",
		base + "tmpfs relative/path tmpfs defaults 0 0\n",
		base + "tmpfs /mnt tmpfs defaults zero 0\n",
		base + "/dev/sdb1 /dev/shm ext4 defaults 0 2\n", // not tmpfs
		base + "bin\x00ary /x ext4 defaults 0 0\n",
	} {
		p := write(t, in)
		if _, err := Edit(p, "/dev/shm", "size", "1g", shmOpts, time.Now()); err == nil {
			t.Errorf("edited:\n%q", in)
		}
		if read(t, p) != in {
			t.Error("a refused edit changed the file")
		}
		if len(backups(t, p)) != 0 {
			t.Error("a refused edit left a backup")
		}
	}
}

func TestSymlinkIsRefusedAndModeKept(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real-fstab")
	if err := os.WriteFile(target, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "fstab")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Edit(link, "/dev/shm", "size", "1g", shmOpts, time.Now()); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("symlink edited: %v", err)
	}
	if read(t, target) != base {
		t.Error("symlink target changed")
	}
	ch, err := Edit(target, "/dev/shm", "size", "1g", shmOpts, time.Now())
	if err != nil || !ch.Changed {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	// A missing file is created, with nothing to back up.
	fresh := filepath.Join(dir, "new-fstab")
	if ch, err := Edit(fresh, "/dev/shm", "size", "1g", shmOpts, time.Now()); err != nil || !ch.Changed || ch.Backup != "" {
		t.Errorf("missing file: %+v %v", ch, err)
	}
	if !errors.Is(func() error { _, err := Parse([]byte("x y\n")); return err }(), ErrMalformed) {
		t.Error("Parse error is not ErrMalformed")
	}
}

func TestEscapedMountPoint(t *testing.T) {
	in := `tmpfs /mnt/my\040shm tmpfs size=1g 0 0` + "\n"
	out, ch, err := SetOption([]byte(in), "/mnt/my shm", "size", "2g", nil)
	if err != nil || !ch.Changed || string(out) != `tmpfs /mnt/my\040shm tmpfs size=2g 0 0`+"\n" {
		t.Errorf("%q %+v %v", out, ch, err)
	}
}

// FuzzSetOption: whatever the file holds, SetOption never panics; when it
// edits, the result parses, says what was asked, keeps every other line,
// and a second edit changes nothing.
func FuzzSetOption(f *testing.F) {
	f.Add(base, "1g")
	f.Add(base+"tmpfs /dev/shm tmpfs rw,nosuid,size=8g 0 0\n", "32g")
	f.Add("none\t/dev/shm/\ttmpfs\tdefaults\n", "512m")
	f.Add("a b c d e f g\n", "1g")
	f.Fuzz(func(t *testing.T, content, size string) {
		if strings.ContainsAny(size, " \t\n,#") || size == "" {
			return
		}
		out, ch, err := SetOption([]byte(content), "/dev/shm", "size", size, shmOpts)
		if err != nil {
			return
		}
		if _, err := Parse(out); err != nil {
			t.Fatalf("result does not parse: %v\n%q", err, out)
		}
		again, ch2, err := SetOption(out, "/dev/shm", "size", size, shmOpts)
		if err != nil || ch2.Changed || string(again) != string(out) {
			t.Fatalf("not idempotent: %v %+v\n%q\n%q", err, ch2, out, again)
		}
		if !ch.Changed && string(out) != content {
			t.Fatal("unchanged but different")
		}
		// Every line of the original survives, except the one entry edited.
		kept := strings.Split(string(out), "\n")
		missing := 0
		for _, l := range strings.Split(content, "\n") {
			found := false
			for _, k := range kept {
				if k == l {
					found = true
					break
				}
			}
			if !found {
				missing++
			}
		}
		if missing > 1 || (missing == 1 && ch.Added) {
			t.Fatalf("%d original lines lost (added=%v):\n%q\n%q", missing, ch.Added, content, out)
		}
	})
}
