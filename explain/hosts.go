package explain

import (
	"bytes"
	"fmt"
	"github.com/ncclwiz/ncclwiz/explain/internal/phrase"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// Facts that every host and rank of one job should print alike (issue 15
// class 4). A multi-node log often shows them disagreeing before the error
// lines, which are then only the symptom.
const (
	idHostsDisagree    = "hosts-disagree"
	idCollectiveDesync = "collective-desync"
	idVersionMismatch  = "nccl-version-mismatch"
)

// mustAgreeEnv are NCCL variables whose difference between ranks changes
// what they expect of each other: protocol, algorithm, buffers, channels,
// the network and its devices (NCCL docs, env.html). Others differing is
// reported with low confidence.
var mustAgreeEnv = map[string]bool{
	"NCCL_PROTO": true, "NCCL_ALGO": true, "NCCL_BUFFSIZE": true, "NCCL_MIN_NCHANNELS": true, "NCCL_MAX_NCHANNELS": true,
	"NCCL_IB_DISABLE": true, "NCCL_NET": true, "NCCL_SOCKET_IFNAME": true, "NCCL_IB_HCA": true, "NCCL_NET_GDR_LEVEL": true,
	"NCCL_P2P_DISABLE": true, "NCCL_SHM_DISABLE": true, "NCCL_NVLS_ENABLE": true, "NCCL_IB_GID_INDEX": true,
	"NCCL_SOCKET_FAMILY": true, "NCCL_NET_PLUGIN": true, "NCCL_CUMEM_ENABLE": true, "NCCL_P2P_LEVEL": true,
}

// envIgnored never matters for agreement: logging only.
var envIgnored = map[string]bool{"NCCL_DEBUG": true, "NCCL_DEBUG_SUBSYS": true, "NCCL_DEBUG_FILE": true}

// factVal is one value of a fact: where it was seen and one line.
type factVal struct {
	where map[string]bool
	ev    Evidence
}

// hostsAcc collects facts per host (or per file when lines name no host).
type hostsAcc struct {
	facts map[string]map[string]*factVal // fact → value → where
	order []string                       // facts in first-seen order
	seen  map[string]bool                // hosts that printed NCCL INFO lines
	env   map[string]map[string]bool     // var → hosts where set
	// processes (host → pid) whose first communicator's nranks is known.
	procN map[string]map[int]bool
	// scratch for fact keys and values; the last file's "file NAME".
	key, val            []byte
	lastFile, lastWhere string
}

func newHostsAcc() *hostsAcc {
	return &hostsAcc{facts: map[string]map[string]*factVal{}, seen: map[string]bool{}, env: map[string]map[string]bool{}, procN: map[string]map[int]bool{}}
}

// hostOf names where a line came from: its host, else its file.
func hostOf(m linetext.Meta, file string) string {
	if m.Host != "" {
		return m.Host
	}
	return "file " + file
}

// add notes that where printed value for fact. Keys are looked up as
// bytes and converted only when new: this runs on every INFO line that
// states a fact.
func (h *hostsAcc) add(fact, value []byte, where string, src *lineSrc) {
	vals := h.facts[string(fact)]
	if vals == nil {
		if len(h.facts) >= maxEnvEntries*2 {
			return
		}
		vals = map[string]*factVal{}
		h.facts[string(fact)] = vals
		h.order = append(h.order, string(fact))
	}
	v := vals[string(value)]
	if v == nil {
		if len(vals) >= maxListItems {
			return
		}
		v = &factVal{where: map[string]bool{}, ev: src.evidence()}
		vals[string(value)] = v
	}
	if len(v.where) < maxWhere {
		v.where[where] = true
	}
}

// lineSrc is the line a fact came from, made into evidence only when the
// fact's value is new.
type lineSrc struct {
	line []byte
	m    linetext.Meta
	file string
	n    int64
}

func (l *lineSrc) evidence() Evidence {
	return Evidence{File: l.file, Line: l.n, Text: string(truncText(l.line)), Rank: l.m.Rank, Host: l.m.Host, PID: l.m.PID}
}

// info reads the facts of one NCCL INFO line.
func (h *hostsAcc) info(line []byte, m linetext.Meta, file string, n int64, ip *infoParse) {
	// A host's facts are NCCL's own lines: INFO lines and the version
	// banner. PyTorch's error quoting the version ("NCCL error in: …,
	// NCCL version 2.27.7") under a launcher's tag ("[trainer0|0]:") is no
	// host's report, and the tag need not name a host at all.
	if m.Level != "INFO" && m.Level != "TRACE" && !bytes.HasPrefix(bytes.TrimSpace(m.Msg), []byte("NCCL version")) {
		return
	}
	where := m.Host
	if where == "" {
		if file != h.lastFile || h.lastWhere == "" {
			h.lastFile, h.lastWhere = file, hostOf(m, file)
		}
		where = h.lastWhere
	}
	src := &lineSrc{line: line, m: m, file: file, n: n}
	if m.Host != "" && len(h.seen) < maxHostsTracked {
		h.seen[where] = true
	}
	if sm := ip.version; sm != nil {
		h.add([]byte("nccl-version"), append(append(h.val[:0], sm[1]...), sm[2]...), where, src)
		if len(sm[3]) > 0 {
			h.add([]byte("nccl-cuda-build"), append(append(append(h.val[:0], sm[1]...), "+cuda"...), sm[3]...), where, src)
		}
		return
	}
	if ip.driver != nil {
		h.add([]byte("cuda-driver"), ip.driver, where, src)
		return
	}
	if ip.network != nil {
		h.add([]byte("network"), ip.network, where, src)
		return
	}
	if ip.envOK {
		if envIgnored[string(ip.envName)] {
			return
		}
		h.key = append(append(h.key[:0], "env:"...), ip.envName...)
		h.add(h.key, ip.envValue, where, src)
		hosts := h.env[string(ip.envName)]
		if hosts == nil {
			if len(h.env) >= maxEnvEntries {
				return
			}
			hosts = map[string]bool{}
			h.env[string(ip.envName)] = hosts
		}
		hosts[where] = true
		return
	}
	if sm := ip.boot; sm != nil {
		h.add([]byte("interface"), append(append(append(h.val[:0], sm[1]...), ':'), sm[2]...), where, src)
		return
	}
	// The first communicator of a process is PyTorch's default group: its
	// size must agree everywhere.
	if m.Host == "" || m.PID == 0 {
		return
	}
	if il := ip.init; ip.initOK && !h.procN[m.Host][m.PID] && len(h.procN) < maxHostsTracked {
		if h.procN[m.Host] == nil {
			h.procN[m.Host] = map[int]bool{}
		}
		h.procN[m.Host][m.PID] = true
		h.add([]byte("nranks"), appendInt(h.val[:0], il.nranks), where, src)
	}
}

// hostDisagreements compares the facts. Each returned disagreement has a
// weight: 2 for facts that break a job on their own (network module,
// interface subnets, nranks, variables that must agree), 1 for facts that
// only hint (driver, CUDA build, other variables).
func (h *hostsAcc) disagreements() (out []Disagreement, weight []int) {
	facts := append([]string{}, h.order...)
	// Variables set on some hosts only.
	var envNames []string
	for name := range h.env {
		envNames = append(envNames, name)
	}
	sort.Strings(envNames)
	for _, name := range envNames {
		fact := "env:" + name
		if len(h.facts[fact]) > 1 {
			continue // values differ: compared below
		}
		var unset []string
		for host := range h.seen {
			if !h.env[name][host] {
				unset = append(unset, host)
			}
		}
		vals := h.facts[fact]
		if len(unset) > 0 && len(h.seen) > 1 && vals != nil {
			sort.Strings(unset)
			fv := &factVal{where: map[string]bool{}}
			for _, u := range unset {
				fv.where[u] = true
			}
			vals["(not set)"] = fv
		}
	}
	for _, fact := range facts {
		vals := h.facts[fact]
		if fact == "interface" {
			if len(h.seen) < 2 {
				continue
			}
			if d, ok := subnetDisagreement(vals); ok {
				out, weight = append(out, d), append(weight, 2)
			}
			continue
		}
		if fact == "nccl-cuda-build" {
			vals = sameBaseOnly(vals)
		}
		if len(vals) < 2 || fact == "nccl-version" {
			continue
		}
		d := Disagreement{Fact: fact}
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := vals[k]
			fv := FactValue{Value: k, Where: sortedSet(v.where)}
			if v.ev.Text != "" {
				e := v.ev
				fv.Evidence = &e
			}
			d.Values = append(d.Values, fv)
		}
		w := 1
		switch {
		case fact == "network", fact == "nranks":
			w = 2
		case strings.HasPrefix(fact, "env:") && mustAgreeEnv[strings.TrimPrefix(fact, "env:")]:
			w = 2
		}
		out, weight = append(out, d), append(weight, w)
	}
	return out, weight
}

// subnetDisagreement: hosts whose NCCL interfaces share no /16 (IPv4) or
// /64 (IPv6) with the others cannot usually reach them directly.
func subnetDisagreement(vals map[string]*factVal) (Disagreement, bool) {
	byNet := map[string]*FactValue{}
	hostNet := map[string]string{}
	var names []string
	for v := range vals {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		fv := vals[v]
		name, addr, _ := strings.Cut(v, ":")
		a, err := netip.ParseAddr(strings.Trim(addr, "[]"))
		if err != nil {
			continue
		}
		var p netip.Prefix
		if a.Is4() {
			p, _ = a.Prefix(16)
		} else {
			p, _ = a.Prefix(64)
		}
		key := p.String()
		for host := range fv.where {
			if prev, ok := hostNet[host]; ok && prev != key {
				continue // one host with several interfaces: keep the first
			}
			hostNet[host] = key
			x := byNet[key]
			if x == nil {
				e := fv.ev
				x = &FactValue{Value: key + " (" + name + ")", Evidence: &e}
				byNet[key] = x
			}
			if !slices.Contains(x.Where, host) {
				x.Where = append(x.Where, host)
			}
		}
	}
	if len(byNet) < 2 {
		return Disagreement{}, false
	}
	d := Disagreement{Fact: "interface-subnet"}
	keys := make([]string, 0, len(byNet))
	for k := range byNet {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sort.Strings(byNet[k].Where)
		d.Values = append(d.Values, *byNet[k])
	}
	return d, true
}

// intraDisagreement: GPUs of one host talk peer-to-peer, those of another
// through shared memory (P2P disabled or broken there).
func intraDisagreement(intra map[string]uint8) (Disagreement, bool) {
	names := map[uint8]string{1: "P2P", 2: "SHM", 3: "P2P and SHM"}
	by := map[uint8][]string{}
	for host, bits := range intra {
		by[bits] = append(by[bits], host)
	}
	if len(by) < 2 {
		return Disagreement{}, false
	}
	d := Disagreement{Fact: "transport"}
	for _, bits := range []uint8{1, 2, 3} {
		if hosts := by[bits]; len(hosts) > 0 {
			sort.Strings(hosts)
			d.Values = append(d.Values, FactValue{Value: names[bits], Where: hosts})
		}
	}
	return d, true
}

// sameBaseOnly keeps the CUDA builds of NCCL versions seen with more than
// one build: different versions are nccl-version-mismatch's.
func sameBaseOnly(vals map[string]*factVal) map[string]*factVal {
	n := map[string]int{}
	for v := range vals {
		n[baseVersion(v)]++
	}
	out := map[string]*factVal{}
	for v, fv := range vals {
		if n[baseVersion(v)] > 1 {
			out[v] = fv
		}
	}
	return out
}

func boolKeys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// versionDisagreement is the NCCL versions per host (per process or file
// when the lines name no host), for the nccl-version-mismatch diagnosis.
func versionDisagreement(d *Digest, h *hostsAcc) *Disagreement {
	if d == nil || len(d.Versions) < 2 {
		return nil
	}
	if vals := h.facts["nccl-version"]; len(vals) > 1 {
		n := map[string]bool{}
		for v := range vals {
			n[baseVersion(v)] = true
		}
		if len(n) > 1 {
			out := &Disagreement{Fact: "nccl-version"}
			for _, v := range sortedSet(boolKeys(vals)) {
				e := vals[v].ev
				full := v
				for _, x := range d.Versions {
					if baseVersion(x.Version) == v && strings.Contains(x.Version, "+") {
						full = x.Version
					}
				}
				out.Values = append(out.Values, FactValue{Value: full, Where: sortedSet(vals[v].where), Evidence: &e})
			}
			return out
		}
	}
	var vs []string
	for _, v := range d.Versions {
		vs = append(vs, v.Version)
	}
	if distinctBaseVersions(vs) < 2 {
		return nil
	}
	out := &Disagreement{Fact: "nccl-version"}
	for _, v := range d.Versions {
		out.Values = append(out.Values, FactValue{Value: v.Version, Where: v.Where})
	}
	return out
}

// disagreementText says "network: IB on gpuA; Socket on gpuB".
func disagreementText(d Disagreement) string {
	var parts []string
	for _, v := range d.Values {
		parts = append(parts, fmt.Sprintf("%s on %s", v.Value, strings.Join(phrase.Limit(v.Where, 4), ", ")))
	}
	return d.Fact + ": " + strings.Join(parts, "; ")
}

// genericRoots are roots that a disagreement between hosts explains: what
// ranks see when their peers expect something else.
var genericRoots = map[string]bool{
	"nccl-internal-error": true, "nccl-invalid-usage": true, "nccl-remote-error": true, "nccl-unhandled-system-error": true,
	"peer-closed": true, "proxy-failure": true, "socket-msg-truncated": true, "bootstrap-mismatch": true,
	"nccl-invalid-argument": true, idUnrecognisedWarn: true, idCatalogWarning: true, "nccl-async-teardown": true, "torchrun-child-failed": true,
	idInitHang: true, idCollectiveHang: true,
}

// crossChecks adds what no single line states — a log that just stops,
// hosts that disagree, ranks in different collectives — and makes the
// disagreement the root when what was root is only its symptom.
func (s *scan) crossChecks(out []Diagnosis, r *Report, wd *Watchdog) []Diagnosis {
	// A user's Ctrl-C (KeyboardInterrupt, a launcher's SIGINT) named as a
	// non-NCCL cause is how a hang ends, not a failure of its own.
	failures := false
	for _, d := range out {
		failures = failures || (!d.Inferred && !interruptOnly(d))
	}
	if hd := s.hangDiagnosis(r, failures); hd != nil {
		kept := out[:0]
		for _, d := range out {
			if !interruptOnly(d) {
				kept = append(kept, d)
			}
		}
		hd.RootCause = true
		out = append(kept, *hd)
	}
	if len(out) == 0 {
		return out // a healthy job: differences between hosts are no alarm
	}
	var cands []*Diagnosis
	// Ranks in different collectives at the same sequence number.
	if desync := s.desyncDiagnosis(wd); desync != nil {
		cands = append(cands, desync)
	}
	// Several NCCL versions: the inferred diagnosis gets the table, and
	// Medium when it explains the failure.
	vd := versionDisagreement(r.Digest, s.digest.hosts)
	for i := range out {
		if out[i].ID == idVersionMismatch && vd != nil {
			out[i].Disagreements = append(out[i].Disagreements, *vd)
			for _, v := range vd.Values {
				if v.Evidence != nil && len(out[i].Evidence) < s.e.opts.MaxEvidence {
					out[i].Evidence = append(out[i].Evidence, *v.Evidence)
					out[i].Hosts = append(out[i].Hosts, v.Where...)
				}
			}
			if out[i].Inferred {
				out[i].Confidence = Medium
				cands = append(cands, &out[i])
			}
		}
	}
	if s.digest.hosts != nil {
		ds, ws := s.digest.hosts.disagreements()
		if d, ok := intraDisagreement(s.digest.hang.intra); ok {
			ds, ws = append(ds, d), append(ws, 1)
		}
		if len(ds) > 0 {
			d := s.hostsDiagnosis(ds, ws)
			cands = append(cands, d)
		}
	}
	if len(cands) == 0 {
		return out
	}
	rootIdx := -1
	for i := range out {
		if out[i].RootCause {
			rootIdx = i
		}
	}
	newRoot := cands[0]
	if newRoot.Confidence == Low {
		// A hint (driver, build) explains nothing on its own.
		for _, c := range cands {
			if c.Confidence != Low {
				newRoot = c
				break
			}
		}
	}
	promote := newRoot.Confidence != Low && (rootIdx < 0 || !out[rootIdx].NotNCCL) && (rootIdx < 0 || genericRoots[out[rootIdx].ID] || s.e.isWaiter(out[rootIdx].ID) ||
		out[rootIdx].Role == RoleWrapper || out[rootIdx].Role == RoleConsequence || out[rootIdx].Confidence == Low)
	// Candidates that are not yet in out.
	for _, c := range cands {
		if c.ID != idVersionMismatch {
			out = append(out, *c)
		}
	}
	if !promote {
		for i := range out {
			if !out[i].RootCause && out[i].ConsequenceOf == "" && rootIdx >= 0 && (out[i].ID == idHostsDisagree || out[i].ID == idCollectiveDesync) {
				out[i].Inferred = true
			}
		}
		return out
	}
	var root Diagnosis
	var rest []Diagnosis
	for _, d := range out {
		if d.ID == newRoot.ID && root.ID == "" {
			root = d
			continue
		}
		d.RootCause = false
		d.ConsequenceOf = newRoot.ID
		rest = append(rest, d)
	}
	root.RootCause, root.ConsequenceOf = true, ""
	return append([]Diagnosis{root}, rest...)
}

// cleanCross sanitises and redacts what the hang and host diagnoses copied
// from the logs (cleanReport does the rest of the report).
func cleanCross(d *Diagnosis, cleanEv func(*Evidence)) {
	c := textsafe.Clean
	if st := d.Stop; st != nil {
		for i := range st.LastLines {
			cleanEv(&st.LastLines[i])
		}
	}
	for i := range d.Suspects {
		d.Suspects[i].Why, d.Suspects[i].Command = c(d.Suspects[i].Why), c(d.Suspects[i].Command)
	}
	for i := range d.Disagreements {
		x := &d.Disagreements[i]
		env, isEnv := strings.CutPrefix(x.Fact, "env:")
		x.Fact = c(x.Fact)
		for j := range x.Values {
			v := &x.Values[j]
			if isEnv {
				v.Value = textsafe.Sanitize(textsafe.RedactEnv(env, v.Value))
			} else {
				v.Value = c(v.Value)
			}
			for k := range v.Where {
				v.Where[k] = c(v.Where[k])
			}
			if v.Evidence != nil {
				cleanEv(v.Evidence)
			}
		}
	}
}

// interruptOnly is a non-NCCL diagnosis whose every line is an interrupt.
func interruptOnly(d Diagnosis) bool {
	if !d.NotNCCL || len(d.Evidence) == 0 {
		return false
	}
	for _, ev := range d.Evidence {
		if !reInterrupt.MatchString(ev.Text) {
			return false
		}
	}
	return true
}

// hostsDiagnosis turns disagreements into one diagnosis.
func (s *scan) hostsDiagnosis(ds []Disagreement, ws []int) *Diagnosis {
	d := &Diagnosis{ID: idHostsDisagree, Role: RoleCause, Inferred: true, Confidence: Low, Guide: idHostsDisagree,
		Fields: map[string]string{}, Checks: []string{}, Fixes: []string{}, Disagreements: ds}
	best := 0
	for i, w := range ws {
		if w > ws[best] {
			best = i
		}
		if w >= 2 {
			d.Confidence = Medium
		}
	}
	// The weightiest disagreement first.
	if best > 0 {
		ds[0], ds[best] = ds[best], ds[0]
	}
	d.Title = "Hosts disagree: " + factWords(ds[0].Fact)
	if g, ok := s.e.lib.Get(idHostsDisagree, s.e.opts.Lang); ok {
		d.Checks = append(d.Checks, g.Checks...)
	} else {
		d.Guide = ""
	}
	var facts []string
	hosts := map[string]bool{}
	for _, x := range ds {
		facts = append(facts, x.Fact)
		d.Advice = append(d.Advice, disagreementText(x))
		for _, v := range x.Values {
			if v.Evidence != nil && len(d.Evidence) < s.e.opts.MaxEvidence {
				d.Evidence = append(d.Evidence, *v.Evidence)
			}
			for _, w := range v.Where {
				hosts[w] = true
			}
		}
	}
	seenAdvice := map[string]bool{}
	for _, x := range ds {
		if a := factAdvice(x.Fact); a != "" && !seenAdvice[a] {
			seenAdvice[a] = true
			d.Advice = append(d.Advice, a)
		}
	}
	d.Fields["facts"] = strings.Join(facts, ", ")
	d.Hosts = sortedSet(hosts)
	d.Count = len(ds)
	d.Explanation = "The hosts of this job printed different " + factWords(ds[0].Fact) + " (" + disagreementText(ds[0]) + "). Ranks that disagree on this cannot work together; the errors that follow are its symptom."
	if d.Confidence == Low {
		d.Explanation = "The hosts of this job printed different " + factWords(ds[0].Fact) + " (" + disagreementText(ds[0]) + "). This alone rarely breaks a job, but it shows the nodes are not set up alike."
	}
	if len(d.Evidence) == 0 {
		d.Evidence = []Evidence{}
	}
	return d
}

// factAdvice says how to make the hosts agree on fact.
func factAdvice(fact string) string {
	switch {
	case fact == "network":
		return "Give every node the same network support (libibverbs, the same net plugin and image); while one node lacks InfiniBand, choose sockets on all of them with NCCL_IB_DISABLE=1. `ncclwiz check --only net.rdma` on each node."
	case fact == "interface-subnet":
		return "Pin NCCL_SOCKET_IFNAME to an interface whose subnet every node shares (`ncclwiz check --only net.interfaces` on each node)."
	case fact == "nranks":
		return "Launch every node with the same world size (torchrun --nnodes/--nproc-per-node, WORLD_SIZE, the hostfile's slots)."
	case strings.HasPrefix(fact, "env:"):
		return "Set " + strings.TrimPrefix(fact, "env:") + " in one place that reaches every rank (the job script or the launcher's environment forwarding), or on no node at all."
	case fact == "transport":
		return "GPUs of some hosts do not use peer-to-peer: compare `ncclwiz check --only host.pcie,gpu.topology` and NCCL_P2P_DISABLE / NCCL_P2P_LEVEL on each host."
	case fact == "cuda-driver", fact == "nccl-cuda-build":
		return "Run every node from the same image and driver: `ncclwiz check --only nccl.stack` on each, or `ncclwiz cluster check`."
	}
	return ""
}

func factWords(fact string) string {
	switch {
	case fact == "network":
		return "network modules (InfiniBand vs sockets)"
	case fact == "interface-subnet":
		return "interfaces on different subnets"
	case fact == "nranks":
		return "communicator sizes (nranks)"
	case fact == "cuda-driver":
		return "CUDA driver versions"
	case fact == "transport":
		return "intra-node transports (P2P vs shared memory)"
	case fact == "nccl-cuda-build":
		return "NCCL CUDA builds"
	case strings.HasPrefix(fact, "env:"):
		return "settings of " + strings.TrimPrefix(fact, "env:")
	}
	return fact
}
