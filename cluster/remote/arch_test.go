package remote

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// runProbe runs the real probe script with sh, with uname and getconf
// answering as the planted node would.
func runProbe(t *testing.T, machine, libcLine string) probe {
	t.Helper()
	shim := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(shim, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("uname", "echo "+machine+"\n")
	if libcLine == "" {
		write("getconf", "exit 1\n")
		write("ldd", "echo 'musl libc (aarch64)' >&2; exit 1\n")
	} else {
		write("getconf", "echo '"+libcLine+"'\n")
	}
	cmd := exec.Command("sh", "-c", probeScript("/nonexistent/ncclwiz"))
	cmd.Env = append(os.Environ(), "PATH="+shim+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	return parseProbe(out)
}

func TestProbeArchAndLibc(t *testing.T) {
	p := runProbe(t, "aarch64", "glibc 2.35")
	if p.machine != "aarch64" || p.glibcVersion() != "2.35" || p.present {
		t.Fatalf("%+v (glibc %q)", p, p.glibcVersion())
	}
	if p := runProbe(t, "x86_64", ""); !strings.Contains(p.libc, "musl") || p.glibcVersion() != "" {
		t.Fatalf("musl node: %+v", p)
	}
	for in, want := range map[string]string{"ldd (Ubuntu GLIBC 2.31-0ubuntu9.16) 2.31": "2.31", "glibc 2.17": "2.17", "ldd (GNU libc) 2.28": "2.28", "": ""} {
		if got := (probe{libc: in}).glibcVersion(); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// tinyBuild compiles a minimal static Go program for arch: choosing a
// build reads only its ELF header, checksum and glibc needs.
func tinyBuild(t *testing.T, arch string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ncclwiz-"+arch)
	build := exec.Command("go", "build", "-o", out, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return out
}

// TestChooseBuild: a mixed cluster (this machine's build, a Grace node)
// gets the matching build or a message saying what to install, never a
// binary that exits 126 there.
func TestChooseBuild(t *testing.T) {
	self := tinyBuild(t, runtime.GOARCH)
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	only, err := loadBinaries(Options{LocalBinary: self})
	if err != nil {
		t.Fatal(err)
	}
	otherMachine := map[string]string{"arm64": "aarch64", "amd64": "x86_64"}[other]
	_, reason, msg := choose(only, runProbe(t, otherMachine, "glibc 2.35"))
	if reason != "arch" || !strings.Contains(msg, "--binary "+other+"=PATH") || !strings.Contains(msg, "install.sh") {
		t.Fatalf("node of another architecture: %q %q", reason, msg)
	}
	b, reason, _ := choose(only, runProbe(t, map[string]string{"arm64": "aarch64", "amd64": "x86_64"}[runtime.GOARCH], "glibc 2.17"))
	if reason != "" || b.path != self {
		t.Fatalf("node of this architecture: %q %+v", reason, b)
	}
	if _, reason, msg := choose(only, runProbe(t, map[string]string{"arm64": "aarch64", "amd64": "x86_64"}[runtime.GOARCH], "")); reason != "libc" || !strings.Contains(msg, "musl") {
		t.Fatalf("musl node: %q %q", reason, msg)
	}

	// With a build for the other architecture.
	cross := tinyBuild(t, other)
	both, err := loadBinaries(Options{LocalBinary: self, Binaries: map[string]string{other: cross}})
	if err != nil {
		t.Fatal(err)
	}
	if b, reason, _ := choose(both, runProbe(t, otherMachine, "glibc 2.35")); reason != "" || b.path != cross || b.arch != other {
		t.Fatalf("with --binary %s: %q %+v", other, reason, b)
	}
	// A --binary that is not built for the architecture it is given for.
	if _, err := loadBinaries(Options{LocalBinary: self, Binaries: map[string]string{other: self}}); err == nil || !strings.Contains(err.Error(), "that file is built for") {
		t.Fatalf("mislabelled --binary accepted: %v", err)
	}
}

// TestChooseGlibc: a cgo build that needs a newer glibc than the node has
// is not sent; the message names the release build.
func TestChooseGlibc(t *testing.T) {
	bins := map[string]binInfo{runtime.GOARCH: {arch: runtime.GOARCH, path: "/x/ncclwiz", glibc: "2.34"}}
	m := map[string]string{"arm64": "aarch64", "amd64": "x86_64"}[runtime.GOARCH]
	if _, reason, msg := choose(bins, probe{machine: m, libc: "glibc 2.28"}); reason != "libc" || !strings.Contains(msg, "needs glibc 2.34") {
		t.Fatalf("%q %q", reason, msg)
	}
	if _, reason, _ := choose(bins, probe{machine: m, libc: "glibc 2.35"}); reason != "" {
		t.Fatalf("a new enough glibc was refused: %q", reason)
	}
}
