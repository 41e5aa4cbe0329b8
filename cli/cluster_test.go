package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ncclwiz/ncclwiz/cluster"
	"github.com/ncclwiz/ncclwiz/internal/gobin"
	"github.com/ncclwiz/ncclwiz/internal/sshnodes"
)

// The checks the nodes run in these tests: every fact the aggregation
// reads, without proc.ranks' one-second CPU sample per node.
const clusterTestOnly = "shm.mount,host.container,host.ipc,env.nccl,nccl.stack,gpu.inventory,net.interfaces,net.rdma"

// ncclwizBinary builds the real command (static: CGO_ENABLED=0, -tags nonvml): the
// nodes run it from the shared path or as a copy.
func ncclwizBinary(t *testing.T) string {
	t.Helper()
	return gobin.Ncclwiz(t, true)
}

// plantedNodes: n1 is the reference; n2..n4 each differ in one fact;
// n5's sshd is down, n6 accepts and never speaks, n8 refuses our key;
// n9 (used by the mesh test only) drops packets to n1.
func plantedNodes() []sshnodes.Spec {
	return []sshnodes.Spec{
		{Name: "n1"},
		{Name: "n2", Env: map[string]string{"NCCL_SOCKET_IFNAME": "eth0"}},
		{Name: "n3", ShmSize: "64m"},
		{Name: "n4", MTU: 9000},
		{Name: "n5", Down: true},
		{Name: "n6", Hang: true},
		{Name: "n7"},
		{Name: "n8", NoAuth: true},
		{Name: "n9", Blackhole: []string{"n1"}},
	}
}

func runClusterBinary(t *testing.T, bin string, args ...string) (cluster.JSONDoc, string, int) {
	t.Helper()
	return runClusterCmd(t, exec.Command(bin, append([]string{"cluster", "check"}, args...)...), args)
}

// runClusterCmd runs a prepared command line (e.g. under salloc) whose
// cluster check arguments are args, and reads its JSON when --json.
func runClusterCmd(t *testing.T, cmd *exec.Cmd, args []string) (cluster.JSONDoc, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var doc cluster.JSONDoc
	if strings.Contains(strings.Join(args, " "), "--json") {
		sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "docs", "cluster.schema.json"))
		if err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out.Bytes()))
		if err == nil {
			err = sch.Validate(inst)
		}
		if err != nil {
			t.Fatalf("output does not match docs/cluster.schema.json: %v\n%s\nstderr: %s", err, out.String(), errb.String())
		}
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			t.Fatalf("exit %d, not JSON: %v\n%s\nstderr: %s", code, err, out.String(), errb.String())
		}
	}
	return doc, out.String() + errb.String(), code
}

// TestClusterCheckOverSSHAndPDSH reaches seven namespaced "nodes" with
// real sshd over ssh and over pdsh and must name exactly the planted
// outliers, the refused node and the hung node.
func TestClusterCheckOverSSHAndPDSH(t *testing.T) {
	sshnodes.Skip(t)
	bin := ncclwizBinary(t)
	c := sshnodes.Start(t, plantedNodes())
	hosts := "n1,n2,n3,n4,n5,n6,n7,n8"
	want := map[string]string{"n2": "env:NCCL_SOCKET_IFNAME", "n3": "shm_size", "n4": "mtu"}
	saved := t.TempDir()
	engines := []string{"ssh", "pdsh"}
	for _, eng := range engines {
		t.Run(eng, func(t *testing.T) {
			if eng == "pdsh" {
				if _, err := exec.LookPath("pdsh"); err != nil {
					t.Skip("pdsh not installed (apt-get install pdsh); CI installs it")
				}
			}
			doc, raw, code := runClusterBinary(t, bin, "--engine", eng, "-F", c.SSHConfig, "--hosts", hosts,
				"--connect-timeout", "3s", "--timeout", "90s", "--only", clusterTestOnly, "--json", "--save", filepath.Join(saved, eng))
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s", code, raw)
			}
			if doc.Engine != eng || doc.Summary.Nodes != 8 || doc.Summary.Checked != 5 || doc.Summary.Unreachable != 3 {
				t.Fatalf("engine %q summary %+v\n%s", doc.Engine, doc.Summary, raw)
			}
			got := map[string][]string{}
			for _, s := range doc.Suspects {
				got[s.Node] = append(got[s.Node], s.Fact)
			}
			for node, fact := range want {
				if len(got[node]) != 1 || got[node][0] != fact {
					t.Errorf("%s: suspect facts %v, want [%s]", node, got[node], fact)
				}
			}
			for node := range got {
				if _, ok := want[node]; !ok {
					t.Errorf("%s named as a suspect (%v); only n2, n3, n4 were planted", node, got[node])
				}
			}
			status := map[string]cluster.NodeRow{}
			for _, n := range doc.Nodes {
				status[n.Name] = n
			}
			if n := status["n5"]; n.Status != cluster.StatusUnreachable || n.Reason != "refused" {
				t.Errorf("n5 (sshd down): %s/%s %q, want unreachable/refused", n.Status, n.Reason, n.Error)
			}
			if n := status["n8"]; n.Status != cluster.StatusUnreachable || n.Reason != "auth" {
				t.Errorf("n8 (key refused): %s/%s %q, want unreachable/auth", n.Status, n.Reason, n.Error)
			}
			if n := status["n6"]; n.Status != cluster.StatusTimeout || n.Reason != "timeout" {
				t.Errorf("n6 (hangs): %s/%s %q, want timeout", n.Status, n.Reason, n.Error)
			}
			for _, name := range []string{"n1", "n2", "n3", "n4", "n7"} {
				if n := status[name]; n.Status != cluster.StatusOK || n.Delivery != "shared" || n.ClockMS == nil {
					t.Errorf("%s: status %s delivery %q clock %v, want ok from the shared path with a clock offset", name, n.Status, n.Delivery, n.ClockMS)
				}
			}
			// Most suspicious first: the unreachable nodes, then the
			// planted outliers, the clean nodes last.
			order := []string{}
			for _, n := range doc.Nodes {
				order = append(order, n.Name)
			}
			head := append([]string(nil), order[:3]...)
			sort.Strings(head)
			tail := append([]string(nil), order[6:]...)
			sort.Strings(tail)
			if strings.Join(head, ",") != "n5,n6,n8" || strings.Join(tail, ",") != "n1,n7" {
				t.Errorf("order %v: want n5/n6/n8 first and n1/n7 last", order)
			}
			if len(doc.Notes) == 0 || !strings.Contains(strings.Join(doc.Notes, " "), "shared path") {
				t.Errorf("notes %q do not say ncclwiz ran from the shared path", doc.Notes)
			}
		})
	}

	// The reports saved by --save aggregate the same way with --from-json
	// (no clock, no unreachable nodes: only what was saved).
	t.Run("from-json", func(t *testing.T) {
		doc, raw, code := runClusterBinary(t, bin, "--from-json", filepath.Join(saved, "ssh"), "--json")
		if code != 1 || doc.Engine != "json" || doc.Summary.Checked != 5 {
			t.Fatalf("exit %d engine %s summary %+v\n%s", code, doc.Engine, doc.Summary, raw)
		}
		got := map[string]string{}
		for _, s := range doc.Suspects {
			got[s.Node] = s.Fact
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("suspects %v, want %v", got, want)
		}
	})

	// --mesh: listeners on every node, each node connects to the others on
	// NCCL's interface and to the "master" (n7's sshd port): exactly the
	// blackholed pair fails, both ways (no route from n9; n9's answers to
	// n1 are dropped, so n1 times out).
	t.Run("mesh", func(t *testing.T) {
		doc, raw, code := runClusterBinary(t, bin, "--engine", "ssh", "-F", c.SSHConfig, "--hosts", "n1,n7,n9",
			"--connect-timeout", "3s", "--only", clusterTestOnly, "--mesh", "--master", c.Addr["n7"]+":22", "--json")
		if code != 1 {
			t.Fatalf("exit %d\n%s", code, raw)
		}
		var failed []string
		ok := 0
		for _, p := range doc.Mesh {
			if p.OK {
				ok++
				continue
			}
			failed = append(failed, p.From+"->"+p.To+"/"+p.Reason)
		}
		// 3 nodes × (2 peers + master) = 9 connections, 2 fail.
		if strings.Join(failed, " ") != "n1->n9/timeout n9->n1/no-route" || ok != 7 {
			t.Errorf("mesh failures %v (%d ok), want n1->n9 timing out and n9->n1 without a route\n%s", failed, ok, raw)
		}
		if doc.Summary.MeshFailures != 2 || len(doc.Suspects) != 0 {
			t.Errorf("summary %+v suspects %+v", doc.Summary, doc.Suspects)
		}
	})

	t.Run("plain", func(t *testing.T) {
		_, raw, code := runClusterBinary(t, bin, "--engine", "ssh", "-F", c.SSHConfig, "--hosts", "n1,n2,n5,n7",
			"--connect-timeout", "3s", "--only", clusterTestOnly, "--no-color")
		if code != 1 {
			t.Fatalf("exit %d\n%s", code, raw)
		}
		for _, want := range []string{"n2: NCCL_SOCKET_IFNAME = *eth0, the other nodes (unset) → ncclwiz guides socket-interface",
			"n5: connection refused", "*eth0"} {
			if !strings.Contains(raw, want) {
				t.Errorf("plain report lacks %q:\n%s", want, raw)
			}
		}
	})

	// --copy always: the binary goes over ssh into a private temp dir
	// (TMPDIR of the node's login environment), is verified and removed;
	// pdsh sends its copies over ssh too.
	for _, eng := range engines {
		t.Run("copy-"+eng, func(t *testing.T) {
			if eng == "pdsh" {
				if _, err := exec.LookPath("pdsh"); err != nil {
					t.Skip("pdsh not installed (apt-get install pdsh); CI installs it")
				}
			}
			doc, raw, _ := runClusterBinary(t, bin, "--engine", eng, "-F", c.SSHConfig, "--hosts", "n1,n3,n7",
				"--copy", "always", "--only", clusterTestOnly, "--json")
			for _, n := range doc.Nodes {
				if n.Status != cluster.StatusOK || n.Delivery != "copied" {
					t.Errorf("%s: %s delivery %q, want ok from a copy\n%s", n.Name, n.Status, n.Delivery, raw)
				}
				ents, err := os.ReadDir(c.NodeTmp(n.Name))
				if err != nil || len(ents) != 0 {
					t.Errorf("%s: the copy was not removed: %v %v", n.Name, ents, err)
				}
			}
			if !strings.Contains(strings.Join(doc.Notes, " "), "copied to a private temp directory") {
				t.Errorf("notes %q do not say the binary was copied", doc.Notes)
			}
			if len(doc.Suspects) != 1 || doc.Suspects[0].Node != "n3" {
				t.Errorf("suspects %+v, want only n3's /dev/shm", doc.Suspects)
			}
		})
	}
}

func TestClusterCheckUsage(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{nil, "say which nodes"},
		{[]string{"--hosts", "a", "--from-json", dir}, "use one node source"},
		{[]string{"--hosts", "a", "--hostfile", "f"}, "use one"},
		{[]string{"--hosts", "a;b"}, "not allowed"},
		{[]string{"--hosts", "-oProxyCommand=x"}, "must not start with '-'"},
		{[]string{"--hosts", "a", "--engine", "rsh"}, "--engine"},
		{[]string{"--hosts", "a", "--copy", "maybe"}, "--copy"},
		{[]string{"--hosts", "a", "--fanout", "0"}, "--fanout"},
		{[]string{"--hosts", "a", "--timeout", "-1s"}, "positive"},
		{[]string{"--hostfile", filepath.Join(dir, "missing")}, "read hostfile"},
		{[]string{"--from-json", dir}, "no *.json reports"},
		{[]string{"--slurm"}, "not inside a Slurm allocation"},
		{[]string{"--nodelist", "n[2-1]"}, "bad range"},
		{[]string{"--from-json", dir, "--mesh"}, "--mesh needs --hosts"},
		{[]string{"--hosts", "a", "--master", "h:1"}, "--master is part of --mesh"},
		{[]string{"--hosts", "a", "--mesh", "--master", "nohost"}, "want HOST:PORT"},
	}
	for _, tt := range tests {
		_, stderr, code := runCLI(t, nil, append([]string{"cluster", "check"}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d stderr %q, want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}
