package explain

import (
	"fmt"
	"github.com/ncclwiz/ncclwiz/explain/internal/phrase"
	"sort"
	"strings"

	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// report turns the scan into the ranked diagnosis.
func (s *scan) report() *Report {
	r := &Report{Schema: SchemaVersion, Inputs: s.inputs, Warnings: s.warnings, Diagnoses: []Diagnosis{}}
	if r.Inputs == nil {
		r.Inputs = []InputInfo{}
	}
	r.Digest = s.digest.build()
	r.NCCLVersion = pickVersion(r.Digest)
	r.TorchrunRootCause = s.root
	r.LauncherFailures = s.failures
	r.EarliestFailure = s.earliest
	r.FirstSignature = s.firstSig
	for _, in := range s.inputs {
		if in.TruncatedLines > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %s longer than %d bytes were cut; the start of each was matched", in.Name, units.Count(in.TruncatedLines, "line"), s.maxLine()))
		}
		if in.Binary {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s is not a text log (binary data, %d NUL bytes); its strings were not diagnosed", in.Name, in.NULBytes))
		} else if in.NULBytes > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %d NUL bytes skipped (a file written by a crashed process often has NUL-filled holes)", in.Name, in.NULBytes))
		}
		if in.BadUTF8Lines > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %s not valid UTF-8; their bytes are shown escaped", in.Name, units.Count(in.BadUTF8Lines, "line is", "lines are")))
		}
	}
	if fe := s.firstError(); fe != nil {
		r.FirstError = &fe.line
	}

	// Strings inside a binary (an executable, a core file, a tarball) name
	// every failure ncclwiz knows: when no input is a text log there is
	// nothing to diagnose, and the CLI says so (exit 2).
	if !s.anyText() {
		r.Diagnoses, r.Notes, r.FirstError = []Diagnosis{}, nil, nil
		r.EarliestFailure, r.FirstSignature, r.TorchrunRootCause, r.LauncherFailures = nil, nil, nil, nil
		r.Digest, r.NCCLVersion = nil, ""
		r.Summary = "The input is not a text log (binary data): nothing was diagnosed. Pass the job's console output."
		cleanReport(r)
		return r
	}
	diags := s.diagnoses(r)
	if diags == nil {
		diags = []Diagnosis{}
	}
	r.Diagnoses = diags
	r.Notes = s.buildNotes(diags)
	r.Summary = s.summary(r)
	cleanReport(r)
	return r
}

// anyText reports whether some input was read as a text log (or nothing
// could be read at all, which the CLI reports on its own).
func (s *scan) anyText() bool {
	binary := false
	for _, in := range s.inputs {
		if in.Binary {
			binary = true
		} else if !in.Empty && in.Lines > 0 {
			return true
		}
	}
	return !binary
}

func (s *scan) maxLine() int {
	if s.e.opts.MaxLineBytes > 0 {
		return s.e.opts.MaxLineBytes
	}
	return DefaultMaxLine
}

// pickVersion names the NCCL version: the most widely seen, with its CUDA
// suffix when a line gave one.
func pickVersion(d *Digest) string {
	if d == nil || len(d.Versions) == 0 {
		return ""
	}
	best, bestN := "", -1
	for _, v := range d.Versions {
		n := len(v.Where)*2 + len(v.Version)%2
		if strings.Contains(v.Version, "+cuda") {
			n++
		}
		if n > bestN {
			best, bestN = v.Version, n
		}
	}
	return best
}

// firstError is the earliest non-NCCL error: by timestamp when every error
// has one, else by input order.
func (s *scan) firstError() *errorHit {
	if len(s.errs) == 0 {
		return nil
	}
	allTS := true
	for _, e := range s.errs {
		allTS = allTS && e.ts.OK
	}
	best := &s.errs[0]
	for i := range s.errs {
		e := &s.errs[i]
		if allTS && e.ts.Before(best.ts) {
			best = e
		}
	}
	return best
}

// diagnoses merges, ranks and annotates the signature aggregates.
func (s *scan) diagnoses(r *Report) []Diagnosis {
	// Merge causes and context lines of one guide into its most specific
	// cause: one failure = one guide.
	byGuide := map[string][]*sigAgg{}
	var rest []*sigAgg
	for _, a := range s.aggs {
		if a.def == s.e.transportSig {
			continue
		}
		switch a.def.Role {
		case RoleCause, RoleContext:
			byGuide[a.def.GuideID] = append(byGuide[a.def.GuideID], a)
		default:
			rest = append(rest, a)
		}
	}
	var causes []*merged
	for _, group := range byGuide {
		sort.Slice(group, func(i, j int) bool { return lessAgg(group[i], group[j]) })
		// The primary is the most specific cause; a context line alone
		// (a watchdog status line without its timeout) stands for itself.
		pi := 0
		for i, a := range group {
			if a.def.Role == RoleCause {
				pi = i
				break
			}
		}
		m := &merged{primary: group[pi], all: group}
		causes = append(causes, m)
	}
	var others []*merged
	for _, a := range rest {
		others = append(others, &merged{primary: a, all: []*sigAgg{a}})
	}
	if s.unknown != nil {
		others = append(others, &merged{primary: s.unknown, all: []*sigAgg{s.unknown}})
	}

	// Watchdog decoding.
	var wd *Watchdog
	var wdMerged *merged
	for _, m := range causes {
		for _, a := range m.all {
			if a.def.ID == "watchdog-timeout" || a.def.ID == "watchdog-seq-status" {
				wdMerged = m
			}
		}
	}
	if wdMerged != nil {
		wd = decodeWatchdog(watchdogInput{records: s.wd, seqs: s.wdSeq, ranksSeen: phrase.SortedKeys(s.ranks),
			crashed: s.crashedBefore(wdMerged.primary), transports: s.digest.transports})
	}

	// Root cause: the earliest (or most specific) cause that is not a
	// waiting rank's timeout; failing that a timeout; then a wrapper.
	var direct, wait []*merged
	for _, m := range causes {
		if s.e.isWaiter(m.primary.def.ID) || m.primary.def.Role == RoleContext {
			wait = append(wait, m)
		} else {
			direct = append(direct, m)
		}
	}
	// A DataLoader worker's bus error (its batches did not fit in
	// /dev/shm) is not NCCL's: it is kept aside for a cause outside NCCL.
	direct, others, busDL := splitDataLoaderBus(direct, others)
	orderCauses(direct)
	orderCauses(wait)

	var root *merged
	switch {
	case len(direct) > 0:
		root = direct[0]
	case len(wait) > 0:
		root = wait[0]
	}
	sort.Slice(others, func(i, j int) bool { return lessAgg(others[i].primary, others[j].primary) })
	// A warning whose source file places it in an NCCL subsystem says more
	// than the generic return code PyTorch wraps it in.
	if root == nil && s.unknown != nil && s.unknown.fields["source"] != "" {
		if sub, ok := s.e.subsystemByFile(s.unknown.fields["source"]); ok && !sub.API {
			for _, m := range others {
				if m.primary == s.unknown {
					root = m
				}
			}
		}
	}
	if root == nil {
		for _, m := range others {
			if m.primary.def.Role == RoleWrapper {
				root = m
				break
			}
		}
	}
	if root == nil && s.unknown != nil {
		for _, m := range others {
			if m.primary == s.unknown {
				root = m
			}
		}
	}
	// The unrecognised WARN only speaks when nothing known does.
	if root != nil && root.primary != s.unknown {
		kept := others[:0]
		for _, m := range others {
			if m.primary != s.unknown {
				kept = append(kept, m)
			}
		}
		others = kept
	}

	// torchrun's ChildFailedError follows any worker failure: with no NCCL
	// diagnosis it says nothing about NCCL.
	if root == nil && len(direct) == 0 && len(wait) == 0 {
		kept := others[:0]
		for _, m := range others {
			if !launcherOnly[m.primary.def.ID] {
				kept = append(kept, m)
			}
		}
		others = kept
	}

	var out []Diagnosis
	var trail *Diagnosis
	add := func(m *merged) {
		d := s.diagnosis(m)
		if m == root {
			d.RootCause = true
			if d.Role == RoleWrapper && d.Confidence == Low {
				d.Advice = append(d.Advice, "This is a generic NCCL return code; the cause is NCCL's own warning. Rerun with NCCL_DEBUG=WARN (or INFO) so the WARN line and PyTorch's \"Last error:\" are printed.")
			}
		} else if root != nil && (d.Role != RoleCause || s.e.isWaiter(d.ID)) {
			d.ConsequenceOf = s.aggID(root.primary)
		}
		if trail != nil && (d.Role != RoleCause || s.e.isWaiter(d.ID)) {
			d.ConsequenceOf = trail.ID
		}
		if m == wdMerged && wd != nil {
			d.Watchdog = wd
			d.Advice = append(d.Advice, wd.Advice...)
		}
		out = append(out, d)
	}
	if root != nil {
		add(root)
	}
	// No cause, or only PyTorch's generic wrapper: the first frame of
	// NCCL's return-code trail names the subsystem that failed.
	unplaced := root != nil && root.primary == s.unknown && s.unknown.fields["source"] == ""
	if root == nil || root.primary.def.Role == RoleWrapper || unplaced {
		trail = s.trailDiagnosis(r)
	}
	if trail != nil {
		for i := range out {
			out[i].RootCause, out[i].ConsequenceOf = false, trail.ID
		}
		out = append([]Diagnosis{*trail}, out...)
	}
	for _, m := range append(append([]*merged{}, direct...), wait...) {
		if m != root {
			add(m)
		}
	}
	// Inferences (low confidence).
	out = append(out, s.inferences(root, wd, r)...)
	for _, m := range others {
		if m != root && m.primary.def.Role == RoleWrapper {
			add(m)
		}
	}
	for _, m := range others {
		if m != root && m.primary.def.Role != RoleWrapper {
			add(m)
		}
	}
	// A cause outside NCCL (a Python exception, a host OOM kill…) that the
	// NCCL lines only follow from is the root; they become its knock-on.
	hits := s.nonNCCLCause()
	if busDL != nil && (hits == nil || hits[0].id == idPythonException || hits[0].id == idDataLoaderDied) {
		hits = append([]causeHit{*busDL}, hits...)
	}
	if hits == nil && len(direct) == 0 {
		hits = s.assertFromCUDA(out)
	}
	if hits != nil && nonNCCLWins(hits[0], direct) {
		d := s.causeDiagnosis(hits)
		for i := range out {
			out[i].RootCause, out[i].ConsequenceOf = false, d.ID
		}
		out = append([]Diagnosis{d}, out...)
	}
	out = remotePeerRoot(out)
	out = s.replaced(out)
	out = s.crossChecks(out, r, wd)
	s.culprits(out, wd)
	return s.neverAllClear(out)
}

// remotePeerIDs are the consequences that say a remote rank went away, in
// the order one is named root when nothing else is.
var remotePeerIDs = []string{"peer-closed", "nccl-remote-error"}

// remotePeerRoot names a remote peer's failure as the root when the log
// holds nothing else: this rank saw its peer close or reset the connection
// (gloo's "Connection closed by peer", NCCL's ncclRemoteError with
// "Connection reset by peer"), so the failure is the peer's, and the log
// of the rank that failed first is not here. Saying so beats a report
// with consequences only; the confidence stays medium.
func remotePeerRoot(out []Diagnosis) []Diagnosis {
	for _, d := range out {
		if d.RootCause {
			return out
		}
	}
	for _, id := range remotePeerIDs {
		for i := range out {
			d := &out[i]
			if d.ID != id {
				continue
			}
			d.RootCause, d.ConsequenceOf, d.Confidence = true, "", Medium
			who := "its peer"
			if p := d.Fields["peer"]; p != "" {
				who = "its peer " + p
			}
			d.Advice = append([]string{"The rank that failed first is not in these logs: this rank only saw " + who + " close or reset the connection, so that rank crashed, was killed or lost its network first. Collect the output of every rank and node (e.g. torchrun --tee 3 or per-rank log files) and read that rank's own error."}, d.Advice...)
			for j := range out {
				if j != i && out[j].ConsequenceOf == "" {
					out[j].ConsequenceOf = id
				}
			}
			d0 := *d
			copy(out[1:i+1], out[:i])
			out[0] = d0
			return out
		}
	}
	return out
}

// replaced drops the diagnoses a catalogue cause found beside them reads
// better (its "replaces"); the root moves to the cause when it was one.
func (s *scan) replaced(out []Diagnosis) []Diagnosis {
	drop := map[string]string{}
	for _, d := range out {
		if c := s.e.cat.Causes[d.ID]; c != nil {
			for _, id := range c.Replaces {
				drop[id] = d.ID
			}
		}
	}
	if len(drop) == 0 {
		return out
	}
	kept := out[:0]
	promote := ""
	for _, d := range out {
		if by, ok := drop[d.ID]; ok {
			if d.RootCause {
				promote = by
			}
			continue
		}
		kept = append(kept, d)
	}
	for i := range kept {
		switch {
		case kept[i].ID == promote:
			kept[i].RootCause, kept[i].ConsequenceOf = true, ""
		case promote != "" && kept[i].ConsequenceOf != "":
			if _, ok := drop[kept[i].ConsequenceOf]; ok {
				kept[i].ConsequenceOf = promote
			}
		}
	}
	if promote != "" {
		// The new root leads.
		for i := range kept {
			if kept[i].ID == promote {
				d := kept[i]
				copy(kept[1:i+1], kept[:i])
				kept[0] = d
				break
			}
		}
	}
	return kept
}

// merged is a guide's signatures folded into one diagnosis.
type merged struct {
	primary *sigAgg
	all     []*sigAgg
}

func lessAgg(a, b *sigAgg) bool {
	if a.def.Prec != b.def.Prec {
		return a.def.Prec < b.def.Prec
	}
	return a.firstSeq < b.firstSeq
}

// orderCauses sorts causes by timestamp when every one has a timestamp,
// else by specificity then input order.
func orderCauses(ms []*merged) {
	allTS := true
	for _, m := range ms {
		allTS = allTS && m.primary.earliestTS.OK
	}
	sort.SliceStable(ms, func(i, j int) bool {
		a, b := ms[i].primary, ms[j].primary
		if allTS && a.earliestTS.Sec != b.earliestTS.Sec {
			return a.earliestTS.Before(b.earliestTS)
		}
		return lessAgg(a, b)
	})
}

// crashedBefore lists ranks that failed with their own non-NCCL error and
// did not time out themselves: by timestamp before the timeout, or earlier
// in the same file, or in a rank's log that has no timeout at all.
func (s *scan) crashedBefore(a *sigAgg) map[int]string {
	out := map[int]string{}
	for _, e := range s.errs {
		rank := e.line.Rank
		if rank < 0 {
			continue
		}
		if _, timedOut := s.wd[rank]; timedOut {
			continue
		}
		before := false
		switch {
		case e.ts.OK && a.earliestTS.OK:
			before = e.ts.Before(a.earliestTS)
		case e.line.File == a.first.File:
			before = e.seq < a.firstSeq
		default:
			before = true // another rank's log, which never timed out
		}
		if before {
			if _, ok := out[rank]; !ok {
				out[rank] = errorSummary(e.line.Kind, []byte(e.line.Text))
			}
		}
	}
	return out
}

// diagnosis renders one merged aggregate.
func (s *scan) diagnosis(m *merged) Diagnosis {
	a := m.primary
	d := Diagnosis{ID: a.def.ID, Role: a.def.Role, Guide: a.def.GuideID, Fields: map[string]string{}, Count: 0,
		Checks: []string{}, Fixes: []string{}}
	d.Title = titles[d.ID]
	if g, ok := s.e.lib.Get(a.def.GuideID, s.e.opts.Lang); ok {
		if d.Title == "" {
			d.Title = g.Title
		}
		d.Explanation = g.Summary
		d.Checks = append(d.Checks, g.Checks...)
		d.Fixes = append(d.Fixes, g.Fixes...)
	} else {
		d.Guide = ""
	}
	if cs := a.def.cause; cs != nil {
		// One of the catalogue's causes: its own words.
		d.Title, d.Explanation = cs.Title, cs.Summary
		d.Advice = append(d.Advice, cs.Advice...)
		d.NotNCCL = cs.NotNCCL
	}
	if d.Title == "" {
		d.Title = d.ID
	}
	ranks := map[int]bool{}
	hosts := map[string]bool{}
	seen := map[string]bool{}
	payload, direct, explained := false, false, false
	for _, x := range m.all {
		d.Count += x.count
		payload, direct, explained = payload || x.payload, direct || x.direct, explained || x.explained
		if x != a {
			d.AlsoMatched = append(d.AlsoMatched, x.def.ID)
		}
		for k, v := range x.fields {
			if _, ok := d.Fields[k]; !ok {
				d.Fields[k] = v
			}
		}
		for r := range x.ranks {
			ranks[r] = true
		}
		for h := range x.hosts {
			hosts[h] = true
		}
		for _, ev := range append(append([]Evidence{}, x.evidence...), x.lastErrors...) {
			k := fmt.Sprintf("%s:%d", ev.File, ev.Line)
			if !seen[k] && len(d.Evidence) < s.e.opts.MaxEvidence+len(m.all)-1 {
				seen[k] = true
				d.Evidence = append(d.Evidence, ev)
			}
		}
	}
	sort.Strings(d.AlsoMatched)
	d.Ranks = phrase.SortedKeys(ranks)
	for h := range hosts {
		d.Hosts = append(d.Hosts, h)
	}
	sort.Strings(d.Hosts)
	if d.Evidence == nil {
		d.Evidence = []Evidence{}
	}
	switch {
	case a == s.unknown:
		d.Confidence = Low
		d.Explanation = "NCCL printed a warning that ncclwiz does not recognise. It is the best lead: search for its text in the NCCL issues, and rerun with NCCL_DEBUG=INFO for context."
		if sub, ok := s.placeIn(&d); ok {
			d.Title = "NCCL warning from " + sub.Name
			d.Explanation = "NCCL printed a warning from " + sub.Name + " (" + d.Fields["source"] + ") that is not in ncclwiz's catalogue. It is the best lead: the guide covers that part of NCCL; search for the warning's text in the NCCL issues, and rerun with NCCL_DEBUG=INFO for context."
			if a.catalogued == a.count {
				// Every one of them is a message NCCL's sources print that
				// the catalogue places in this subsystem, deliberately
				// without a cause of its own.
				d.ID = idCatalogWarning
				d.Explanation = "NCCL printed a warning from " + sub.Name + " (" + d.Fields["source"] + "). ncclwiz's catalogue knows the message but it names no single cause: the guide covers that part of NCCL. Rerun with NCCL_DEBUG=INFO for the lines around it."
			}
		}
	case a.def.Role == RoleCause:
		d.Confidence = High
	case a.def.Role == RoleContext:
		d.Confidence = Medium
	case a.def.Role == RoleWrapper:
		if len(a.lastErrors) > 0 || d.Fields["last_error"] != "" || explained {
			d.Confidence = Medium
		} else {
			d.Confidence = Low
		}
	default:
		d.Confidence = High
	}
	if payload && !direct && a.def.Role == RoleCause {
		d.Advice = append(d.Advice, "Found through PyTorch's \"Last error:\" line, which repeats NCCL's last warning.")
	}
	// A CUDA error named anywhere in the evidence says what failed, even
	// when only a generic wrapper matched.
	texts := []string{d.Fields["last_error"], d.Fields["cuda_error"], d.Fields["cuda_name"]}
	for _, ev := range d.Evidence {
		texts = append(texts, ev.Text)
	}
	addCudaError(s.e.cat, &d, texts...)
	switch d.ID {
	case "store-rendezvous-timeout":
		storeDetails(&d)
	case idCollectiveDesync:
		ddpModelDetails(&d)
	case "cuda-init-failure":
		driverDetails(&d)
	}
	return d
}

// inferences adds diagnoses no single line states.
func (s *scan) inferences(root *merged, wd *Watchdog, r *Report) []Diagnosis {
	var out []Diagnosis
	rootIsWaiter := root != nil && (s.e.isWaiter(root.primary.def.ID) || root.primary.def.Role == RoleContext)
	// A hang with every rank present and P2P transports in use: the
	// classic PCIe ACS/IOMMU hang (reference §2 p2p-hang-acs-iommu).
	if wd != nil && wd.Verdict == "hang" && rootIsWaiter && len(wd.Stragglers) == 0 {
		if a := s.aggs[idTransport]; a != nil && s.e.transportSig != nil {
			d := s.diagnosis(&merged{primary: a, all: []*sigAgg{a}})
			d.Confidence, d.Inferred, d.Role = Low, true, RoleCause
			d.ConsequenceOf = ""
			d.Advice = append(d.Advice, "No rank fell behind and GPUs talk peer-to-peer: rerun once with NCCL_P2P_DISABLE=1; if the hang disappears, PCIe ACS or the IOMMU is breaking P2P.")
			out = append(out, d)
		}
	}
	// Several NCCL versions without NCCL's own mismatch warning.
	if r.Digest != nil && len(r.Digest.Versions) > 1 && s.aggs["nccl-version-mismatch"] == nil {
		var vs []string
		for _, v := range r.Digest.Versions {
			vs = append(vs, v.Version)
		}
		if distinctBaseVersions(vs) > 1 {
			if def := s.e.byID["nccl-version-mismatch"]; def != nil {
				a := &sigAgg{def: def, fields: map[string]string{"versions": strings.Join(vs, ", ")}}
				d := s.diagnosis(&merged{primary: a, all: []*sigAgg{a}})
				d.Confidence, d.Inferred = Low, true
				d.Explanation = "The logs name several NCCL versions (" + strings.Join(vs, ", ") + "). If they come from one job, its ranks load different NCCL builds."
				for _, v := range r.Digest.Versions {
					d.Advice = append(d.Advice, fmt.Sprintf("NCCL %s on %s", v.Version, strings.Join(v.Where, ", ")))
				}
				out = append(out, d)
			}
		}
	}
	// A barrier device guess matters when the job hung or two ranks
	// shared a GPU (§1.3: benign only when the mapping is correct).
	if b := s.notes["barrier-device-unknown"]; b != nil && (s.aggs["duplicate-gpu"] != nil || (wd != nil && wd.Verdict == "hang")) {
		d := s.diagnosis(&merged{primary: b, all: []*sigAgg{b}})
		d.Confidence, d.Inferred, d.Role = Low, true, RoleCause
		if root != nil {
			d.ConsequenceOf = ""
		}
		d.Advice = append(d.Advice, "barrier() guessed the GPU from the rank number; if that guess is wrong, ranks wait on the wrong device. Call torch.cuda.set_device(local_rank) before init_process_group, or pass device_id=.")
		out = append(out, d)
	}
	return out
}

// buildNotes lists non-failure findings; a note promoted to a diagnosis is
// not repeated.
func (s *scan) buildNotes(diags []Diagnosis) []Note {
	inDiag := map[string]bool{}
	for _, d := range diags {
		inDiag[d.ID] = true
	}
	var ids []string
	for id := range s.notes {
		if !inDiag[id] {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return s.notes[ids[i]].firstSeq < s.notes[ids[j]].firstSeq })
	var out []Note
	for _, id := range ids {
		a := s.notes[id]
		n := Note{ID: id, Title: titles[id], Guide: a.def.GuideID, Count: a.count, Evidence: a.evidence}
		if n.Title == "" {
			n.Title = id
		}
		if _, ok := s.e.lib.Get(a.def.GuideID, ""); !ok {
			n.Guide = ""
		}
		switch {
		case id == "barrier-device-unknown":
			n.Text = "PyTorch guessed this rank's GPU for barrier(). Harmless when the guess matches the rank's GPU; set the device explicitly (torch.cuda.set_device or device_id=) to be sure."
		case id == "deprecated-env-name":
			n.Text = "An old PyTorch variable name is still set; it works today but should be renamed to its TORCH_ form."
			if v := a.fields; len(v) > 0 {
				var parts []string
				for _, k := range phrase.SortedKeys(v) {
					parts = append(parts, k+"="+v[k])
				}
				n.Text += " (" + strings.Join(parts, ", ") + ")"
			}
		case a.benignName == "cumem-host-fallback":
			n.Title = "cuMem host allocations fell back to /dev/shm"
			n.Text = "NCCL could not use cuMem host memory and used /dev/shm instead. This is informational when every rank falls back; if only some do, ranks can disagree (shm-attach-size0)."
		default:
			n.Text = "Printed by a healthy job too; not a failure."
		}
		out = append(out, n)
	}
	return out
}

// summary says what happened in plain words.
func (s *scan) summary(r *Report) string {
	var lines int64
	empty := true
	for _, in := range r.Inputs {
		lines += in.Lines
		empty = empty && in.Empty
	}
	if len(r.Inputs) > 0 && empty {
		return "The input is empty: there is nothing to explain."
	}
	var b strings.Builder
	var root *Diagnosis
	for i := range r.Diagnoses {
		if r.Diagnoses[i].RootCause {
			root = &r.Diagnoses[i]
		}
	}
	switch {
	case root != nil && root.NotNCCL:
		fmt.Fprintf(&b, "Root cause, not NCCL: %s [%s], %s confidence", root.Title, root.ID, root.Confidence)
		if len(root.Evidence) > 0 {
			ev := root.Evidence[0]
			fmt.Fprintf(&b, ", at %s:%d", ev.File, ev.Line)
		}
		b.WriteString(".")
		if n := len(r.Diagnoses) - 1; n > 0 {
			fmt.Fprintf(&b, " The NCCL and distributed lines (%s) are its knock-on: fix this first; NCCL settings will not help.", units.Count(n, "other finding"))
		} else {
			b.WriteString(" No NCCL failure of its own was found.")
		}
	case root != nil:
		fmt.Fprintf(&b, "Root cause: %s [%s], %s confidence", root.Title, root.ID, root.Confidence)
		if len(root.Evidence) > 0 {
			ev := root.Evidence[0]
			fmt.Fprintf(&b, ", first seen %s at %s:%d", ev.Where(), ev.File, ev.Line)
		}
		b.WriteString(".")
		if w := root.Watchdog; w != nil && len(w.Reasons) > 0 {
			fmt.Fprintf(&b, " Verdict: %s — %s.", w.Verdict, w.Reasons[0])
		}
		n := 0
		for _, d := range r.Diagnoses {
			if d.ConsequenceOf != "" {
				n++
			}
		}
		if n > 0 {
			fmt.Fprintf(&b, " %s from it.", units.Count(n, "other finding follows", "other findings follow"))
		}
	case len(r.Diagnoses) > 0:
		var ids []string
		for _, d := range r.Diagnoses {
			ids = append(ids, d.ID)
		}
		fmt.Fprintf(&b, "Only consequences of a failure were found (%s): the rank that failed first is not in these logs. Collect the output of every rank and node (e.g. torchrun --tee 3 or per-rank log files).", strings.Join(ids, ", "))
		if r.FirstError != nil {
			fmt.Fprintf(&b, " The first other error, likely the cause: %s at %s:%d.", r.FirstError.Words(), r.FirstError.File, r.FirstError.Line)
		}
	default:
		fmt.Fprintf(&b, "No NCCL failure found in %s.", units.Count(lines, "line"))
		if r.FirstError != nil {
			fmt.Fprintf(&b, " The job failed elsewhere: the first error is %s at %s:%d.", r.FirstError.Words(), r.FirstError.File, r.FirstError.Line)
		} else {
			b.WriteString(" No other error was found either.")
		}
	}
	return b.String()
}

// cleanReport sanitises and redacts every string that came from a log.
func cleanReport(r *Report) {
	c := textsafe.Clean
	cleanEv := func(ev *Evidence) {
		ev.File, ev.Text, ev.Host = textsafe.Sanitize(ev.File), c(ev.Text), c(ev.Host)
	}
	cleanList := func(l []string) {
		for i := range l {
			l[i] = c(l[i])
		}
	}
	r.Summary = c(r.Summary)
	r.NCCLVersion = c(r.NCCLVersion)
	for i := range r.Diagnoses {
		d := &r.Diagnoses[i]
		for j := range d.Evidence {
			cleanEv(&d.Evidence[j])
		}
		for k, v := range d.Fields {
			d.Fields[k] = c(v)
		}
		cleanList(d.Hosts)
		cleanList(d.Advice)
		d.Explanation = c(d.Explanation)
		if w := d.Watchdog; w != nil {
			w.OpType = c(w.OpType)
			cleanList(w.Reasons)
			cleanList(w.Advice)
		}
		cleanCross(d, cleanEv)
	}
	for i := range r.Notes {
		n := &r.Notes[i]
		n.Text = c(n.Text)
		for j := range n.Evidence {
			cleanEv(&n.Evidence[j])
		}
	}
	if e := r.FirstError; e != nil {
		cleanEv(&e.Evidence)
		e.Frame = c(e.Frame)
	}
	if e := r.EarliestFailure; e != nil {
		cleanEv(e)
	}
	if f := r.FirstSignature; f != nil {
		f.File = textsafe.Sanitize(f.File)
	}
	if t := r.TorchrunRootCause; t != nil {
		t.File, t.Host, t.Traceback = textsafe.Sanitize(t.File), c(t.Host), c(t.Traceback)
	}
	for i := range r.Inputs {
		r.Inputs[i].Name = textsafe.Sanitize(r.Inputs[i].Name)
		r.Inputs[i].Error = c(r.Inputs[i].Error)
	}
	cleanList(r.Warnings)
	if d := r.Digest; d != nil {
		for i := range d.Versions {
			d.Versions[i].Version = c(d.Versions[i].Version)
			cleanList(d.Versions[i].Where)
		}
		d.Network, d.ErrorOrigin = c(d.Network), c(d.ErrorOrigin)
		for _, l := range [][]string{d.Bootstrap, d.SocketIfs, d.IBDevices, d.RiskyIfs, d.CuMemFallback, d.Readings} {
			cleanList(l)
		}
		env := map[string]string{}
		for k, v := range d.Env {
			env[c(k)] = textsafe.Sanitize(textsafe.RedactEnv(k, v))
		}
		if d.Env != nil {
			d.Env = env
		}
	}
}

// aggID is the diagnosis id an aggregate is reported under (the unknown
// warnings are the catalogue's placed warnings when it knows them all).
func (s *scan) aggID(a *sigAgg) string {
	if a == s.unknown && a.catalogued > 0 && a.catalogued == a.count {
		if _, ok := s.e.cat.SubsystemOf(a.fields["source"]); ok {
			return idCatalogWarning
		}
	}
	return a.def.ID
}
