package cluster

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/report"
)

// FactDef describes one fact that must agree across the nodes of a job.
type FactDef struct {
	Key   string `json:"key"`
	Label string `json:"label"`
	// Guide is the ncclwiz guide that explains why a difference breaks a job.
	Guide string `json:"guide"`
	// Weight orders suspects: a different NCCL breaks a job for sure, a
	// different ncclwiz version does not.
	Weight int `json:"weight"`
}

// Unknown is the value of a fact a node's report does not carry (its
// check was skipped or the report came from an older ncclwiz).
const Unknown = "?"

// The fixed facts, in table order; environment variables follow as
// "env:NAME" facts.
var fixedFacts = []FactDef{
	{"nccl", "NCCL", "nccl-version-mismatch", 10},
	{"torch", "torch", "nccl-version-mismatch", 8},
	{"torch_cuda", "torch CUDA", "cuda-driver", 6},
	{"driver", "driver", "cuda-driver", 6},
	{"driver_cuda", "driver CUDA", "cuda-driver", 6},
	{"gpus", "GPUs", "multi-node-basics", 6},
	{"nccl_if", "NCCL interface", "socket-interface", 9},
	{"mtu", "MTU", "socket-interface", 7},
	{"subnet", "subnet", "socket-interface", 7},
	{"ib_ports", "IB/RoCE ports", "ib-roce", 8},
	{"shm_size", "/dev/shm", "shm-no-space", 5},
	{"memlock", "memlock", "memlock", 4},
	{"container", "container", "container-shm", 2},
	{"ncclwiz", "ncclwiz", "multi-node-basics", 1},
}

// envWeight: a variable set on some nodes only changes what NCCL does on
// those nodes; the interface and IB choices break connections outright.
func envFact(name string) FactDef {
	d := FactDef{Key: "env:" + name, Label: name, Guide: "env-reference", Weight: 5}
	switch {
	case name == "NCCL_SOCKET_IFNAME" || name == "GLOO_SOCKET_IFNAME" || name == "NCCL_SOCKET_FAMILY":
		d.Guide, d.Weight = "socket-interface", 9
	case strings.HasPrefix(name, "NCCL_IB_") || name == "NCCL_NET" || name == "NCCL_NET_GDR_LEVEL":
		d.Guide, d.Weight = "ib-roce", 8
	case strings.HasPrefix(name, "NCCL_SHM") || name == "NCCL_CUMEM_HOST_ENABLE":
		d.Guide = "shm-cumem-host"
	case strings.Contains(name, "TIMEOUT") || strings.Contains(name, "HEARTBEAT"):
		d.Guide = "pytorch-timeouts"
	}
	return d
}

// ExtractFacts reads the facts that must agree from one node's check
// report. It only reads the report's JSON (findings' evidence), never the
// checks' code, so reports from any ncclwiz of schema 1 aggregate.
func ExtractFacts(r *report.JSONReport) map[string]string {
	idx := indexEvidence(r)
	f := map[string]string{"ncclwiz": r.Version}

	if ev := idx.first("nccl.stack", "nccl_builds"); ev != nil {
		var vs []string
		for _, b := range asSlice(ev["nccl_builds"]) {
			if v := str(asMap(b)["version"]); v != "" {
				vs = append(vs, v)
			}
		}
		f["nccl"] = joinSet(vs, "none found")
		f["torch"] = orNone(str(ev["torch"]))
		f["torch_cuda"] = orNone(str(ev["torch_cuda"]))
	}

	if ev := idx.first("gpu.inventory", "driver"); ev != nil {
		f["driver"] = orNone(str(ev["driver"]))
		f["driver_cuda"] = orNone(str(ev["cuda"]))
		counts := map[string]int{}
		for _, g := range asSlice(ev["gpus"]) {
			counts[str(asMap(g)["name"])]++
		}
		var parts []string
		for name, n := range counts {
			parts = append(parts, fmt.Sprintf("%d× %s", n, name))
		}
		f["gpus"] = joinSet(parts, "none")
	} else if ev := idx.first("gpu.inventory", "nvml_state"); ev != nil {
		state := "no GPU (" + str(ev["nvml_state"]) + ")"
		f["driver"], f["driver_cuda"], f["gpus"] = state, state, state
	}

	if ev := idx.first("env.nccl", "settings"); ev != nil {
		for _, s := range asSlice(ev["settings"]) {
			m := asMap(s)
			if name := str(m["name"]); name != "" {
				f["env:"+name] = str(m["value"])
			}
		}
	}

	if ev := idx.first("net.interfaces", "selected_nccl_2_28_plus"); ev != nil {
		sel := strs(ev["selected_nccl_2_28_plus"])
		f["nccl_if"] = joinList(sel, "none")
		ifs := map[string]map[string]any{}
		if iv := idx.first("net.interfaces", "interfaces"); iv != nil {
			for _, x := range asSlice(iv["interfaces"]) {
				m := asMap(x)
				ifs[str(m["name"])] = m
			}
		}
		var mtus, nets []string
		for _, name := range sel {
			m := ifs[name]
			if m == nil {
				continue
			}
			mtus = append(mtus, name+"="+num(m["mtu"]))
			for _, a := range strs(m["addrs"]) {
				if p, err := netip.ParsePrefix(a); err == nil && p.Addr().Is4() {
					nets = append(nets, p.Masked().String())
				}
			}
		}
		f["mtu"] = joinList(mtus, "-")
		f["subnet"] = joinSet(nets, "none")
	}

	if ev := idx.first("net.rdma", "devices"); ev != nil {
		var ports []string
		for _, d := range asSlice(ev["devices"]) {
			for _, p := range asSlice(asMap(d)["ports"]) {
				pm := asMap(p)
				ports = append(ports, strings.TrimSpace(fmt.Sprintf("%s:%s %s %s", str(pm["device"]), num(pm["port"]), str(pm["state"]), str(pm["rate"]))))
			}
		}
		f["ib_ports"] = joinList(ports, "none")
	} else if idx.ran("net.rdma") {
		f["ib_ports"] = "none"
	}

	if ev := idx.first("shm.mount", "size_bytes"); ev != nil {
		if b, ok := ev["unlimited"].(bool); ok && b {
			f["shm_size"] = "unlimited"
		} else if n, ok := ev["size_bytes"].(float64); ok {
			f["shm_size"] = units.Bytes(uint64(n))
		}
	}

	if ev := idx.first("host.ipc", "memlock"); ev != nil {
		m := asMap(ev["memlock"])
		f["memlock"] = limit(str(m["soft"])) + "/" + limit(str(m["hard"]))
	}

	if ev := idx.first("host.container", "runtime"); ev != nil {
		f["container"] = orNone(str(ev["runtime"]))
	}
	return f
}

func limit(s string) string {
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return units.Bytes(n)
	}
	return orNone(s)
}

type evidenceIndex struct {
	byCheck map[string][]map[string]any
	checks  map[string]bool
}

func indexEvidence(r *report.JSONReport) evidenceIndex {
	idx := evidenceIndex{byCheck: map[string][]map[string]any{}, checks: map[string]bool{}}
	for _, c := range r.Checks {
		idx.checks[c.ID] = c.Status.String() != "skipped"
	}
	for _, f := range r.Findings {
		if f.Evidence != nil {
			idx.byCheck[f.Check] = append(idx.byCheck[f.Check], f.Evidence)
		}
	}
	return idx
}

// first is the evidence of the check's first finding that carries key.
func (x evidenceIndex) first(check, key string) map[string]any {
	for _, ev := range x.byCheck[check] {
		if _, ok := ev[key]; ok {
			return ev
		}
	}
	return nil
}

func (x evidenceIndex) ran(check string) bool { return x.checks[check] }

func asSlice(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case []map[string]any:
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = m
		}
		return out
	}
	return nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case float64:
		return num(x)
	}
	return fmt.Sprint(v)
}

func num(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return str(v)
}

func strs(v any) []string {
	var out []string
	for _, x := range asSlice(v) {
		out = append(out, str(x))
	}
	if ss, ok := v.([]string); ok {
		out = append(out, ss...)
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// joinSet sorts and dedupes: two nodes with the same builds in another
// order agree.
func joinSet(vs []string, empty string) string {
	if len(vs) == 0 {
		return empty
	}
	sort.Strings(vs)
	out := vs[:0]
	for i, v := range vs {
		if i == 0 || v != vs[i-1] {
			out = append(out, v)
		}
	}
	return strings.Join(out, ", ")
}

// joinList keeps order: NCCL's interface order matters.
func joinList(vs []string, empty string) string {
	if len(vs) == 0 {
		return empty
	}
	return strings.Join(vs, ", ")
}

// NCCLAddr is the first IPv4 address of the interface NCCL would pick on
// the node (what its peers connect to), or "" when the report has none.
func NCCLAddr(r *report.JSONReport) string {
	idx := indexEvidence(r)
	ev := idx.first("net.interfaces", "selected_nccl_2_28_plus")
	iv := idx.first("net.interfaces", "interfaces")
	if ev == nil || iv == nil {
		return ""
	}
	for _, name := range strs(ev["selected_nccl_2_28_plus"]) {
		for _, x := range asSlice(iv["interfaces"]) {
			m := asMap(x)
			if str(m["name"]) != name {
				continue
			}
			for _, a := range strs(m["addrs"]) {
				if p, err := netip.ParsePrefix(a); err == nil && p.Addr().Is4() {
					return p.Addr().String()
				}
			}
		}
	}
	return ""
}
