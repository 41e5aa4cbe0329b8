package release

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebInOlderDebian imports the older Debian userland that
// scripts/old-userland.sh makes (NCCLWIZ_OLD_ROOTFS: bullseye, glibc 2.31)
// as a Docker image, installs the release .deb there with dpkg and runs
// ncclwiz with LD_BIND_NOW=1: version, guides, explain, check, and the man
// page and completion files the package put in place.
func TestDebInOlderDebian(t *testing.T) {
	d := needDist(t)
	rootfs := os.Getenv("NCCLWIZ_OLD_ROOTFS")
	if rootfs == "" {
		t.Skip("needs NCCLWIZ_OLD_ROOTFS=$(scripts/old-userland.sh) (.ci/run sets it)")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker not installed")
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("docker is not running: %s", out)
	}
	debs, _ := filepath.Glob(filepath.Join(d, "ncclwiz_*_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("want one amd64 .deb in %s, have %v", d, debs)
	}
	// The image is named by the tarball's hash, so a rebuilt userland is
	// imported again and an unchanged one is reused; ship- marks it ours.
	f, err := os.Open(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	image := "ncclwiz-ship-oldrootfs:" + hex.EncodeToString(h.Sum(nil))[:16]
	if exec.Command("docker", "image", "inspect", image).Run() != nil {
		if out, err := exec.Command("docker", "import", rootfs, image).CombinedOutput(); err != nil {
			t.Fatalf("docker import: %v\n%s", err, out)
		}
	}
	script := `set -e
ldd --version | head -1
dpkg -i /dist/` + filepath.Base(debs[0]) + ` >/dev/null
export LD_BIND_NOW=1 NO_COLOR=1
ncclwiz version
ncclwiz guides --list | head -3
printf '%s\n' 'n1:77:90 [0] NCCL INFO NCCL version 2.19.3+cuda12.3' 'n1:77:90 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Ab12Cd to 9637892 bytes' >/tmp/job.log
ncclwiz explain /tmp/job.log | grep 'Root cause'
ncclwiz check --only shm.mount,host.ipc,env.nccl >/tmp/check.txt || [ $? -eq 1 ]
head -1 /tmp/check.txt
test -s /usr/share/man/man1/ncclwiz.1.gz && test -s /usr/share/bash-completion/completions/ncclwiz && test -s /usr/share/zsh/vendor-completions/_ncclwiz && echo packaged-files-ok
dpkg -r ncclwiz >/dev/null && test ! -e /usr/bin/ncclwiz && echo removed-ok`
	out, err := exec.Command("docker", "run", "--rm", "--network=none", "-v", d+":/dist:ro", image, "sh", "-c", script).CombinedOutput()
	s := string(out)
	t.Logf("%s", s)
	if err != nil {
		t.Fatalf("container: %v", err)
	}
	for _, want := range []string{"GLIBC 2.31", "linux/amd64", "Root cause:", "ncclwiz check", "packaged-files-ok", "removed-ok"} {
		if !strings.Contains(s, want) {
			t.Errorf("container output lacks %q", want)
		}
	}
}
