package explain

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain/catalog"
)

// subsystem is the part of NCCL a source file belongs to (the
// catalogue's subsystems: explain/catalog/catalog.yaml). A WARN line or the
// first frame of a return-code trail names the file, and so which part of
// NCCL complained and which guide applies, even when the message itself is
// not in the catalogue.
type subsystem = catalog.Subsystem

// reSrcFile finds NCCL's source location: "graph/search.cc:1023" before
// "NCCL WARN" (2.3+), after a bare "WARN " (1.x), or in an INFO
// return-code frame ("NCCL INFO transport/net_ib.cc:1112 -> 2").
var reSrcFile = regexp.MustCompile(`(?:^|[\s\]])((?:[A-Za-z_][\w.-]*/)*[A-Za-z_][\w-]*\.(?:cc|cu|cpp|c|h)):\d+\b`)

// sourceFile is the first NCCL source file text names, without the
// "src/" of builds that compile NCCL inside another tree (TensorFlow's
// bazel "external/nccl_archive/src/..."); "" when none.
func sourceFile(text string) string {
	sm := reSrcFile.FindStringSubmatch(text)
	if sm == nil {
		return ""
	}
	file := sm[1]
	if i := strings.Index(file, "src/"); i >= 0 && (i == 0 || file[i-1] == '/') {
		file = file[i+len("src/"):]
	}
	return file
}

// subsystemOf names the subsystem of the first NCCL source file in text.
func (e *Explainer) subsystemOf(text string) (file string, sub subsystem, ok bool) {
	file = sourceFile(text)
	if file == "" {
		return "", subsystem{}, false
	}
	sub, ok = e.subsystemByFile(file)
	return file, sub, ok
}

// subsystemByFile places a source file in the catalogue's subsystems.
func (e *Explainer) subsystemByFile(file string) (subsystem, bool) {
	if sp, ok := e.cat.SubsystemOf(file); ok {
		return *sp, true
	}
	return subsystem{}, false
}

// placeIn points d at the guide and checks of the subsystem whose file is
// in d.Fields["source"].
func (s *scan) placeIn(d *Diagnosis) (subsystem, bool) {
	sub, ok := s.e.subsystemByFile(d.Fields["source"])
	if !ok {
		return sub, false
	}
	d.Fields["subsystem"] = sub.Name
	if g, ok := s.e.lib.Get(sub.Guide, s.e.opts.Lang); ok {
		d.Guide = sub.Guide
		d.Checks = d.Checks[:0]
		for _, c := range append(append([]string{}, g.Checks...), sub.Checks...) {
			if !slices.Contains(d.Checks, c) {
				d.Checks = append(d.Checks, c)
			}
		}
		d.Fixes = append(d.Fixes[:0], g.Fixes...)
	}
	return sub, true
}

// idReturnTrail names a failure known only from NCCL's INFO return-code
// trail ("transport/net_ib.cc:1112 -> 2"): no WARN said why.
const idReturnTrail = "nccl-return-trail"

// reTrailFrame splits a trail frame into file, line and ncclResult_t.
var reTrailFrame = regexp.MustCompile(`NCCL INFO ([\w./\-]+\.(?:cc|h|cu|c|cpp)):(\d+) -> (\d+)`)

// trailDiagnosis turns the first frame of the return-code trail into a
// low-confidence diagnosis, with what the digest knows about that
// subsystem (interfaces, devices, transports, versions).
func (s *scan) trailDiagnosis(r *Report) *Diagnosis {
	if s.trail == nil {
		return nil
	}
	sm := reTrailFrame.FindStringSubmatch(s.trail.Text)
	// ncclSuccess and ncclInProgress are no failure; ncclRemoteError is
	// another rank's failure seen from here. A non-NCCL error (a rank
	// killed, a Python exception) is a better first lead than a trail
	// that may only be its knock-on.
	if sm == nil || sm[3] == "0" || sm[3] == "7" || sm[3] == "6" || r.FirstError != nil {
		return nil
	}
	sub, ok := s.e.subsystemByFile(strings.TrimPrefix(sm[1], "src/"))
	if !ok {
		return nil
	}
	result := ncclResultNames[sm[3]]
	if result == "" {
		result = "code " + sm[3]
	}
	d := &Diagnosis{ID: idReturnTrail, Role: RoleCause, Confidence: Low, Inferred: true, RootCause: true,
		Title:       "NCCL failed in " + sub.Name + " (" + result + ")",
		Explanation: "No NCCL warning says where, but NCCL's return-code trail does: its first frame, " + sm[1] + ":" + sm[2] + ", is where the error started.",
		Fields:      map[string]string{"source": strings.TrimPrefix(sm[1], "src/"), "nccl_result": result},
		Evidence:    []Evidence{*s.trail}, Count: 1, Checks: []string{}, Fixes: []string{}}
	if s.trail.Rank >= 0 {
		d.Ranks = []int{s.trail.Rank}
	}
	if s.trail.Host != "" {
		d.Hosts = []string{s.trail.Host}
	}
	s.placeIn(d)
	// A warning without a source file (its prefix cut) may still name
	// the CUDA error behind the trail.
	if s.unknown != nil {
		var texts []string
		for _, ev := range s.unknown.evidence {
			texts = append(texts, ev.Text)
		}
		addCudaError(s.e.cat, d, texts...)
	}
	if dg := r.Digest; dg != nil {
		d.Advice = append(d.Advice, trailFacts(sub, dg)...)
		// A socket failure on an interface other hosts cannot reach is
		// the digest's own diagnosis: the likely cause, not just a lead.
		if len(dg.RiskyIfs) > 0 && slices.Contains([]string{"socket-connect", "socket-interface", "multi-node-basics"}, sub.Guide) {
			d.Confidence = Medium
			d.Fields["risky_interfaces"] = strings.Join(dg.RiskyIfs, ", ")
		}
	}
	d.Advice = append(d.Advice, "Rerun with NCCL_DEBUG=WARN (or INFO) and NCCL_DEBUG_SUBSYS=INIT,NET so the warning that starts this trail is printed.")
	return d
}

// trailFacts are the digest's observations that bear on a subsystem.
func trailFacts(sub subsystem, dg *Digest) []string {
	var out []string
	switch sub.Guide {
	case "socket-connect", "socket-interface", "multi-node-basics":
		if len(dg.Bootstrap) > 0 || len(dg.SocketIfs) > 0 {
			out = append(out, fmt.Sprintf("Interfaces NCCL used: bootstrap %s, sockets %s; every node must reach these addresses (or set NCCL_SOCKET_IFNAME).",
				orNone(dg.Bootstrap), orNone(dg.SocketIfs)))
		}
		if len(dg.RiskyIfs) > 0 {
			out = append(out, riskyAdvice(dg))
		}
	case "ib-roce":
		if len(dg.IBDevices) > 0 {
			out = append(out, "RDMA devices NCCL used: "+strings.Join(dg.IBDevices, ", ")+"; `ncclwiz check --only net.rdma` shows their port state.")
		}
	case "p2p-acs-iommu":
		if n := dg.Transports["P2P/IPC"] + dg.Transports["P2P/CUMEM"] + dg.Transports["P2P/direct"]; n > 0 {
			out = append(out, "GPUs talk peer-to-peer here: rerun once with NCCL_P2P_DISABLE=1; if it passes, P2P is broken on this host (`ncclwiz check --only host.pcie`).")
		}
	case "container-shm":
		out = append(out, "Shared memory failed: `ncclwiz check --only shm.mount,host.container` shows the size of /dev/shm and whether this is a container.")
	}
	if len(dg.Versions) > 1 {
		var vs []string
		for _, v := range dg.Versions {
			vs = append(vs, v.Version)
		}
		out = append(out, "Several NCCL versions in this job: "+strings.Join(vs, ", ")+".")
	}
	return out
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "(not printed)"
	}
	return strings.Join(l, ", ")
}

func riskyAdvice(dg *Digest) string {
	return "Interfaces other nodes usually cannot reach were picked: " + strings.Join(dg.RiskyIfs, ", ") + "; exclude them with NCCL_SOCKET_IFNAME."
}
