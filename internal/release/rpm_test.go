package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// rpmArch is the name rpm (and dnf) give each release architecture.
var rpmArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}

// rpmFiles are the paths the .rpm must install besides the man pages
// (the zsh directory is Fedora's and RHEL's, not Debian's vendor one).
var rpmFiles = []string{
	"/usr/bin/ncclwiz",
	"/usr/share/bash-completion/completions/ncclwiz",
	"/usr/share/zsh/site-functions/_ncclwiz",
	"/usr/share/fish/vendor_completions.d/ncclwiz.fish",
	"/usr/share/licenses/ncclwiz/LICENSE",
}

// rpmTool returns Debian's rpm, or skips.
func rpmTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("rpm")
	if err != nil {
		t.Skip("rpm not installed (Debian's rpm package; .ci/run installs it)")
	}
	return p
}

// rpmPackage is the one .rpm for arch in dist.
func rpmPackage(t *testing.T, d, arch string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(d, "ncclwiz-*."+rpmArch[arch]+".rpm"))
	if len(m) != 1 {
		t.Fatalf("want one %s .rpm in %s, have %v", rpmArch[arch], d, m)
	}
	return m[0]
}

// rpmRun runs rpm with its database in db: Debian's rpm keeps it in
// $HOME/.rpmdb, which a test must not create on the machine.
func rpmRun(t *testing.T, db string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(rpmTool(t), append([]string{"--dbpath", db}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Logf("rpm %v: %v\n%s", args, err, stderr.String())
	}
	return string(out), err
}

// debVersion is the package version of the .deb for arch ("1.2.3",
// "0.0.0~snapshot.abc"): the one every package of a release must carry.
func debVersion(t *testing.T, d, arch string) string {
	t.Helper()
	debs, _ := filepath.Glob(filepath.Join(d, "ncclwiz_*_"+arch+".deb"))
	if len(debs) != 1 {
		t.Fatalf("packages for %s: %v", arch, debs)
	}
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(debs[0]), "ncclwiz_"), "_"+arch+".deb")
}

// versionStamp is what `ncclwiz version` starts with for a package
// version: packages spell a pre-release with "~" so it sorts first.
func versionStamp(pkgVersion string) string {
	return "ncclwiz " + strings.Replace(pkgVersion, "~", "-", 1) + " "
}

// TestRPMMetadata reads both .rpm files as dnf would: name, version, the
// architecture names RHEL uses, the licence, no dependency at all (the
// binary asks for no GLIBC version, so a "libc.so.6(GLIBC_2.x)" here would
// refuse installs on RHEL 7 for nothing), and the file list.
func TestRPMMetadata(t *testing.T) {
	d := needDist(t)
	rpmTool(t)
	db := t.TempDir()
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			pkg := rpmPackage(t, d, arch)
			info, err := rpmRun(t, db, "-qp", "--qf", "%{NAME}|%{VERSION}|%{ARCH}|%{OS}|%{LICENSE}", pkg)
			if err != nil {
				t.Fatal(err)
			}
			if want := "ncclwiz|" + debVersion(t, d, arch) + "|" + rpmArch[arch] + "|linux|MIT"; info != want {
				t.Errorf("rpm says %q, want %q", info, want)
			}
			reqs, err := rpmRun(t, db, "-qp", "--requires", pkg)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range strings.Split(strings.TrimSpace(reqs), "\n") {
				// rpmlib(...) entries are features of rpm itself, met by
				// every rpm that can read the package.
				if r != "" && !strings.HasPrefix(r, "rpmlib(") {
					t.Errorf("the package requires %q", r)
				}
			}
			list, err := rpmRun(t, db, "-qlp", pkg)
			if err != nil {
				t.Fatal(err)
			}
			files := strings.Split(strings.TrimSpace(list), "\n")
			for _, f := range append(rpmFiles, "/usr/share/man/man1/ncclwiz.1.gz", "/usr/share/man/man1/ncclwiz-cluster-check.1.gz") {
				if !slices.Contains(files, f) {
					t.Errorf("the package lacks %s; it has:\n%s", f, list)
				}
			}
			// The directory is the package's own, so rpm -e removes it.
			if !slices.Contains(files, "/usr/share/licenses/ncclwiz") {
				t.Errorf("the package does not own /usr/share/licenses/ncclwiz")
			}
		})
	}
}

// TestRPMInstallsAndRemoves installs the x86_64 .rpm with rpm into a root
// of its own with an empty rpm database (so any dependency would stop it:
// no --nodeps), runs the installed ncclwiz, verifies the files against
// the package and removes it. The root is the older Debian userland of
// TestDebInOlderDebian (glibc 2.31), run with chroot: the release binary
// is dynamically linked (purego needs the glibc loader), so an empty root
// could not run it.
func TestRPMInstallsAndRemoves(t *testing.T) {
	d := needDist(t)
	rpmTool(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("installs and runs the x86_64 package")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (chroot, files owned by root)")
	}
	rootfs := os.Getenv("NCCLWIZ_OLD_ROOTFS")
	if rootfs == "" {
		t.Skip("needs NCCLWIZ_OLD_ROOTFS=$(scripts/old-userland.sh) (.ci/run sets it)")
	}
	root := t.TempDir()
	if out, err := exec.Command("tar", "-xf", rootfs, "-C", root).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", rootfs, err, out)
	}
	// The database where RHEL keeps it, inside the root (--root prefixes it).
	db := "/var/lib/rpm"
	pkg := rpmPackage(t, d, "amd64")
	if _, err := rpmRun(t, db, "--root", root, "--initdb"); err != nil {
		t.Fatal(err)
	}
	if _, err := rpmRun(t, db, "--root", root, "-i", pkg); err != nil {
		t.Fatal("rpm -i failed")
	}
	if q, err := rpmRun(t, db, "--root", root, "-q", "ncclwiz"); err != nil || !strings.HasPrefix(q, "ncclwiz-") {
		t.Fatalf("rpm -q after install: %q %v", q, err)
	}
	// rpm -V compares every installed file with the package: size,
	// digest, mode, owner.
	if out, err := rpmRun(t, db, "--root", root, "-V", "ncclwiz"); err != nil || out != "" {
		t.Errorf("rpm -V: %v\n%s", err, out)
	}
	cmd := exec.Command("chroot", root, "/usr/bin/ncclwiz", "version")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LD_BIND_NOW=1", "NO_COLOR=1"}
	out, err := cmd.CombinedOutput()
	if want := versionStamp(debVersion(t, d, "amd64")); err != nil || !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "linux/amd64") {
		t.Fatalf("installed ncclwiz in the bullseye root: %v\n%s\nwant it to start with %q", err, out, want)
	}
	if _, err := rpmRun(t, db, "--root", root, "-e", "ncclwiz"); err != nil {
		t.Fatal("rpm -e failed")
	}
	for _, f := range append(rpmFiles, "/usr/share/man/man1/ncclwiz.1.gz", "/usr/share/licenses/ncclwiz") {
		if _, err := os.Lstat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s is still there after rpm -e", f)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(root, "usr/share/man/man1/ncclwiz*")); len(m) > 0 {
		t.Errorf("man pages left after rpm -e: %v", m)
	}
	if q, err := rpmRun(t, db, "--root", root, "-q", "ncclwiz"); err == nil {
		t.Errorf("rpm -q after rpm -e still finds %q", q)
	}
}
