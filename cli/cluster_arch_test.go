package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/internal/sshnodes"
)

// TestClusterCheckMixedArchitectures: a1 is this machine's architecture,
// a2's uname -m says aarch64 (a Grace node beside an x86 login node).
// Without an arm64 build a2 is reported with what to install, not run into
// exit 126; with --binary arm64=PATH that build is the one sent there.
// --debug prints the ssh commands.
func TestClusterCheckMixedArchitectures(t *testing.T) {
	sshnodes.Skip(t)
	bin := ncclwizBinary(t)
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "uname"), []byte("#!/bin/sh\ncase \"$1\" in -m) echo aarch64 ;; *) exec /bin/uname \"$@\" ;; esac\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := sshnodes.Start(t, []sshnodes.Spec{{Name: "a1"}, {Name: "a2", Env: map[string]string{"PATH": shim + ":/usr/local/bin:/usr/bin:/bin"}}})
	base := []string{"--engine", "ssh", "-F", c.SSHConfig, "--hosts", "a1,a2", "--connect-timeout", "3s", "--timeout", "60s", "--only", "shm.mount,env.nccl", "--json"}

	doc, raw, code := runClusterBinary(t, bin, append([]string{"--debug"}, base...)...)
	if code != 1 || len(doc.Nodes) != 2 {
		t.Fatalf("exit %d\n%s", code, raw)
	}
	for _, n := range doc.Nodes {
		switch n.Name {
		case "a1":
			if n.Status != "ok" {
				t.Errorf("a1: %+v", n.Node)
			}
		case "a2":
			if n.Reason != "arch" || !strings.Contains(n.Error, "aarch64 (linux/arm64)") || !strings.Contains(n.Error, "--binary arm64=PATH") {
				t.Errorf("a2: %+v", n.Node)
			}
		}
	}
	if !strings.Contains(raw, "+ ") || !strings.Contains(raw, "BatchMode=yes") {
		t.Errorf("--debug printed no ssh command:\n%s", raw)
	}

	// An arm64 build for a2: it is chosen, copied and its checksum verified
	// there (the copy script refuses a file whose sha256 is not the arm64
	// build's); this x86 node then cannot execute it, so the run fails.
	arm := filepath.Join(t.TempDir(), "ncclwiz-arm64")
	build := exec.Command("go", "build", "-tags", "nonvml", "-o", arm, ".")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH=arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	doc, raw, _ = runClusterBinary(t, bin, append(base, "--binary", "arm64="+arm)...)
	for _, n := range doc.Nodes {
		if n.Name == "a2" && (n.Delivery != "copied" || n.Reason != "remote-error" || strings.Contains(n.Error, "checksum")) {
			t.Errorf("a2 with --binary arm64: %+v\n%s", n.Node, raw)
		}
	}
}
