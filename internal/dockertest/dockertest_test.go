package dockertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRootfs(t *testing.T) {
	root := Rootfs(t, "tmp", "dev/shm")
	for d, want := range map[string]os.FileMode{"tmp": os.ModeDir | os.ModeSticky | 0o777, "dev/shm": os.ModeDir | 0o755} {
		fi, err := os.Stat(filepath.Join(root, d))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want %v", d, fi.Mode(), err, want)
		}
	}
	Write(t, root, "etc/x.conf", []byte("a"), 0o644)
	if b, err := os.ReadFile(filepath.Join(root, "etc/x.conf")); err != nil || string(b) != "a" {
		t.Errorf("etc/x.conf: %q %v", b, err)
	}
	if a, b := Unique(t), Unique(t); a == b || len(a) != 8 {
		t.Errorf("Unique: %q %q", a, b)
	}
}

// TestImportRunExec builds a static binary into an image, runs it in the
// foreground and detached, and checks that the container and image are
// gone after cleanup.
func TestImportRunExec(t *testing.T) {
	Require(t)
	var image, name string
	t.Run("roundtrip", func(t *testing.T) {
		root := Rootfs(t, "tmp")
		AddStatic(t, root, "sleeper", "./internal/dockertest/testdata/sleeper")
		image = Import(t, "dockertest", root)
		if out, code := Run(t, Name(t, "dockertest", "fg"), image, "/sleeper", "exit", "3"); code != 3 || !strings.Contains(out, "exit 3") {
			t.Errorf("foreground run: exit %d %q", code, out)
		}
		name = Name(t, "dockertest", "bg")
		Start(t, name, "--network", "none", image, "/sleeper", "wait")
		if out, code := Exec(t, name, "/sleeper", "exit", "0"); code != 0 || !strings.Contains(out, "exit 0") {
			t.Errorf("exec: exit %d %q", code, out)
		}
		if pid := PID(t, name); pid == "" || pid == "0" {
			t.Errorf("PID %q", pid)
		}
	})
	if out, err := Docker("inspect", name); err == nil {
		t.Errorf("container %s left after the test: %s", name, out)
	}
	if out, err := Docker("image", "inspect", image); err == nil {
		t.Errorf("image %s left after the test: %s", image, out)
	}
}
