package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ncclwiz/ncclwiz/internal/dotted"
	"github.com/ncclwiz/ncclwiz/internal/glibc"
	"github.com/ncclwiz/ncclwiz/internal/gobin"
	"github.com/ncclwiz/ncclwiz/internal/nvml/nvmltest"
)

var (
	binMu   sync.Mutex
	bins    = map[string]string{}
	workDir string
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "ncclwiz-ship-release-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	workDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// dist is scripts/release.sh's output (NCCLWIZ_DIST), or "".
func dist() string { return os.Getenv("NCCLWIZ_DIST") }

func needDist(t *testing.T) string {
	t.Helper()
	d := dist()
	if d == "" {
		t.Skip("needs the release artifacts: NCCLWIZ_DIST=dist after scripts/release.sh (.ci/run does both)")
	}
	return d
}

// binary returns the release binary for arch: from the tarball in
// NCCLWIZ_DIST, else built here the way scripts/release.sh builds it.
func binary(t *testing.T, arch string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if b, ok := bins[arch]; ok {
		return b
	}
	out := filepath.Join(workDir, arch, "ncclwiz")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if d := dist(); d != "" {
		extract(t, filepath.Join(d, "ncclwiz_linux_"+arch+".tar.gz"), "ncclwiz_linux_"+arch+"/ncclwiz", out)
	} else {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=0.0.0-test", "-o", out, ".")
		cmd.Dir = gobin.ModuleRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build linux/%s: %v\n%s", arch, err, b)
		}
	}
	bins[arch] = out
	return out
}

func extract(t *testing.T, tarball, member, out string) {
	t.Helper()
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s has no %s", tarball, member)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != member {
			continue
		}
		w, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		w.Close()
		return
	}
}

// arm64Sysroot is where Debian's libc6-arm64-cross puts the aarch64 glibc.
const arm64Sysroot = "/usr/aarch64-linux-gnu"

func qemu(t *testing.T) string {
	t.Helper()
	q, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		t.Skip("qemu-user-static not installed (.ci/run installs it)")
	}
	if _, err := os.Stat(filepath.Join(arm64Sysroot, "lib", "ld-linux-aarch64.so.1")); err != nil {
		t.Skip("no aarch64 glibc in " + arm64Sysroot + " (libc6-arm64-cross; .ci/run installs it)")
	}
	return q
}

// run starts bin (under qemu for arm64) with args and extra environment.
func run(t *testing.T, arch, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	var cmd *exec.Cmd
	if arch == "arm64" && runtime.GOARCH != "arm64" {
		cmd = exec.Command(qemu(t), append([]string{"-L", arm64Sysroot, bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "TERM=dumb")
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return string(out), code
}

// TestGlibcNeeds reads the binaries' dynamic symbol references: the
// highest GLIBC version they ask for must not pass GlibcTarget, they may
// need only libc, libdl and libpthread, and each symbol must be one glibc
// defines at a version no newer than the target (so it existed in 2.17).
func TestGlibcNeeds(t *testing.T) {
	libDirs := map[string]string{"amd64": "/lib/x86_64-linux-gnu", "arm64": arm64Sysroot + "/lib"}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			needs, libs, err := glibc.Needs(binary(t, arch))
			if err != nil {
				t.Fatal(err)
			}
			hi := glibc.HighestGlibc(needs)
			t.Logf("linux/%s needs %d symbols from %v; highest GLIBC version asked for: %q", arch, len(needs), libs, hi)
			if hi != "" && dotted.Compare(hi, GlibcTarget) > 0 {
				t.Errorf("the binary asks for GLIBC_%s, above the %s target", hi, GlibcTarget)
			}
			allowed := map[string]bool{"libc.so.6": true, "libdl.so.2": true, "libpthread.so.0": true}
			for _, l := range libs {
				if !allowed[l] {
					t.Errorf("needs %s, which an old or minimal glibc system may lack", l)
				}
			}
			defs := map[string]string{}
			for _, l := range []string{"libc.so.6", "libdl.so.2", "libpthread.so.0"} {
				m, err := glibc.OldestDefinition(filepath.Join(libDirs[arch], l))
				if err != nil {
					t.Skipf("cannot read this machine's %s glibc: %v", arch, err)
				}
				for k, v := range m {
					if old, ok := defs[k]; !ok || dotted.Compare(v, old) < 0 {
						defs[k] = v
					}
				}
			}
			for _, n := range needs {
				v, ok := defs[n.Symbol]
				switch {
				case !ok:
					t.Errorf("%s is not a glibc symbol", n.Symbol)
				case dotted.Compare(v, GlibcTarget) > 0:
					t.Errorf("%s first appears in GLIBC_%s, after %s", n.Symbol, v, GlibcTarget)
				}
			}
		})
	}
}

// TestGlibcCheckCanFail: the same reading of a binary linked against this
// machine's glibc (a C program from Debian 12) finds a version above 2.17.
func TestGlibcCheckCanFail(t *testing.T) {
	needs, _, err := glibc.Needs("/bin/ls")
	if err != nil {
		t.Skip(err)
	}
	if hi := glibc.HighestGlibc(needs); hi == "" || dotted.Compare(hi, GlibcTarget) <= 0 {
		t.Fatalf("/bin/ls: highest GLIBC %q, expected one above %s on a glibc 2.34+ build machine", hi, GlibcTarget)
	}
}

// TestStartsWithBindNow: every symbol is bound at start and the binary
// still runs (the cgo build died here on 413 unresolved nvml* symbols).
func TestStartsWithBindNow(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			out, code := run(t, arch, binary(t, arch), []string{"LD_BIND_NOW=1"}, "version")
			if code != 0 || !strings.Contains(out, "linux/"+arch) || !strings.Contains(out, "NVML by dlopen") {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			// The version is stamped at build time (from the tag in a release).
			if d := dist(); d != "" {
				v := debVersion(t, d, arch)
				if !strings.Contains(out, versionStamp(v)) {
					t.Errorf("binary says %q, the package is version %s", strings.TrimSpace(out), v)
				}
			} else if !strings.Contains(out, "ncclwiz 0.0.0-test ") {
				t.Errorf("version not stamped: %s", out)
			}
		})
	}
}

// TestReleaseHasNoTestHooks: the hidden --clock-ahead of test builds
// moves the two-minute safety windows; the shipped binary must refuse it.
func TestReleaseHasNoTestHooks(t *testing.T) {
	out, code := run(t, "amd64", binary(t, "amd64"), nil, "--clock-ahead", "10m", "version")
	if code == 0 || !strings.Contains(out, "unknown flag: --clock-ahead") {
		t.Fatalf("the release binary took --clock-ahead: exit %d\n%s", code, out)
	}
}

// TestGPUChecksThroughFakeDriver runs the release binary against the
// stand-in libnvidia-ml (built for the same architecture, arm64 under qemu
// as on Grace Hopper): gpu.inventory must list both simulated GPUs.
func TestGPUChecksThroughFakeDriver(t *testing.T) {
	for arch, cc := range map[string]string{"amd64": "gcc", "arm64": "aarch64-linux-gnu-gcc"} {
		t.Run(arch, func(t *testing.T) {
			bin := binary(t, arch)
			if arch == "arm64" {
				qemu(t)
			}
			lib := nvmltest.Build(t, cc)
			out, code := run(t, arch, bin, []string{"LD_LIBRARY_PATH=" + lib, "LD_BIND_NOW=1"}, "check", "--only", "gpu.inventory", "--json")
			if code > 1 || !strings.Contains(out, `"NVIDIA GH200 480GB (fake 0)"`) || !strings.Contains(out, `"NVIDIA GH200 480GB (fake 1)"`) ||
				!strings.Contains(out, `"driver": "580.65.06"`) || !strings.Contains(out, `"gpu_memory_numa_node": 9`) {
				t.Fatalf("exit %d:\n%s", code, out)
			}
		})
	}
}

// TestArm64UnderQemu runs what a user on a Grace node types first.
func TestArm64UnderQemu(t *testing.T) {
	bin := binary(t, "arm64")
	qemu(t)
	log := filepath.Join(t.TempDir(), "train.log")
	// Written here; the WARN format is NCCL's (src/misc/shmutils.cc, 2.22+).
	body := "gpu-node-3:4121:4188 [1] NCCL INFO NCCL version 2.21.5+cuda12.4\n" +
		"gpu-node-3:4121:4188 [1] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Qx81Za to 9637892 bytes, error: No space left on device (28)\n"
	if err := os.WriteFile(log, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"version"}, "linux/arm64", 0},
		{[]string{"guides", "--list"}, "shm-", 0},
		{[]string{"explain", log}, "Root cause: /dev/shm ran out of space", -1},
		{[]string{"check", "--only", "host.ipc,env.nccl,shm.mount"}, "ncclwiz check", -1},
	} {
		out, code := run(t, "arm64", bin, nil, c.args...)
		if !strings.Contains(out, c.want) || (c.code >= 0 && code != c.code) || code > 1 {
			t.Errorf("ncclwiz %v: exit %d\n%s", c.args, code, out)
		}
	}
}

// TestReleaseConfigsAgree: .goreleaser.yaml (the release) and
// packaging/nfpm.yaml (what CI packages) describe the same package.
func TestReleaseConfigsAgree(t *testing.T) {
	g, n := loadConfigs(t)
	if err := compareConfigs(g, n); err != nil {
		t.Fatal(err)
	}
}

// TestAdvisories: no module linked into the release binary is inside a
// range of the advisories listed in docs/development.md.
func TestAdvisories(t *testing.T) {
	advs, err := ReadAdvisories(filepath.Join(gobin.ModuleRoot(), "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, a := range advs {
		ids[a.ID] = true
	}
	if len(advs) < 4 || !ids["GO-2026-4440 (CVE-2025-47911)"] || !ids["GO-2026-4441 (CVE-2025-58190)"] {
		t.Fatalf("advisory table: %+v", advs)
	}
	// The check itself: the x/net this project shipped before must fail it.
	if len(Vulnerable(advs, "golang.org/x/net", "v0.39.0")) != 2 {
		t.Fatalf("x/net v0.39.0 should be inside two advisories: %+v", Vulnerable(advs, "golang.org/x/net", "v0.39.0"))
	}
	bi, err := buildinfo.ReadFile(binary(t, "amd64"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, m := range bi.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		for _, a := range Vulnerable(advs, m.Path, m.Version) {
			t.Errorf("%s %s is inside %s (fixed in %s)", m.Path, m.Version, a.ID, a.Fixed)
		}
		for _, a := range advs {
			if a.Module == m.Path {
				seen++
				break
			}
		}
	}
	t.Logf("%d linked modules, %d of them with listed advisories, none affected", len(bi.Deps), seen)
}

// TestInstallScript serves the release files from a local server and runs
// install.sh as a user would: it installs and runs, refuses a tarball
// whose checksum does not match, and picks arm64 on an aarch64 machine.
func TestInstallScript(t *testing.T) {
	d := needDist(t)
	tamper := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := filepath.Base(r.URL.Path)
		b, err := os.ReadFile(filepath.Join(d, name))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if tamper && strings.HasSuffix(name, ".tar.gz") {
			b = append(bytes.Clone(b[:len(b)-1]), b[len(b)-1]^0xff)
		}
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	script := filepath.Join(gobin.ModuleRoot(), "install.sh")
	install := func(t *testing.T, extraPath string) (string, string, error) {
		prefix := t.TempDir()
		cmd := exec.Command("sh", script)
		cmd.Env = append(os.Environ(), "NCCLWIZ_BASE_URL="+srv.URL+"/releases/v9/", "NCCLWIZ_PREFIX="+prefix, "HOME="+t.TempDir())
		if extraPath != "" {
			cmd.Env = append(cmd.Env, "PATH="+extraPath+":"+os.Getenv("PATH"))
		}
		out, err := cmd.CombinedOutput()
		return string(out), prefix, err
	}
	t.Run("installs", func(t *testing.T) {
		out, prefix, err := install(t, "")
		if err != nil || !strings.Contains(out, "installed "+prefix+"/bin/ncclwiz") {
			t.Fatalf("%v\n%s", err, out)
		}
		if v, err := exec.Command(prefix+"/bin/ncclwiz", "version").Output(); err != nil || !strings.Contains(string(v), "linux/amd64") {
			t.Fatalf("installed binary: %v %s", err, v)
		}
		for _, f := range []string{"share/man/man1/ncclwiz.1.gz", "share/bash-completion/completions/ncclwiz", "share/zsh/site-functions/_ncclwiz", "share/fish/vendor_completions.d/ncclwiz.fish"} {
			if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("checksum mismatch", func(t *testing.T) {
		tamper = true
		defer func() { tamper = false }()
		out, prefix, err := install(t, "")
		if err == nil || !strings.Contains(out, "checksum mismatch") {
			t.Fatalf("a tampered tarball was accepted: %v\n%s", err, out)
		}
		if _, err := os.Stat(prefix + "/bin/ncclwiz"); err == nil {
			t.Fatal("installed a binary whose checksum did not match")
		}
	})
	t.Run("aarch64 machine", func(t *testing.T) {
		shim := t.TempDir()
		if err := os.WriteFile(filepath.Join(shim, "uname"), []byte("#!/bin/sh\ncase \"$1\" in -m) echo aarch64 ;; *) exec /bin/uname \"$@\" ;; esac\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		out, prefix, _ := install(t, shim)
		f, err := elf.Open(prefix + "/bin/ncclwiz")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		defer f.Close()
		if f.Machine != elf.EM_AARCH64 {
			t.Fatalf("installed a %v binary on an aarch64 machine\n%s", f.Machine, out)
		}
	})
}

// TestWheelInVenv installs the wheel into a fresh venv with no index (what
// `pip install ncclwiz` does with the wheel at hand) and runs it.
func TestWheelInVenv(t *testing.T) {
	d := needDist(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the venv runs the amd64 wheel")
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command("python3", "-m", "venv", venv).CombinedOutput(); err != nil {
		t.Skipf("python3 -m venv: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", "--find-links", d, "ncclwiz")
	cmd.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(venv, "bin", "ncclwiz"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "linux/amd64") {
		t.Fatalf("venv ncclwiz: %v\n%s", err, out)
	}
}

// TestWheelWithPipx installs the wheel file with Debian's pipx into a
// PIPX_HOME of its own, offline, and runs the ncclwiz pipx put on PATH.
// pipx also tries to upgrade pip in its shared venv from the index; with
// no index that fails, pipx says so and goes on (PIP_NO_INDEX makes it
// fail at once instead of retrying a network that is not there).
func TestWheelWithPipx(t *testing.T) {
	d := needDist(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("pipx installs the amd64 wheel")
	}
	pipx, err := exec.LookPath("pipx")
	if err != nil {
		t.Skip("pipx not installed (Debian's pipx package; .ci/run installs it)")
	}
	wheels, _ := filepath.Glob(filepath.Join(d, "ncclwiz-*_x86_64.whl"))
	if len(wheels) != 1 {
		t.Fatalf("want one x86_64 wheel in %s, have %v", d, wheels)
	}
	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	cmd := exec.Command(pipx, "install", "--pip-args=--no-index", wheels[0])
	cmd.Env = append(os.Environ(), "HOME="+home, "PIPX_HOME="+filepath.Join(home, "pipx"), "PIPX_BIN_DIR="+bin,
		"PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pipx install: %v\n%s", err, out)
	}
	v, err := exec.Command(filepath.Join(bin, "ncclwiz"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "linux/amd64") || !strings.HasPrefix(string(v), versionStamp(debVersion(t, d, "amd64"))) {
		t.Fatalf("ncclwiz from pipx: %v\n%s\npipx said:\n%s", err, v, out)
	}
}
