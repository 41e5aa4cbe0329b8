package explain

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// Ranks from the evidence. torchrun's "Root Cause (first observed
// failure)" names the lowest local rank among the failures it saw in one
// poll, not necessarily the rank that failed first: it is the last resort.
// The evidence is the launcher prefixes ([rankN]:, [defaultN]:, srun N:,
// mpirun [1,N]<stderr>:), every entry of torchrun's failure summary (exit
// code, signal, @record error file and traceback), mp.spawn's "Process N"
// headers, Open MPI's and Slurm's per-rank lines, and the processes a
// launcher had to end itself (the ones that were still waiting).

// maxTableEntries bounds the failure-summary entries kept per input.
const maxTableEntries = 64

var (
	reTableEntry = regexp.MustCompile(`^\[(\d+)\]:\s*$`)
	reRootField  = regexp.MustCompile(`^\s*(host|rank|exitcode|traceback|error_file)\s*:\s*(.*?)\s*$`)
	reRootRank   = regexp.MustCompile(`^(\d+)(?: \(local_rank: (\d+)\))?`)
	reRootExit   = regexp.MustCompile(`^(-?\d+)(?: \(pid: (\d+)\))?`)
	reSignalName = regexp.MustCompile(`Signal \d+ \((SIG\w+)\)`)
)

// tableStart opens a section of torchrun's failure summary.
func (s *scan) tableStart(fs *fileState, msg []byte, n int64) {
	t := bytes.TrimSpace(msg)
	switch {
	case bytes.HasPrefix(t, []byte("Root Cause (first observed failure)")):
		fs.tableRoot = true
	case bytes.Equal(t, []byte("Failures:")):
		fs.tableRoot = false
	default:
		return
	}
	fs.rootLeft, fs.entry, fs.traceLeft = 14, nil, 0
}

// maxTraceLines bounds an @record traceback inside one failure-summary
// entry (its frames, then the exception its rank raised).
const maxTraceLines = 400

// rootBlock reads one line of a failure summary's section: "[N]:" opens
// an entry, "key : value" fills it, "=====" ends the summary.
func (s *scan) rootBlock(fs *fileState, msg []byte, n int64) {
	fs.rootLeft--
	t := bytes.TrimSpace(msg)
	if bytes.HasPrefix(t, []byte("=====")) {
		fs.rootLeft, fs.entry = 0, nil
		return
	}
	if reTableEntry.Match(t) {
		if len(fs.entries) >= maxTableEntries {
			fs.rootLeft, fs.entry = 0, nil
			return
		}
		fs.entries = append(fs.entries, TorchrunFailure{File: fs.name, Line: n, Rank: -1, LocalRank: -1, RootCause: fs.tableRoot})
		fs.entry = &fs.entries[len(fs.entries)-1]
		fs.rootLeft, fs.traceLeft = 14, 0
		return
	}
	e := fs.entry
	if e != nil && fs.traceLeft > 0 && !bytes.HasPrefix(t, []byte("-----")) {
		// An @record traceback, the entry's last field: its lines up to
		// the next entry or section are its rank's.
		fs.traceLeft--
		fs.rootLeft = max(fs.rootLeft, 2)
		return
	}
	sm := reRootField.FindSubmatch(msg)
	if sm == nil || e == nil {
		return
	}
	v := string(truncText(sm[2]))
	switch string(sm[1]) {
	case "host":
		e.Host = v
	case "rank":
		if rm := reRootRank.FindStringSubmatch(v); rm != nil {
			e.Rank = linetext.Atoi([]byte(rm[1]))
			if rm[2] != "" {
				e.LocalRank = linetext.Atoi([]byte(rm[2]))
			}
		}
	case "exitcode":
		if em := reRootExit.FindStringSubmatch(v); em != nil {
			e.ExitCode = em[1]
			e.Signal = signalName(em[1])
			if em[2] != "" {
				e.PID = linetext.Atoi([]byte(em[2]))
			}
		}
	case "error_file":
		if v != "<N/A>" {
			e.ErrorFile = v
		}
	case "traceback":
		e.Traceback = v
		if strings.HasPrefix(v, "Traceback") {
			fs.traceLeft = maxTraceLines
		}
		if sn := reSignalName.FindStringSubmatch(v); sn != nil {
			e.Signal = sn[1]
		}
	}
}

// endTables keeps an input's failure-summary entries: the Root Cause entry
// stays torchrun's first observed failure; every entry with a signal is a
// death of its rank.
func (s *scan) endTables(fs *fileState) {
	for i := range fs.entries {
		e := fs.entries[i]
		if e.RootCause && s.root == nil {
			r := e
			s.root = &r
		}
		if len(s.failures) < maxTableEntries*4 {
			s.failures = append(s.failures, e)
		}
		code, err := strconv.Atoi(e.ExitCode)
		if err != nil || code >= 0 || e.Rank < 0 {
			continue
		}
		kind := ""
		switch code {
		case -9:
			kind = "killed"
		case -11:
			kind = "segfault"
		case -2, -15, -7:
			// An interrupt, the launcher's own teardown, or SIGBUS (the
			// shm-sigbus signature reads that exit code itself).
			continue // an interrupt, or the launcher's own teardown
		default:
			kind = "signal"
		}
		if s.deathSeen(e.Rank, kind) {
			// The same death from torchrun's error line (which knew only
			// the local rank): the summary knows the global one.
			continue
		}
		ev := Evidence{File: fs.name, Line: e.Line, Rank: e.Rank, Host: e.Host, PID: e.PID,
			Text: "rank " + strconv.Itoa(e.Rank) + ": exitcode " + e.ExitCode + " " + e.Traceback}
		if len(s.errs) < 64 {
			s.errs = append(s.errs, errorHit{line: ErrorLine{Kind: kind, Evidence: ev, Frame: "signal " + strconv.Itoa(-code)}, seq: s.seq, file: fs.idx})
		}
	}
	fs.entries, fs.entry = nil, nil
}

// oneNode: torchrun's [defaultN]: prefixes name local ranks, which are
// global ranks only when the failure summary says so (one node).
func (s *scan) oneNode() bool {
	one := len(s.failures) > 0
	for _, e := range s.failures {
		one = one && e.Rank == e.LocalRank
	}
	return one
}

// failedRanks are the ranks the launchers reported failed (any exit code),
// and the ranks they reported at all.
func (s *scan) failedRanks() map[int]bool {
	out := map[int]bool{}
	for _, e := range s.failures {
		if e.Rank >= 0 {
			out[e.Rank] = true
		}
	}
	return out
}

// straggler names the one rank that did not fail while the others failed
// waiting for it: ranks seen in the logs (prefixes, summaries) minus the
// ranks that reported a failure or a timeout. A launcher that had to end a
// process itself confirms it. -1 when the evidence does not single one out.
func (s *scan) straggler(reported map[int]bool) int {
	seen := map[int]bool{}
	for r := range s.ranks {
		seen[r] = true
	}
	for r := range s.seenRanks {
		seen[r] = true
	}
	if s.oneNode() {
		for r := range s.seenLocal {
			seen[r] = true
		}
	}
	for _, e := range s.failures {
		if e.Rank >= 0 {
			seen[e.Rank] = true
		}
	}
	failed := s.failedRanks()
	for r := range reported {
		failed[r] = true
	}
	cand := -1
	for r := range seen {
		if failed[r] {
			continue
		}
		if cand >= 0 {
			return -1 // more than one rank stayed silent
		}
		cand = r
	}
	if cand < 0 && len(s.cat.ended) == 1 {
		// torchrun ended one process itself and lists the failed ones:
		// on one node the ranks form 0..n-1, and the one rank the summary
		// does not list is the one it ended.
		ranks := s.failedRanks()
		n := len(ranks) + 1
		for r := 0; r < n; r++ {
			if !ranks[r] {
				if cand >= 0 {
					return -1
				}
				cand = r
			}
		}
	}
	if cand < 0 || len(failed) == 0 {
		return -1
	}
	return cand
}

var reMismatchSide = regexp.MustCompile(`Rank (\d+) is running (?:inconsistent )?collective: CollectiveFingerPrint\((?:SequenceNumber=\d+,? ?)?OpType=(\w+)`)

// culprits names the rank the root diagnosis blames, from the evidence,
// where the diagnosis did not already: a catalogue message that names it
// (the rank that should have published NCCL's unique id), the straggler a
// watchdog decode found, the one rank that stayed silent while the others
// timed out waiting, the rank whose collective differs from everyone
// else's, or the rank a launcher reported failed first.
func (s *scan) culprits(out []Diagnosis, wd *Watchdog) {
	for i := range out {
		d := &out[i]
		if !d.RootCause || d.Culprit != nil {
			continue
		}
		c := -1
		switch {
		case d.Fields["culprit_rank"] != "":
			if n, err := strconv.Atoi(d.Fields["culprit_rank"]); err == nil {
				c = n
			}
		case d.Watchdog != nil && len(d.Watchdog.Stragglers) == 1:
			c = d.Watchdog.Stragglers[0]
		case d.ID == idCollectiveDesync:
			c = oddOneOut(s.desyncOps)
		case s.e.isWaiter(d.ID):
			reported := map[int]bool{}
			for _, r := range d.Ranks {
				reported[r] = true
			}
			c = s.straggler(reported)
			switch {
			case c >= 0:
				d.Advice = append(d.Advice, "Rank "+strconv.Itoa(c)+" is the one that did not report this failure while the others waited for it: read its output first.")
				if d.ID == "gloo-timeout" {
					d.Advice = append(d.Advice, "If rank "+strconv.Itoa(c)+" was alive and busy, the ranks may have called different collectives (one a broadcast, the others an all_reduce): the log cannot tell. Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL, which stops at the first mismatched collective and names the rank that differs.")
				}
			case d.ID == "gloo-timeout" && len(s.failedRanks())+len(reported) > 1:
				d.Advice = append(d.Advice, "Every rank the log shows timed out and none stayed silent: the ranks wait in different collectives (a desync) or all in the same one that never completes. Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL, which stops at the first mismatched collective and names the ranks on each side.")
			}
		case len(d.Ranks) == 0 && s.cat.namedFailed >= 0:
			c = s.cat.namedFailed
		}
		if c >= 0 {
			d.Culprit = &c
		}
	}
}

// desyncSides notes the collective each rank runs in a line of
// PyTorch's "Detected mismatch between collectives" (both sides).
func (s *scan) desyncSides(text string) {
	for _, sm := range reMismatchSide.FindAllStringSubmatch(text, -1) {
		if len(s.desyncOps) < maxRanksTracked {
			s.desyncOps[linetext.Atoi([]byte(sm[1]))] = sm[2]
		}
	}
}

// oddOneOut is the one rank whose collective differs from every other
// rank's, or -1.
func oddOneOut(ops map[int]string) int {
	byOp := map[string][]int{}
	for r, op := range ops {
		byOp[op] = append(byOp[op], r)
	}
	if len(byOp) != 2 {
		return -1
	}
	var small, big []int
	for _, rs := range byOp {
		if small == nil || len(rs) < len(small) {
			small, big = rs, small
		} else {
			big = rs
		}
	}
	if len(small) != 1 || len(big) < 2 {
		return -1
	}
	return small[0]
}

// idUnplaced names a line that reads as a distributed failure and that no
// analysis explained.
const idUnplaced = "unplaced-failure"

// neverAllClear keeps a report with a line that reads as a distributed
// failure (a PyTorch distributed error, an NCCL or gloo error, a
// launcher's failure report) from saying "No NCCL failure found": that
// line becomes a low-confidence diagnosis that quotes it.
func (s *scan) neverAllClear(out []Diagnosis) []Diagnosis {
	if len(out) > 0 {
		return out
	}
	unplaced := s.cat.unplaced
	if unplaced == nil {
		// An exception that names the distributed package (read as the
		// knock-on of a failure no line shows) is no all-clear either.
		for i := range s.errs {
			if l := s.errs[i].line; l.Kind == "python-exception" && reKnockOnMsg.MatchString(l.Text) {
				unplaced = &l.Evidence
				break
			}
		}
	}
	if unplaced == nil {
		return out
	}
	ev := *unplaced
	d := Diagnosis{ID: idUnplaced, Role: RoleCause, RootCause: true, Confidence: Low, Inferred: true,
		Title:       "A distributed failure ncclwiz cannot place: " + linetext.Message(ev.Text),
		Explanation: "This line reads as a failure of PyTorch's distributed package, NCCL, gloo or the launcher, and nothing in ncclwiz's catalogue explains it. It is the best lead: the lines just before it on the same rank usually say why.",
		Evidence:    []Evidence{ev}, Count: 1, Fields: map[string]string{}, Checks: []string{}, Fixes: []string{}, Guide: "reading-nccl-debug",
		Advice: []string{"Rerun with NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL so NCCL and PyTorch say more, and collect every rank's output (torchrun --tee 3)."}}
	if _, ok := s.e.lib.Get(d.Guide, ""); !ok {
		d.Guide = ""
	}
	if ev.Rank >= 0 {
		d.Ranks = []int{ev.Rank}
	}
	return []Diagnosis{d}
}

// tailRanks notes the ranks the launcher prefixes of an input's last lines
// name: a rank that printed and then stayed silent while the others failed
// is seen there.
func (s *scan) tailRanks(t *tailKeeper) {
	for _, l := range t.lines {
		m := linetext.Parse(l)
		if m.Rank >= 0 && len(s.seenRanks) < maxRanksTracked {
			s.seenRanks[m.Rank] = true
		}
		if m.LocalRank >= 0 && len(s.seenLocal) < maxRanksTracked {
			s.seenLocal[m.LocalRank] = true
		}
	}
}
