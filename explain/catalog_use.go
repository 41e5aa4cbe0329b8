package explain

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain/catalog"
	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// The catalogue analysis: a line no guide signature explains is looked up
// in the message catalogue (explain/catalog), which knows every WARN of
// NCCL 2.4-2.30 and the messages of PyTorch, gloo, the launchers and the
// frameworks. A hit names a cause (recorded like a signature's), or places
// an NCCL warning in its subsystem, or is a fact the other analyses use: a
// process that died of a signal and its rank, a framework starting its
// process group, a launcher ending a process. A payload (the error a
// wrapper carries) goes through the whole catalogue again.

// maxCatMemo bounds the per-scan memo of looked-up messages.
const maxCatMemo = 2048

// catState is the catalogue analysis's state for one Analyze call.
type catState struct {
	memo map[catKey]catMemo
	// ended are the PIDs a launcher ended itself (torchrun's "Sending
	// process N closing signal SIGTERM"): the ranks still alive when
	// others failed.
	ended map[int]bool
	// failedLocal are local ranks torchrun reported failed, with their
	// exit codes.
	failedLocal map[int]string
	// mpiFirst is the rank Open MPI names as the first process to exit
	// non-zero (-1 none).
	mpiFirst int
	// namedFailed is a rank a launcher reported as the one that failed
	// (Paddle's "trainer process with rank=[N] was aborted"), -1 none.
	namedFailed int
	// subprocs counts DeepSpeed's launcher's "Killing subprocess N": one
	// per subprocess it started.
	subprocs int
	// inits counts framework "starting the process group" lines.
	inits int
	// retries counts retry warnings by format.
	retries map[string]int
	// unplaced is the first line that reads as a distributed failure
	// and that no analysis explained (never an all-clear on it).
	unplaced *Evidence
}

type catKey struct {
	text string
	nccl bool
	file string
}

type catMemo struct {
	hit catalog.Hit
	ok  bool
}

func newCatState() *catState {
	return &catState{memo: map[catKey]catMemo{}, ended: map[int]bool{}, failedLocal: map[int]string{}, mpiFirst: -1, namedFailed: -1, retries: map[string]int{}}
}

// lookup matches msg in the catalogue, once per distinct line.
func (s *scan) lookup(msg []byte, nccl bool, file string) (catalog.Hit, bool) {
	k := catKey{text: string(msg), nccl: nccl, file: file}
	if v, ok := s.cat.memo[k]; ok {
		return v.hit, v.ok
	}
	h, ok := s.e.cat.Match(catalog.Query{Text: k.text, NCCL: nccl, File: file})
	if len(s.cat.memo) < maxCatMemo {
		s.cat.memo[k] = catMemo{h, ok}
	}
	return h, ok
}

// warnFile is the NCCL source file a WARN line names before "NCCL WARN".
func warnFile(text []byte) string {
	return sourceFile(string(truncText(text)))
}

// catalogWarn looks up an NCCL WARN no signature matched; false when the
// catalogue does not know it either (an unrecognised warning).
func (s *scan) catalogWarn(fs *fileState, ev func() Evidence, m linetext.Meta, text []byte) bool {
	h, ok := s.lookup(bytes.TrimSpace(m.Msg), true, warnFile(text))
	if !ok {
		return false
	}
	switch {
	case h.Role == catalog.RoleBenign || h.Cause == catalog.CauseBenign:
		return true
	case h.Cause == "":
		// Known, and deliberately placed in its subsystem.
		s.unrecognised(fs, ev(), m)
		s.unknown.catalogued++
		return true
	}
	return s.recordCatalog(fs, h, ev(), m, false)
}

// catalogLine looks up a line that is not an NCCL WARN (an exception, a
// launcher's summary, a framework's wrapper); handled tells that the
// catalogue explained it, so that it is not also taken for a Python
// exception of its own. sigHit: a guide signature matched the line already
// (then only its payload and facts are used).
func (s *scan) catalogLine(fs *fileState, m linetext.Meta, ev func() Evidence, sigHit bool) (handled bool) {
	if m.Level == "INFO" || m.Level == "TRACE" {
		return false // NCCL's own INFO lines are the digest's
	}
	msg := bytes.TrimSpace(stripLogLevel(m.Msg))
	if len(msg) == 0 {
		return false
	}
	h, ok := s.lookup(msg, false, "")
	if !ok {
		// An exception whose message is a CUDA error that names a cause
		// of its own (peer access unsupported, no device, Fabric Manager).
		return !sigHit && s.cudaCause(fs, msg, ev, m)
	}
	switch h.Role {
	case catalog.RoleRetry:
		// A retry warning names its cause only when it keeps failing.
		key := h.Message.Formats()[0]
		if s.cat.retries[key]++; s.cat.retries[key] == catalog.RetryCount {
			return s.recordCatalog(fs, h, ev(), m, false)
		}
		return true
	case catalog.RoleSignal:
		s.death(fs, h, ev(), m)
		return true
	case catalog.RoleInit:
		s.cat.inits++
		hg := s.digest.hang
		if r, err := strconv.Atoi(h.Fields["rank"]); err == nil && r >= 0 && r < maxRanksTracked {
			if hg.initRanks == nil {
				hg.initRanks = map[int]bool{}
			}
			hg.initRanks[r] = true
		}
		if w, err := strconv.Atoi(h.Fields["world_size"]); err == nil && w > hg.initWorld {
			hg.initWorld = w
		}
		return false
	case catalog.RoleContext, catalog.RoleBenign:
		s.catalogContext(fs, h)
		return false
	}
	if sigHit {
		if p := s.innerPayload(h); p != "" {
			s.payload(fs, []byte(p), ev(), m)
		}
		return true
	}
	if h.Role == catalog.RoleWrapper {
		// A framework's wrapper of ncclGetErrorString: the wrapper is the
		// return code its payload names, the cause what that payload
		// says when it is a message of its own.
		if h.Payload == "" {
			return false
		}
		ph, pok := s.lookup([]byte(h.Payload), true, "")
		if !pok || ph.Cause == "" || ph.Cause == catalog.CauseBenign {
			return false
		}
		return s.recordCatalog(fs, ph, ev(), m, false)
	}
	if h.Cause == "" || h.Cause == catalog.CauseBenign {
		return false
	}
	return s.recordCatalog(fs, h, ev(), m, false)
}

// innerPayload is the message a hit carries, descending through wrappers
// of wrappers (XLA's "NCCL operation … failed: <code>. Last NCCL warning
// … '<message>'"); "" when it carries none, or only a return code's text.
func (s *scan) innerPayload(h catalog.Hit) string {
	p := h.Payload
	for depth := 0; p != "" && depth < 3; depth++ {
		ph, ok := s.lookup([]byte(p), true, "")
		if !ok {
			return p
		}
		if ph.Message.Kind == "errstr" && ph.Exact {
			return "" // only the return code's text: the wrapper says it already
		}
		if ph.Role != catalog.RoleWrapper || ph.Payload == "" {
			return p
		}
		p = ph.Payload
	}
	return p
}

// catalogPayload looks up a payload ("Last error:", a wrapper's message)
// no signature explained; true when it names a cause.
func (s *scan) catalogPayload(fs *fileState, payload []byte, ev Evidence, m linetext.Meta) bool {
	msg := bytes.TrimSpace(payload)
	h, ok := s.lookup(msg, true, warnFile(msg))
	if ok && h.Role == catalog.RoleWrapper && h.Payload != "" {
		if inner := s.innerPayload(h); inner != "" {
			msg = []byte(inner)
			h, ok = s.lookup(msg, true, warnFile(msg))
		}
	}
	if !ok || h.Cause == "" || h.Cause == catalog.CauseBenign {
		return false
	}
	d := s.e.byID[h.Cause]
	if d == nil || d.Role != RoleCause {
		return false
	}
	return s.recordCatalog(fs, h, ev, m, true)
}

// recordCatalog records a catalogue hit as its cause's diagnosis.
func (s *scan) recordCatalog(fs *fileState, h catalog.Hit, ev Evidence, m linetext.Meta, viaPayload bool) bool {
	def := s.e.byID[h.Cause]
	if def == nil {
		return false
	}
	if viaPayload {
		ev.ViaLastError = true
	}
	a := s.record(s.aggs, sigHit{def: def}, ev, m, fs, viaPayload)
	for k, v := range h.Fields {
		if k == "payload" || v == "" {
			continue
		}
		if k == "culprit" {
			k = "culprit_rank"
		}
		if _, ok := a.fields[k]; !ok {
			a.fields[k] = string(truncText([]byte(v)))
		}
	}
	if _, ok := a.fields["catalogue"]; !ok {
		// Where the message comes from: the program and its source file.
		a.fields["catalogue"] = h.Message.Source + " " + firstFile(h.Message.File)
	}
	s.failureSeen(def, func() Evidence { return ev }, m)
	s.markFailed(fs, def, m)
	if def.Role == RoleWrapper {
		fs.lastWrapper = a
	}
	if h.Payload != "" && h.Role != catalog.RoleWrapper {
		s.payload(fs, []byte(h.Payload), ev, m)
	}
	return true
}

// catalogContext takes the facts of a context line: a launcher ending a
// process, mp.spawn naming the process whose traceback follows, Open MPI
// naming the first process that failed.
func (s *scan) catalogContext(fs *fileState, h catalog.Hit) {
	f := h.Fields
	switch {
	case f["pid"] != "" && strings.HasPrefix(f["signal"], "SIGTERM"):
		if pid, err := strconv.Atoi(f["pid"]); err == nil && len(s.cat.ended) < maxRanksTracked {
			s.cat.ended[pid] = true
		}
	case strings.HasPrefix(h.Message.Formats()[0], "-- Process"):
		if r, err := strconv.Atoi(f["rank"]); err == nil {
			fs.spawnRank, fs.spawnLeft = r, 60
		}
	case strings.HasPrefix(h.Message.Formats()[0], "Killing subprocess"):
		s.cat.subprocs++
	case strings.HasPrefix(h.Message.Formats()[0], "Process name:"):
		if r, err := strconv.Atoi(f["rank"]); err == nil && s.cat.mpiFirst < 0 {
			s.cat.mpiFirst = r
		}
	case f["rank"] != "" && s.cat.namedFailed < 0:
		if r, err := strconv.Atoi(strings.Trim(f["rank"], "[] ")); err == nil {
			s.cat.namedFailed = r
		}
	}
}

// reLocalRankArg is the local rank in a launcher's command list
// ("'--local_rank=3'").
var reLocalRankArg = regexp.MustCompile(`'--local_rank=(\d+)'`)

// signalNames maps the names launchers print to signals.
var signalNames = map[string]int{"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGTRAP": 5, "SIGABRT": 6,
	"SIGBUS": 7, "SIGFPE": 8, "SIGKILL": 9, "SIGSEGV": 11, "SIGPIPE": 13, "SIGTERM": 15,
	"Hangup": 1, "Interrupt": 2, "Illegal instruction": 4, "Aborted": 6, "Bus error": 7, "Floating point exception": 8,
	"Killed": 9, "Segmentation fault": 11, "Terminated": 15, "Out Of Memory": 9}

// signalOf reads a signal field by its head: a format's last field takes
// the rest of its line, and a line held as possibly wrapped may have had
// the next line joined to it ("SIGKILL" + " 41", "Killed" + "$ cat …").
// The longest known name it starts with wins; a number is a number.
func signalOf(v string) int {
	v = strings.TrimSpace(v)
	if n := len(v) - len(strings.TrimLeft(v, "0123456789")); n > 0 {
		sig, _ := strconv.Atoi(v[:n])
		return sig
	}
	sig, best := 0, 0
	for name, n := range signalNames {
		if len(name) > best && strings.HasPrefix(v, name) {
			sig, best = n, len(name)
		}
	}
	return sig
}

// death takes a process death a launcher reported: the rank (global, or
// local when only that is known), the signal, and becomes a non-NCCL
// error of that rank. Exit codes without a signal are only failed ranks.
func (s *scan) death(fs *fileState, h catalog.Hit, ev Evidence, m linetext.Meta) {
	f := h.Fields
	sig := 0
	switch {
	case f["signal"] != "":
		sig = signalOf(f["signal"])
	case f["exitcode"] != "":
		if n, err := strconv.Atoi(f["exitcode"]); err == nil && n < 0 {
			sig = -n
		}
	case f["signame"] != "":
		sig = signalOf(f["signame"])
	}
	rank := -1
	global, local := f["rank"], f["local_rank"]
	if sm := reLocalRankArg.FindStringSubmatch(f["cmd"]); sm != nil && s.cat.subprocs == 1 {
		// DeepSpeed's launcher ran one subprocess: its command is the
		// failed one's. Without a pdsh host prefix it is one node, where
		// the local rank is the rank.
		local = sm[1]
		if m.Host == "" && m.Rank < 0 {
			global = sm[1]
		}
	}
	if r, err := strconv.Atoi(global); err == nil {
		rank = r
	} else if r, err := strconv.Atoi(local); err == nil {
		rank = r
		if len(s.cat.failedLocal) < maxRanksTracked {
			s.cat.failedLocal[r] = f["exitcode"]
		}
	}
	if rank >= 0 && ev.Rank < 0 {
		ev.Rank = rank
		// A signature read this very line without knowing its rank
		// (shm-sigbus on "failed (exitcode: -7) local_rank: 0").
		for _, a := range s.aggs {
			if a.lastSeq == s.seq && len(a.ranks) == 0 {
				a.ranks[rank] = true
				if k := len(a.evidence); k > 0 && a.evidence[k-1].Rank < 0 {
					a.evidence[k-1].Rank = rank
				}
			}
		}
	}
	if pid, err := strconv.Atoi(f["pid"]); err == nil && pid > 0 {
		ev.PID = pid
	}
	if rank >= 0 && m.Rank < 0 {
		m.Rank = rank
	}
	var kind string
	switch sig {
	case 0, 2, 15:
		return // an exit code, an interrupt or the launcher's own teardown
	case 7:
		return // SIGBUS: the shm-sigbus signature reads the same line
	case 9:
		kind = "killed"
	case 11:
		kind = "segfault"
	default:
		kind = "signal"
	}
	if sig != 0 {
		if ev.Text != "" && s.deathSeen(ev.Rank, kind) {
			return
		}
	}
	el := ErrorLine{Kind: kind, Evidence: ev}
	el.Frame = "signal " + strconv.Itoa(sig)
	if len(s.errs) < 64 {
		s.errs = append(s.errs, errorHit{line: el, seq: s.seq, ts: m.TS, file: fs.idx})
	}
}

// deathSeen tells a death of this rank and kind already recorded (a
// launcher prints one death several times: its error line, its summary).
func (s *scan) deathSeen(rank int, kind string) bool {
	for _, e := range s.errs {
		if e.line.Kind == kind && e.line.Rank == rank && rank >= 0 {
			return true
		}
	}
	return false
}

// reDistFailure finds a line that reads as a distributed failure: a
// PyTorch distributed error, an NCCL or gloo error, a launcher's report of
// failed workers. Such a line never leaves the report empty (an
// all-clear): if no analysis explains it, it is the lead.
var reDistFailure = []string{"DistBackendError", "DistStoreError", "DistNetworkError", "ChildFailedError",
	"NCCL error", "NCCL Error", "ncclSystemError", "ncclInternalError", "ncclInvalid", "ncclUnhandled", "ncclRemoteError",
	"[c10d]", "gloo", "ProcessGroup", "torch.distributed", "NCCL WARN", "FAILED", "exitcode"}

// noteUnplaced remembers the first line that reads as a distributed
// failure, for the report to quote when nothing else explains the log.
func (s *scan) noteUnplaced(msg []byte, ev func() Evidence) {
	if s.cat.unplaced != nil {
		return
	}
	low := msg
	if len(low) > 512 {
		low = low[:512]
	}
	hasErr := bytes.Contains(low, []byte("rror")) || bytes.Contains(low, []byte("ailed")) || bytes.Contains(low, []byte("FAILED")) ||
		bytes.Contains(low, []byte("imed out")) || bytes.Contains(low, []byte("exitcode"))
	if !hasErr {
		return
	}
	for _, k := range reDistFailure {
		if bytes.Contains(low, []byte(k)) {
			e := ev()
			s.cat.unplaced = &e
			return
		}
	}
}

// overrideHits replaces a signature that matched a WARN line by its
// wording when the catalogue's value rule says the line means something
// else (an attach that failed with EACCES is not a vanished segment).
func (s *scan) overrideHits(fs *fileState, hits []sigHit, m linetext.Meta, text []byte, ev func() Evidence) []sigHit {
	if m.Level != "WARN" || len(hits) == 0 {
		return hits
	}
	over := false
	for _, h := range hits {
		over = over || s.e.overridable[h.def.ID]
	}
	if !over {
		return hits
	}
	ch, ok := s.lookup(bytes.TrimSpace(m.Msg), true, warnFile(text))
	if !ok || ch.Overrides == "" {
		return hits
	}
	kept := hits[:0]
	for _, h := range hits {
		if h.def.ID != ch.Overrides {
			kept = append(kept, h)
		}
	}
	s.recordCatalog(fs, ch, ev(), m, false)
	return kept
}

// isInitLine tells a framework's "starting the process group" line.
func (s *scan) isInitLine(msg []byte) bool {
	msg = bytes.TrimSpace(msg)
	if len(msg) == 0 {
		return false
	}
	h, ok := s.lookup(msg, false, "")
	return ok && h.Role == catalog.RoleInit
}

// inlineLabelRank reads the rank of a line whose srun labels ("10: ") were
// pasted inline, the lines joined: the same label at least twice inside
// the line. -1 otherwise.
func inlineLabelRank(msg []byte) int {
	if len(msg) > 4096 || bytes.Count(msg, []byte(": ")) < 2 {
		return -1
	}
	counts := map[int]int{}
	for i := 0; i < len(msg); i++ {
		if msg[i] < '0' || msg[i] > '9' || i > 0 && msg[i-1] != ' ' {
			continue
		}
		j := i
		for j < len(msg) && j-i < 6 && msg[j] >= '0' && msg[j] <= '9' {
			j++
		}
		if j+1 < len(msg) && msg[j] == ':' && msg[j+1] == ' ' {
			counts[linetext.Atoi(msg[i:j])]++
		}
		i = j
	}
	best, bestN := -1, 1
	for r, n := range counts {
		if n > bestN || n == bestN && best >= 0 && r < best {
			best, bestN = r, n
		}
	}
	if bestN < 2 {
		return -1
	}
	return best
}

func firstFile(files string) string {
	if i := strings.IndexAny(files, ", "); i >= 0 {
		return files[:i]
	}
	return files
}
