package fstab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const base = "# /etc/fstab\nUUID=abcd / ext4 errors=remount-ro 0 1\n/swapfile none swap sw 0 0\n"

func TestEditAppendsThenIsIdempotent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fstab")
	if err := os.WriteFile(p, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	r, err := Edit(p, "/dev/shm", "size", "64g", now)
	if err != nil || !r.Changed || r.Backup == "" {
		t.Fatalf("first edit: %+v %v", r, err)
	}
	b, _ := os.ReadFile(p)
	if !strings.HasPrefix(string(b), base) || !strings.Contains(string(b), "tmpfs\t/dev/shm\ttmpfs\tdefaults,size=64g\t0\t0\n") {
		t.Errorf("content:\n%s", b)
	}
	bak, _ := os.ReadFile(r.Backup)
	if string(bak) != base {
		t.Errorf("backup differs")
	}
	r, err = Edit(p, "/dev/shm", "size", "64g", now.Add(time.Minute))
	if err != nil || r.Changed || r.Backup != "" {
		t.Errorf("second edit changed something: %+v %v", r, err)
	}
	b2, _ := os.ReadFile(p)
	if string(b2) != string(b) {
		t.Error("idempotent edit rewrote the file")
	}
	// Changing the size replaces the option in place.
	if r, err = Edit(p, "/dev/shm", "size", "128g", now.Add(2*time.Minute)); err != nil || !r.Changed {
		t.Fatalf("resize: %v", err)
	}
	b3, _ := os.ReadFile(p)
	if strings.Count(string(b3), "/dev/shm") != 1 || !strings.Contains(string(b3), "size=128g") || strings.Contains(string(b3), "size=64g") {
		t.Errorf("resize:\n%s", b3)
	}
}

func TestEditExistingEntryKeepsOptions(t *testing.T) {
	in := base + "tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=8g 0 0\n"
	out, changed, err := SetOption([]byte(in), "/dev/shm", "size", "32g")
	if err != nil || !changed {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "rw,nosuid,nodev,size=32g") || !strings.HasPrefix(string(out), base) {
		t.Errorf("got:\n%s", out)
	}
}

func TestRefusesMalformed(t *testing.T) {
	for _, in := range []string{
		base + "this line is broken\n",
		base + "tmpfs /dev/shm tmpfs defaults 0 0 extra junk\n",
		base + "tmpfs /dev/shm tmpfs size=1g 0 0\ntmpfs /dev/shm tmpfs size=2g 0 0\n",
	} {
		p := filepath.Join(t.TempDir(), "fstab")
		_ = os.WriteFile(p, []byte(in), 0o644)
		if _, err := Edit(p, "/dev/shm", "size", "1g", time.Now()); err == nil {
			t.Errorf("malformed fstab edited:\n%s", in)
		}
		after, _ := os.ReadFile(p)
		if string(after) != in {
			t.Error("a refused edit changed the file")
		}
		if m, _ := filepath.Glob(p + ".ncclwiz-*"); len(m) != 0 {
			t.Error("a refused edit left a backup")
		}
	}
}
