// Package nvmltest builds a stand-in libnvidia-ml.so.1 (testdata/fakenvml.c, compiled
// against the nvml.h that go-nvml ships) so the NVML binding and the whole
// binary can be tried on machines without a GPU, natively and for arm64
// under qemu.
package nvmltest

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

//go:embed testdata/fakenvml.c
var source []byte

// Header returns the directory of go-nvml's nvml.h, or "" when the module
// is not in the module cache.
func Header(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml").Output()
	if err != nil {
		return ""
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "pkg", "nvml")
	if _, err := os.Stat(filepath.Join(dir, "nvml.h")); err != nil {
		return ""
	}
	return dir
}

// Build compiles the fake library with cc ("gcc", "aarch64-linux-gnu-gcc")
// into a new directory and returns that directory; the file in it is named
// libnvidia-ml.so.1, so LD_LIBRARY_PATH=dir makes dlopen find it. The test
// is skipped when cc or the header is missing.
func Build(t testing.TB, cc string) string {
	t.Helper()
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("%s not installed (.ci/run installs it)", cc)
	}
	hdr := Header(t)
	if hdr == "" {
		t.Skip("go-nvml's nvml.h is not in the module cache (go mod download)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "fakenvml.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-I", hdr, "-o", filepath.Join(dir, "libnvidia-ml.so.1"), src)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	return dir
}
