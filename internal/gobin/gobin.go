// Package gobin builds this module's commands for tests, once per test
// binary: the result is kept next to the running test binary, in the work
// directory `go test` removes when it ends, so that the many tests that
// run ncclwiz share one build instead of linking it again each.
package gobin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// ModuleRoot is the directory of go.mod, found from this file's path so
// that it does not depend on the test's working directory.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// Ncclwiz returns the ncclwiz command built from the module root with
// CGO_ENABLED=0 as a release is; static builds add -tags nonvml (they run
// in images holding nothing else, so they cannot dlopen NVML), the others
// load NVML by dlopen as a release does.
func Ncclwiz(t testing.TB, static bool) string { return Build(t, ".", static) }

// Build returns pkg (relative to the module root, e.g. "./hang/internal/
// fakejob") built once for this test binary. The file is shared: copy it
// before changing it.
func Build(t testing.TB, pkg string, static bool) string {
	t.Helper()
	// The file has the package's own name (so its comm, seen by the
	// checks, is the command's), in a directory of its own per package.
	key := strings.Trim(strings.NewReplacer("/", "_", ".", "_").Replace(pkg), "_")
	base := filepath.Base(pkg)
	if key == "" {
		key, base = "ncclwiz", "ncclwiz"
	}
	if static {
		key += "-static"
	}
	dir := cacheDir(t)
	final := filepath.Join(dir, fmt.Sprintf("gobin-%d-%s", os.Getpid(), key))
	bin := filepath.Join(final, base)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	// Built under a temporary name and renamed: a parallel test never sees
	// a half-written file, and two that race both end with a whole one.
	tmp, err := os.MkdirTemp(dir, ".gobin-*")
	if err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	defer os.RemoveAll(tmp)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is needed to build " + pkg)
	}
	out := filepath.Join(tmp, base)
	// testhooks adds the hidden flags end-to-end tests need (--clock-ahead)
	// and a release leaves out.
	args := []string{"build", "-o", out, "-tags", "testhooks"}
	if static {
		args[len(args)-1] = "testhooks,nonvml"
	}
	cmd := exec.Command(goBin, append(args, pkg)...)
	cmd.Dir = ModuleRoot()
	// CGO_ENABLED=0 as the release builds: the tests run the same runtime
	// (purego's fakecgo when NVML is linked) that users get.
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	if err := os.MkdirAll(final, 0o755); err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	if err := os.Rename(out, bin); err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	return bin
}

// cacheDir is the test binary's directory when writable (go test's work
// directory, removed after the run), else a directory of this test alone.
func cacheDir(t testing.TB) string {
	t.Helper()
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if f, err := os.CreateTemp(dir, ".gobin-probe-*"); err == nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
			return dir
		}
	}
	return t.TempDir()
}

// Reachable returns a copy of bin in a fresh 0755 directory outside the
// test binary's private work directory, so that another user (a test run
// as nobody) can execute it; it is removed when the test ends.
func Reachable(t testing.TB, bin string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ncclwiz-gobin-")
	if err != nil {
		t.Fatalf("copy of %s: %v", bin, err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	data, err := os.ReadFile(bin)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatalf("copy of %s: %v", bin, err)
	}
	out := filepath.Join(dir, filepath.Base(bin))
	if err := os.WriteFile(out, data, 0o755); err != nil {
		t.Fatalf("copy of %s: %v", bin, err)
	}
	return out
}
