package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/cluster"
	"github.com/ncclwiz/ncclwiz/report"
)

// TestMeshRefusesNodeWithoutItsBuild: --mesh sends each node the build of
// its own architecture. g1 and g2 were probed as the other architecture
// and no build for it is at hand, so each is left out with a note naming
// the node, its architecture and the --binary to pass, and nothing is
// started there (this machine's build would end in exit 126); g3 was
// never probed by this engine, so it is probed now (its ssh fails here).
// The real mixed-architecture mesh is TestClusterCheckMixedArchitectures
// in cli.
func TestMeshRefusesNodeWithoutItsBuild(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "ssh")
	// Records the host of every call; every connection is refused.
	script := "#!/bin/sh\nfor a in \"$@\"; do h=$s; s=$a; done\necho \"$h\" >> " + calls + "\necho \"ssh: connect to host $h port 22: Connection refused\" >&2\nexit 255\n"
	if err := os.WriteFile(fake, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ncclwiz")
	if err := os.WriteFile(bin, []byte("this machine's build"), 0o700); err != nil {
		t.Fatal(err)
	}
	eng, err := NewSSH(Options{SSH: fake, LocalBinary: bin})
	if err != nil {
		t.Fatal(err)
	}
	other, otherArch := "aarch64", "arm64"
	if runtime.GOARCH == "arm64" {
		other, otherArch = "x86_64", "amd64"
	}
	var nodes []cluster.Node
	for i, name := range []string{"g1", "g2", "g3"} {
		var r report.JSONReport
		doc := fmt.Sprintf(`{"schema":1,"findings":[{"check":"net.interfaces","evidence":{"selected_nccl_2_28_plus":["eth0"],"interfaces":[{"name":"eth0","addrs":["10.0.0.%d/24"]}]}}]}`, i+1)
		if err := json.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, cluster.Node{Name: name, Status: cluster.StatusOK, Delivery: "copied", Report: &r})
		if name != "g3" {
			eng.remember(name, probe{machine: other, libc: "glibc 2.35"})
		}
	}
	pairs, notes, err := eng.Mesh(context.Background(), nodes, "")
	if err != nil || len(pairs) != 0 {
		t.Fatalf("pairs %+v, err %v", pairs, err)
	}
	all := strings.Join(notes, "\n")
	for _, name := range []string{"g1", "g2"} {
		if !strings.Contains(all, name+": left out of the mesh: the node is "+other+" (linux/"+otherArch+")") {
			t.Errorf("no refusal for %s:\n%s", name, all)
		}
	}
	if !strings.Contains(all, "--binary "+otherArch+"=PATH") || !strings.Contains(all, "g3: left out of the mesh: its architecture could not be probed: ssh: connect to host g3 port 22: Connection refused") ||
		!strings.Contains(all, "--mesh skipped: fewer than two reachable nodes") {
		t.Errorf("notes:\n%s", all)
	}
	if b, _ := os.ReadFile(calls); string(b) != "g3\n" {
		t.Errorf("ssh was asked to reach %q; only g3, to probe it", b)
	}
}
