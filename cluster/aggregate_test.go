package cluster

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/report"
)

// nodeSpec is what a generated node report says.
type nodeSpec struct {
	nccl, torch, driver, ifname, shm string
	gpus, mtu                        int
	env                              map[string]string
	ibState                          string
	warnings                         int
}

func baseSpec() nodeSpec {
	return nodeSpec{nccl: "2.21.5", torch: "2.4.1+cu124", driver: "550.54.15", ifname: "ens1", shm: "", gpus: 8, mtu: 9000,
		env: map[string]string{"NCCL_DEBUG": "INFO"}, ibState: "ACTIVE"}
}

// genReport builds the JSON a node's `ncclwiz check --json` prints, with
// the evidence shapes the checks write, and reads it back as a node would
// arrive (generic JSON evidence).
func genReport(t testing.TB, i int, s nodeSpec) *report.JSONReport {
	t.Helper()
	b := genReportJSON(i, s)
	var r report.JSONReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func genReportJSON(i int, s nodeSpec) []byte {
	var gpus []map[string]any
	for g := range s.gpus {
		gpus = append(gpus, map[string]any{"index": g, "name": "NVIDIA H100 80GB HBM3", "uuid": fmt.Sprintf("GPU-%d-%d", i, g)})
	}
	var settings []map[string]any
	for k, v := range s.env {
		settings = append(settings, map[string]any{"name": k, "value": v, "source": "environment"})
	}
	shm := 512.0 * (1 << 30)
	if s.shm == "small" {
		shm = 64 << 20
	}
	var ports []map[string]any
	for p := range 4 {
		ports = append(ports, map[string]any{"device": fmt.Sprintf("mlx5_%d", p), "port": 1, "state": s.ibState, "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand"})
	}
	fs := []checks.Finding{
		{Check: "shm.mount", Severity: checks.OK, Title: "shm", Evidence: map[string]any{"size_bytes": shm, "unlimited": false, "used_percent": 1.5}},
		{Check: "host.container", Severity: checks.OK, Title: "bare", Evidence: map[string]any{"runtime": ""}},
		{Check: "host.ipc", Severity: checks.OK, Title: "limits", Evidence: map[string]any{"memlock": map[string]any{"soft": "unlimited", "hard": "unlimited"}}},
		{Check: "env.nccl", Severity: checks.OK, Title: "env", Evidence: map[string]any{"settings": settings}},
		{Check: "nccl.stack", Severity: checks.OK, Title: "stack", Evidence: map[string]any{"torch": s.torch, "torch_cuda": "12.4",
			"nccl_builds": []map[string]any{{"version": s.nccl, "path": "/site/nvidia/nccl/lib/libnccl.so.2", "source": "pip"}}}},
		{Check: "gpu.inventory", Severity: checks.OK, Title: "gpus", Evidence: map[string]any{"driver": s.driver, "cuda": "12.4", "gpus": gpus}},
		{Check: "net.interfaces", Severity: checks.OK, Title: "ifs", Evidence: map[string]any{"interfaces": []map[string]any{
			{"name": "lo", "mtu": 65536, "addrs": []string{"127.0.0.1/8"}},
			{"name": s.ifname, "mtu": s.mtu, "addrs": []string{fmt.Sprintf("10.1.%d.%d/16", i/250, i%250+1)}}}}},
		{Check: "net.interfaces", Severity: checks.OK, Title: "sel", Evidence: map[string]any{"selected_nccl_2_28_plus": []string{s.ifname}}},
		{Check: "net.rdma", Severity: checks.OK, Title: "rdma", Evidence: map[string]any{"devices": []map[string]any{{"name": "mlx5", "ports": ports}}}},
	}
	for range s.warnings {
		fs = append(fs, checks.Finding{Check: "proc.ranks", Severity: checks.Warn, Title: "leftover rank"})
	}
	r := report.JSONReport{Schema: 1, Tool: "ncclwiz", Version: "1.0.0", GeneratedAt: "2026-11-24T05:00:00Z",
		Host: report.HostInfo{Name: fmt.Sprintf("gpu%04d", i), Kind: "local", ShmDir: "/dev/shm"}, Findings: fs}
	r.Summary.Warnings = s.warnings
	if s.warnings > 0 {
		r.Summary.ExitCode = 1
	}
	b, _ := json.Marshal(r)
	return b
}

func nodesFrom(t testing.TB, specs []nodeSpec) []Node {
	var ns []Node
	for i, s := range specs {
		off := time.Duration(0)
		ns = append(ns, Node{Name: fmt.Sprintf("gpu%02d", i+1), Status: StatusOK, Delivery: "shared", Report: genReport(t, i, s), ClockOffset: &off})
	}
	return ns
}

func TestExtractFacts(t *testing.T) {
	f := ExtractFacts(genReport(t, 3, baseSpec()))
	want := map[string]string{
		"nccl": "2.21.5", "torch": "2.4.1+cu124", "torch_cuda": "12.4", "driver": "550.54.15", "driver_cuda": "12.4",
		"gpus": "8× NVIDIA H100 80GB HBM3", "nccl_if": "ens1", "mtu": "ens1=9000", "subnet": "10.1.0.0/16",
		"shm_size": "512 GiB", "memlock": "unlimited/unlimited", "container": "none", "env:NCCL_DEBUG": "INFO", "ncclwiz": "1.0.0",
		"ib_ports": "mlx5_0:1 ACTIVE 400 Gb/sec (4X NDR), mlx5_1:1 ACTIVE 400 Gb/sec (4X NDR), mlx5_2:1 ACTIVE 400 Gb/sec (4X NDR), mlx5_3:1 ACTIVE 400 Gb/sec (4X NDR)",
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s = %q, want %q", k, f[k], v)
		}
	}
	if len(f) != len(want) {
		t.Errorf("facts %v: %d keys, want %d", f, len(f), len(want))
	}
}

func TestAggregate(t *testing.T) {
	mod := func(f func(*nodeSpec)) nodeSpec { s := baseSpec(); f(&s); return s }
	base := baseSpec()
	tests := []struct {
		name        string
		specs       []nodeSpec
		extra       []Node
		wantSuspect map[string][]string // node → facts
		wantFirst   string
		ambiguous   bool
		wantExit    int
	}{
		{name: "all agree", specs: []nodeSpec{base, base, base}, wantSuspect: map[string][]string{}, wantExit: 0},
		{name: "one NCCL differs", specs: []nodeSpec{base, mod(func(s *nodeSpec) { s.nccl = "2.18.1" }), base, base},
			wantSuspect: map[string][]string{"gpu02": {"nccl"}}, wantFirst: "gpu02", wantExit: 1},
		{name: "env only on one node", specs: []nodeSpec{base, base, mod(func(s *nodeSpec) { s.env = map[string]string{"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth9"} })},
			wantSuspect: map[string][]string{"gpu03": {"env:NCCL_SOCKET_IFNAME"}}, wantFirst: "gpu03", wantExit: 1},
		{name: "IB port down and small shm on different nodes, heavier first",
			specs:       []nodeSpec{mod(func(s *nodeSpec) { s.shm = "small" }), base, mod(func(s *nodeSpec) { s.ibState = "DOWN" }), base},
			wantSuspect: map[string][]string{"gpu01": {"shm_size"}, "gpu03": {"ib_ports"}}, wantFirst: "gpu03", wantExit: 1},
		{name: "two nodes disagree: no majority", specs: []nodeSpec{base, mod(func(s *nodeSpec) { s.mtu = 1500 })},
			wantSuspect: map[string][]string{"gpu01": {"mtu"}, "gpu02": {"mtu"}}, ambiguous: true, wantExit: 1},
		{name: "unreachable first", specs: []nodeSpec{base, base, mod(func(s *nodeSpec) { s.driver = "535.1" })},
			extra:       []Node{{Name: "zz", Status: StatusUnreachable, Reason: "dns", Error: "Could not resolve hostname zz"}},
			wantSuspect: map[string][]string{"gpu03": {"driver"}}, wantFirst: "zz", wantExit: 1},
		{name: "own problems only", specs: []nodeSpec{base, mod(func(s *nodeSpec) { s.warnings = 2 }), base},
			wantSuspect: map[string][]string{}, wantFirst: "gpu02", wantExit: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Aggregate(append(nodesFrom(t, tt.specs), tt.extra...))
			got := map[string][]string{}
			for _, s := range res.Suspects {
				got[s.Node] = append(got[s.Node], s.Fact)
				if s.Ambiguous != tt.ambiguous {
					t.Errorf("%s/%s ambiguous = %v", s.Node, s.Fact, s.Ambiguous)
				}
				if s.Guide == "" {
					t.Errorf("%s/%s has no guide", s.Node, s.Fact)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantSuspect) {
				t.Errorf("suspects %v, want %v", got, tt.wantSuspect)
			}
			if tt.wantFirst != "" && res.Nodes[0].Name != tt.wantFirst {
				t.Errorf("first node %s, want %s", res.Nodes[0].Name, tt.wantFirst)
			}
			if res.Summary.ExitCode != tt.wantExit {
				t.Errorf("exit %d, want %d", res.Summary.ExitCode, tt.wantExit)
			}
		})
	}
}

func TestAggregateClockSkew(t *testing.T) {
	ns := nodesFrom(t, []nodeSpec{baseSpec(), baseSpec(), baseSpec()})
	off := 3 * time.Minute
	ns[1].ClockOffset, ns[1].ClockError = &off, 20*time.Millisecond
	near := ClockSkewLimit + time.Second // within its error bound: not accused
	ns[2].ClockOffset, ns[2].ClockError = &near, 2*time.Second
	res := Aggregate(ns)
	if len(res.Suspects) != 1 || res.Suspects[0].Node != "gpu02" || res.Suspects[0].Fact != "clock" || res.Suspects[0].Value != "+180.0s" {
		t.Fatalf("suspects %+v, want gpu02's clock", res.Suspects)
	}
}

func TestPlainAndJSON(t *testing.T) {
	specs := []nodeSpec{baseSpec(), baseSpec(), baseSpec()}
	specs[1].env = map[string]string{"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "\x1b[31meth9"}
	ns := append(nodesFrom(t, specs), Node{Name: "gpu09", Status: StatusTimeout, Reason: "timeout", Error: "Connection timed out during banner exchange"})
	res := Aggregate(ns)
	var b strings.Builder
	run := Run{Engine: "ssh", GeneratedAt: time.Unix(0, 0), Version: "t", Notes: []string{"note"}}
	if err := WriteJSON(&b, run, res); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "\x1b") || strings.Contains(b.String(), `\u001b`) {
		t.Errorf("escape leaked into JSON: %s", b.String())
	}
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "docs", "cluster.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("output does not match docs/cluster.schema.json: %v\n%s", err, b.String())
	}
	var doc JSONDoc
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil || doc.Schema != SchemaVersion || doc.Kind != "cluster-check" {
		t.Fatalf("doc %+v err %v", doc, err)
	}
	var p strings.Builder
	if err := WritePlain(termio.New(&p, nil, true), run, res, PlainOptions{}); err != nil {
		t.Fatal(err)
	}
	out := p.String()
	if strings.Contains(out, "\x1b") {
		t.Errorf("escape leaked into the plain report: %q", out)
	}
	for _, want := range []string{"gpu09: no answer within the timeout", "gpu02: NCCL_SOCKET_IFNAME = *", "→ ncclwiz guides socket-interface",
		"1 not reachable, 1 fact differs"} {
		if !strings.Contains(out, want) {
			t.Errorf("plain report lacks %q:\n%s", want, out)
		}
	}
	// The table's first row is the most suspicious node.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "NODE") {
			if !strings.HasPrefix(lines[i+1], "gpu09") || !strings.HasPrefix(lines[i+2], "gpu02") {
				t.Errorf("table order:\n%s", out)
			}
		}
	}
}

func TestAddMesh(t *testing.T) {
	res := Aggregate(nodesFrom(t, []nodeSpec{baseSpec(), baseSpec(), baseSpec()}))
	if res.Summary.ExitCode != 0 {
		t.Fatalf("healthy nodes: exit %d", res.Summary.ExitCode)
	}
	res.AddMesh([]MeshPair{
		{From: "gpu01", To: "gpu02", Addr: "10.1.0.2:4000", OK: true},
		{From: "gpu03", To: "gpu01", Addr: "10.1.0.1:4000", Reason: "timeout"},
		{From: "gpu01", To: "gpu03", Addr: "10.1.0.3:4000", Reason: "refused"},
		{From: "gpu02", To: MasterName, Addr: "10.1.0.1:29500", OK: true},
	})
	if res.Summary.MeshFailures != 2 || res.Summary.ExitCode != 1 {
		t.Errorf("summary %+v", res.Summary)
	}
	// gpu01 and gpu03 are both ends of two failures; gpu02 of none.
	if res.Nodes[2].Name != "gpu02" {
		t.Errorf("order %v", []string{res.Nodes[0].Name, res.Nodes[1].Name, res.Nodes[2].Name})
	}
	var b strings.Builder
	if err := WritePlain(termio.New(&b, nil, true), Run{Engine: "ssh"}, res, PlainOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 of 4 connections on NCCL's interfaces failed", "gpu03 cannot reach gpu01 at 10.1.0.1:4000 (*timeout)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plain report lacks %q:\n%s", want, b.String())
		}
	}
}
