package cli

import (
	"fmt"
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
// --debug prints the ssh commands. --mesh between a1 and a3 (an aarch64
// node that runs aarch64 programs) sends a3 the arm64 build too.
func TestClusterCheckMixedArchitectures(t *testing.T) {
	sshnodes.Skip(t)
	bin := ncclwizBinary(t)
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "uname"), []byte("#!/bin/sh\ncase \"$1\" in -m) echo aarch64 ;; *) exec /bin/uname \"$@\" ;; esac\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// a3 is an aarch64 machine where aarch64 programs run: its timeout,
	// which the node runs ncclwiz under, starts aarch64 ELF files with
	// qemu and fails any other as the kernel would ("Exec format error",
	// the shell's 126). No binfmt_misc entry is registered on the build
	// machine for this, so nothing outside a3 changes.
	arm64Node := t.TempDir()
	for name, body := range map[string]string{
		"uname": "case \"$1\" in -m) echo aarch64 ;; *) exec /bin/uname \"$@\" ;; esac\n",
		"timeout": `k=$1 grace=$2 secs=$3; shift 3
if [ "$(od -An -tx1 -j18 -N2 "$1" | tr -d ' \n')" = b700 ]; then exec /usr/bin/timeout "$k" "$grace" "$secs" qemu-aarch64-static "$@"; fi
echo "sh: 1: $1: Exec format error" >&2
exit 126
`,
	} {
		if err := os.WriteFile(filepath.Join(arm64Node, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := sshnodes.Start(t, []sshnodes.Spec{{Name: "a1"}, {Name: "a2", Env: map[string]string{"PATH": shim + ":/usr/local/bin:/usr/bin:/bin"}},
		{Name: "a3", Env: map[string]string{"PATH": arm64Node + ":/usr/local/bin:/usr/bin:/bin"}}})
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

	// --mesh across the two architectures: a3 is an aarch64 node that
	// runs aarch64 programs, so its check, listener and probes must all
	// get the arm64 build (this machine's would end in exit 126 there).
	// Both engines: with pdsh the probe ran through pdsh, and the mesh
	// (over plain ssh) must still send a3 the arm64 build.
	for _, engine := range []string{"ssh", "pdsh"} {
		t.Run("mesh-"+engine, func(t *testing.T) {
			qemu, err := exec.LookPath("qemu-aarch64-static")
			if err != nil {
				t.Skip("needs qemu-aarch64-static (qemu-user-static) to run the arm64 build on the aarch64 node")
			}
			if _, err := exec.LookPath(engine); err != nil {
				t.Skipf("needs %s", engine)
			}
			doc, raw, code := runClusterBinary(t, bin, "--engine", engine, "-F", c.SSHConfig, "--hosts", "a1,a3", "--connect-timeout", "3s",
				"--timeout", "60s", "--only", "env.nccl,net.interfaces", "--binary", "arm64="+arm, "--mesh", "--json")
			if code > 1 || len(doc.Nodes) != 2 {
				t.Fatalf("exit %d\n%s", code, raw)
			}
			for _, n := range doc.Nodes {
				if n.Status != "ok" || n.Name == "a3" && n.Delivery != "copied" {
					t.Errorf("%s: %+v\n%s", n.Name, n.Node, raw)
				}
			}
			var pairs []string
			for _, p := range doc.Mesh {
				pairs = append(pairs, fmt.Sprintf("%s->%s ok=%v %s %s", p.From, p.To, p.OK, p.Reason, p.Error))
			}
			if len(doc.Mesh) != 2 || doc.Summary.MeshFailures != 0 {
				t.Errorf("mesh between a1 (this machine's build) and a3 (arm64 under %s): %v\n%s", qemu, pairs, raw)
			}
			for _, n := range doc.Notes {
				if strings.Contains(n, "did not start") || strings.Contains(n, "left out of the mesh") {
					t.Errorf("note %q\n%s", n, raw)
				}
			}
		})
	}
}
