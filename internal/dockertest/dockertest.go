// Package dockertest runs real Docker containers in tests without a
// registry: static (CGO_ENABLED=0, -tags nonvml) binaries built from this module (by
// internal/gobin, once per test binary) are laid out in a directory, `docker import`ed as a uniquely tagged image, and run;
// images and containers are removed when the test ends.
package dockertest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/gobin"
)

// Require skips t, with the reason, unless it runs as root with the docker
// CLI and a Docker Engine that answers (CI has all three).
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for Docker (CI runs as root)")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker is not installed")
	}
	if out, err := Docker("info", "--format", "{{.ServerVersion}}"); err != nil {
		t.Skipf("no Docker Engine: %v %s", err, firstLine(out))
	}
}

// Docker runs the docker CLI and returns its combined, trimmed output; a
// non-zero exit is an *exec.ExitError.
func Docker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// AddStatic puts pkg (relative to the module root, e.g. "." or
// "./hang/internal/fakejob"), built once per test binary with
// CGO_ENABLED=0 so that it runs in an image holding nothing else, into root
// as name.
func AddStatic(t testing.TB, root, name, pkg string) {
	t.Helper()
	Copy(t, root, name, gobin.Build(t, pkg, true))
}

// Rootfs returns a new directory for an image's files holding the given
// (empty) directories; a "tmp" is 1777 (sticky, os.ModeSticky: a 0o1000
// bit is ignored by os.Chmod), as a real /tmp.
func Rootfs(t testing.TB, dirs ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range dirs {
		p := filepath.Join(root, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatalf("image dir %s: %v", d, err)
		}
		if d == "tmp" {
			if err := os.Chmod(p, os.ModeSticky|0o777); err != nil {
				t.Fatalf("image dir %s: %v", d, err)
			}
		}
	}
	return root
}

// Copy copies the file src to name (relative to root) as an executable.
func Copy(t testing.TB, root, name, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("image file %s: %v", name, err)
	}
	Write(t, root, name, b, 0o755)
}

// Write writes data to name (relative to root), making its directory.
func Write(t testing.TB, root, name string, data []byte, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatalf("image file %s: %v", name, err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatalf("image file %s: %v", name, err)
	}
}

// Import imports root as the image ncclwiz-test-<area>:<random> (no
// registry) and removes it when the test ends.
func Import(t testing.TB, area, root string) string {
	t.Helper()
	image := "ncclwiz-test-" + area + ":" + Unique(t)
	tarc := exec.Command("tar", "-C", root, "-c", ".")
	imp := exec.Command("docker", "import", "-", image)
	pipe, err := tarc.StdoutPipe()
	if err != nil {
		t.Fatalf("tar: %v", err)
	}
	imp.Stdin = pipe
	if err := tarc.Start(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	out, err := imp.CombinedOutput()
	if werr := tarc.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("tar: %w", werr)
	}
	if err != nil {
		t.Fatalf("docker import: %v %s", err, out)
	}
	t.Cleanup(func() { _, _ = Docker("rmi", "-f", image) })
	return image
}

// Name returns a container name unique to this run:
// ncclwiz-test-<area>-<what>-<random>.
func Name(t testing.TB, area, what string) string {
	t.Helper()
	return "ncclwiz-test-" + area + "-" + what + "-" + Unique(t)
}

// Unique returns 8 random hex digits, so parallel runs never share a name.
func Unique(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random name: %v", err)
	}
	return hex.EncodeToString(b)
}

// Start runs `docker run -d --name name args...` and removes the container
// when the test ends (also when it was created but failed to start).
func Start(t testing.TB, name string, args ...string) {
	t.Helper()
	t.Cleanup(func() { remove(name) })
	argv := append([]string{"run", "-d", "--name", name}, args...)
	if out, err := Docker(argv...); err != nil {
		t.Fatalf("docker %v: %v %s", argv, err, out)
	}
}

// remove removes a container and waits until it is gone: `docker rm -f` of
// a container that joined another's IPC namespace can fail while that one
// is being torn down, and left such containers behind (Exited 255).
func remove(name string) {
	for range 20 {
		_, _ = Docker("rm", "-f", name)
		if _, err := Docker("inspect", "--format", "{{.Id}}", name); err != nil {
			return // no such container
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Run runs `docker run --rm --name name args...` in the foreground and
// returns its combined output and exit code; the container is removed when
// the test ends even if --rm did not get to.
func Run(t testing.TB, name string, args ...string) (string, int) {
	t.Helper()
	t.Cleanup(func() { remove(name) })
	out, err := Docker(append([]string{"run", "--rm", "--name", name}, args...)...)
	return out, exitCode(t, err, out)
}

// Exec runs `docker exec args...` and returns its standard output alone
// (so that JSON is not mixed with warnings) and the exit code.
func Exec(t testing.TB, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("docker", append([]string{"exec"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	return string(out), exitCode(t, err, stderr.String())
}

// PID returns the host PID of a running container's PID 1.
func PID(t testing.TB, name string) string {
	t.Helper()
	pid, err := Docker("inspect", "-f", "{{.State.Pid}}", name)
	if err != nil {
		t.Fatalf("docker inspect %s: %v %s", name, err, pid)
	}
	return pid
}

// exitCode is 0, or the exit code of a command that ran; failing to run
// at all fails the test.
func exitCode(t testing.TB, err error, out string) int {
	t.Helper()
	if err == nil {
		return 0
	}
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return ee.ExitCode()
	}
	t.Fatalf("docker: %v\n%s", err, out)
	return -1
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }
