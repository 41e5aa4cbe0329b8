package explain

import (
	"fmt"
	"github.com/ncclwiz/ncclwiz/explain/internal/phrase"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/internal/units"
)

// hangBandwidth is the bandwidth below which a timeout cannot be slowness:
// the slowest link NCCL uses in practice (TCP over 1 GbE) moves about
// 110 MB/s, so a collective that needed less than this to finish in time
// was not moving data — a rank was missing or the transport stalled.
const hangBandwidth = 100e6

// DTypeSizes are the element sizes assumed to turn element counts into
// bytes (the log gives counts, not the dtype).
var DTypeSizes = []struct {
	Name string
	Size int64
}{{"float32", 4}, {"bfloat16/float16", 2}, {"int8/float8", 1}}

// wdRecord is one rank's watchdog timeout line.
type wdRecord struct {
	Rank                int
	Seq                 int64 // -1 unknown
	Op                  string
	NumelIn, NumelOut   int64 // -1 unknown
	TimeoutMS, RanForMS int64
	// PG is the process group the line names ("" when it names none):
	// sequence numbers count per group.
	PG string
	ev Evidence
}

// rePG reads the process group of a watchdog line: "[PG 0 Rank 2]",
// "[PG ID 1 PG GUID 1(pp) Rank 3]" (ProcessGroupNCCL's logPrefix).
var rePG = regexp.MustCompile(`\[PG (?:ID )?(\d+)`)

// withLine completes a record from its line: the process group and the
// line itself (a desync names both sides).
func (w wdRecord) withLine(ev Evidence) wdRecord {
	if sm := rePG.FindStringSubmatch(ev.Text); sm != nil {
		w.PG = sm[1]
	}
	w.ev = ev
	return w
}

// seqRecord is one rank's "last enqueued / completed" status line.
type seqRecord struct {
	Rank                  int
	TimeoutSeq            int64 // -1 when not printed
	LastEnq, LastComplete int64
}

// watchdogInput is what the scan collected for the decoder.
type watchdogInput struct {
	records    map[int]wdRecord  // by rank (-1: rank unknown)
	seqs       map[int]seqRecord // by rank
	ranksSeen  []int             // ranks with any output in the logs
	crashed    map[int]string    // rank → first non-NCCL error, before the timeout
	transports map[string]int
}

func parseInt64(s string, def int64) int64 {
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return def
	}
	return n
}

// recordFromFields builds a wdRecord from the watchdog-timeout signature's
// captures (fields seq, op, numel_in, numel_out, timeout_ms, ran_ms; by
// position when the guide names them differently).
func recordFromFields(rank int, caps []string) wdRecord {
	get := func(i int) string {
		if i < len(caps) {
			return caps[i]
		}
		return ""
	}
	return wdRecord{
		Rank: rank, Seq: parseInt64(get(0), -1), Op: get(1),
		NumelIn: parseInt64(get(2), -1), NumelOut: parseInt64(get(3), -1),
		TimeoutMS: parseInt64(get(4), 0), RanForMS: parseInt64(get(5), 0),
	}
}

// decodeWatchdog explains a watchdog timeout: sizes, the bandwidth that was
// needed, and whether it was a hang or slowness.
func decodeWatchdog(in watchdogInput) *Watchdog {
	if len(in.records) == 0 && len(in.seqs) == 0 {
		return nil
	}
	w := &Watchdog{SeqNum: -1, NumelIn: -1, NumelOut: -1}
	// The representative record: the lowest known rank.
	ranks := phrase.SortedKeys(in.records)
	if len(ranks) > 0 {
		r := in.records[ranks[0]]
		for _, k := range ranks {
			if k >= 0 {
				r = in.records[k]
				break
			}
		}
		w.SeqNum, w.OpType, w.NumelIn, w.NumelOut = r.Seq, r.Op, r.NumelIn, r.NumelOut
		w.TimeoutMS, w.RanForMS = r.TimeoutMS, r.RanForMS
	}
	for _, k := range ranks {
		if k >= 0 {
			w.TimedOutRanks = append(w.TimedOutRanks, k)
		}
	}
	numel := max(w.NumelIn, w.NumelOut)
	if numel >= 0 && w.TimeoutMS > 0 {
		w.Bytes = map[string]int64{}
		w.NeededBytesPerSec = map[string]float64{}
		for _, d := range DTypeSizes {
			b := numel * d.Size
			w.Bytes[d.Name] = b
			// An all-reduce moves each byte about twice (reduce-scatter
			// then all-gather); other collectives move it once. Use the
			// larger figure: it is the most generous to "too slow".
			w.NeededBytesPerSec[d.Name] = 2 * float64(b) / (float64(w.TimeoutMS) / 1000)
		}
	}

	hang := false
	reason := func(format string, a ...any) {
		w.Reasons = append(w.Reasons, fmt.Sprintf(format, a...))
		hang = true
	}
	stragglers := map[int]bool{}

	// Ranks disagree on the sequence number of the timed-out work.
	seqs := map[int64][]int{}
	for _, k := range ranks {
		if r := in.records[k]; r.Seq >= 0 && k >= 0 {
			seqs[r.Seq] = append(seqs[r.Seq], k)
		}
	}
	if len(seqs) > 1 {
		var parts []string
		for _, s := range phrase.SortedKeys(seqs) {
			parts = append(parts, fmt.Sprintf("SeqNum=%d on %s", s, phrase.RankList(seqs[s])))
		}
		reason("ranks timed out on different collectives (%s): they took different code paths or one fell behind", strings.Join(parts, ", "))
		lowest := phrase.SortedKeys(seqs)[0]
		for _, r := range seqs[lowest] {
			stragglers[r] = true
		}
	}
	// Status lines: the rank(s) that enqueued the least work fell behind.
	if len(in.seqs) > 0 {
		w.SeqByRank = map[string]SeqStatus{}
		enq := map[int64][]int{}
		allIdle := true
		for _, k := range phrase.SortedKeys(in.seqs) {
			s := in.seqs[k]
			if k >= 0 {
				w.SeqByRank[strconv.Itoa(k)] = SeqStatus{TimeoutSeq: s.TimeoutSeq, LastEnqueued: s.LastEnq, LastCompleted: s.LastComplete}
				enq[s.LastEnq] = append(enq[s.LastEnq], k)
			}
			if s.LastEnq != -1 {
				allIdle = false
			}
		}
		if len(enq) > 1 {
			keys := phrase.SortedKeys(enq)
			low := keys[0]
			reason("%s enqueued work only up to %d while %s reached %d: the lower rank never reached the collective",
				phrase.RankList(enq[low]), low, phrase.RankList(enq[keys[len(keys)-1]]), keys[len(keys)-1])
			for _, r := range enq[low] {
				stragglers[r] = true
			}
		}
		if allIdle {
			reason("no collective was in flight on any rank (last enqueued work -1): the processes were frozen (storage stall, swap, a lock), not waiting on NCCL")
		}
	}
	// Ranks with output in the logs that did not time out. When most ranks
	// timed out and a few did not, those few never arrived. When many are
	// silent it proves little: the launcher often kills the others before
	// their own watchdog fires.
	if len(w.TimedOutRanks) > 0 {
		timed := map[int]bool{}
		for _, r := range w.TimedOutRanks {
			timed[r] = true
		}
		for _, r := range in.ranksSeen {
			if timed[r] {
				continue
			}
			if _, hasSeq := in.seqs[r]; hasSeq {
				continue // it reported its queue instead; judged above
			}
			w.SilentRanks = append(w.SilentRanks, r)
		}
		sort.Ints(w.SilentRanks)
		if n := len(w.SilentRanks); n > 0 {
			if len(w.TimedOutRanks) >= 2 && len(w.TimedOutRanks) >= 2*n {
				reason("%s printed output but never timed out while %d other ranks did: it never reached the collective", phrase.RankList(w.SilentRanks), len(w.TimedOutRanks))
				for _, r := range w.SilentRanks {
					stragglers[r] = true
				}
			} else {
				w.Reasons = append(w.Reasons, fmt.Sprintf("%s printed output but no timeout: either they never reached the collective or the launcher stopped them before their own watchdog fired", phrase.RankList(w.SilentRanks)))
			}
		}
	}
	// A rank that failed with its own error before the timeout.
	for _, r := range phrase.SortedKeys(in.crashed) {
		if r >= 0 {
			reason("rank %d failed first (%s), so it never joined the collective", r, in.crashed[r])
			stragglers[r] = true
		}
	}
	// Bandwidth.
	if need, ok := w.NeededBytesPerSec["float32"]; ok {
		if need < hangBandwidth {
			reason("finishing in time needed only %s even as float32; every NCCL transport is faster, so data was not moving", phrase.Rate(need))
		}
	}
	if w.OpType == "BARRIER" || (numel >= 0 && numel <= 1) {
		reason("a %s of %s cannot take %s unless a rank is missing", strings.ToLower(phrase.Or(w.OpType, "collective")), units.Count(max(numel, 0), "element"), phrase.Millis(w.TimeoutMS))
	}

	for r := range stragglers {
		w.Stragglers = append(w.Stragglers, r)
	}
	sort.Ints(w.Stragglers)
	switch {
	case hang:
		w.Verdict = "hang"
	case len(w.NeededBytesPerSec) > 0:
		w.Verdict = "too-slow"
		w.Reasons = append(w.Reasons, fmt.Sprintf("moving %s within %s needs %s (float32): a slow transport could plausibly miss that",
			phrase.Bytes(w.Bytes["float32"]), phrase.Millis(w.TimeoutMS), phrase.Rate(w.NeededBytesPerSec["float32"])))
	default:
		w.Verdict = "unknown"
		w.Reasons = append(w.Reasons, "the log does not give the tensor sizes (older PyTorch) and all ranks agree; compare SeqNum and last enqueued work across every rank's log")
	}
	w.Advice = watchdogAdvice(w, in)
	return w
}

func watchdogAdvice(w *Watchdog, in watchdogInput) []string {
	var a []string
	p2p := in.transports["P2P/IPC"] + in.transports["P2P/CUMEM"] + in.transports["P2P"]
	slow := in.transports["NET/Socket"] + in.transports["SHM"]
	switch w.Verdict {
	case "hang", "unknown":
		if len(w.Stragglers) > 0 {
			a = append(a, fmt.Sprintf("Look at what %s was doing before the timeout: its own traceback, an OOM kill (exitcode -9), or a long step only it runs (checkpointing, evaluation, data preparation on rank 0).", phrase.RankList(w.Stragglers)))
		} else {
			a = append(a, "Find the rank that did not arrive: compare SeqNum and last enqueued work across every rank's log; the lowest is the straggler.")
		}
		a = append(a,
			"While a job hangs, `py-spy dump --pid <PID>` on each rank shows where it waits.",
			"Next run, set TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1 to get a flight-recorder dump per rank (/tmp/nccl_trace_rank_<N>), and TORCH_NCCL_DESYNC_DEBUG=1 to name the rank that fell out of step.")
		if p2p > 0 && len(in.crashed) == 0 {
			a = append(a, "If every rank did arrive, a PCIe peer-to-peer hang (ACS/IOMMU) looks exactly like this; test with NCCL_P2P_DISABLE=1 (see the p2p-acs-iommu guide).")
		}
		a = append(a, "A longer timeout does not fix a hang; it only makes you wait longer.")
	case "too-slow":
		a = append(a, "Raise the timeout for this phase: init_process_group(backend=\"nccl\", timeout=datetime.timedelta(minutes=60)). NCCL has no timeout variable of its own.")
		if slow > 0 {
			a = append(a, "The digest shows traffic over NET/Socket or SHM; check why a faster transport (P2P, NVLink, InfiniBand) was not used.")
		}
	}
	return a
}

// desyncDiagnosis: ranks that timed out at the same sequence number of the
// same process group in different collectives (another OpType, or other
// sizes) run different code — a program-order bug, not the network
// (PyTorch's desync debug and fr_trace make the same comparison).
func (s *scan) desyncDiagnosis(wd *Watchdog) *Diagnosis {
	if wd == nil || len(s.wd) < 2 {
		return nil
	}
	type key struct {
		pg  string
		seq int64
	}
	groups := map[key]map[string][]int{}
	evs := map[string]Evidence{}
	for _, rank := range phrase.SortedKeys(s.wd) {
		r := s.wd[rank]
		if rank < 0 || r.Seq < 0 || r.Op == "" {
			continue
		}
		k := key{r.PG, r.Seq}
		what := r.Op
		if r.NumelIn >= 0 {
			what += fmt.Sprintf(" NumelIn=%d NumelOut=%d", r.NumelIn, r.NumelOut)
		}
		if groups[k] == nil {
			groups[k] = map[string][]int{}
		}
		groups[k][what] = append(groups[k][what], rank)
		if _, ok := evs[what]; !ok {
			evs[what] = r.ev
		}
	}
	var keys []key
	for k, g := range groups {
		if len(g) > 1 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].seq < keys[j].seq || keys[i].seq == keys[j].seq && keys[i].pg < keys[j].pg
	})
	k := keys[0]
	d := &Diagnosis{ID: idCollectiveDesync, Role: RoleCause, Inferred: true, Confidence: Medium, Guide: idCollectiveDesync,
		Title: "Ranks are in different collectives (desync)", Fields: map[string]string{"seq": fmt.Sprint(k.seq)},
		Checks: []string{}, Fixes: []string{}}
	if k.pg != "" {
		d.Fields["pg"] = k.pg
	}
	if g, ok := s.e.lib.Get(idCollectiveDesync, s.e.opts.Lang); ok {
		d.Checks = append(d.Checks, g.Checks...)
	} else {
		d.Guide = ""
	}
	dis := Disagreement{Fact: "collective"}
	var whats []string
	for w := range groups[k] {
		whats = append(whats, w)
	}
	sort.Strings(whats)
	var parts []string
	for _, w := range whats {
		ranks := groups[k][w]
		ev := evs[w]
		where := make([]string, 0, len(ranks))
		for _, r := range ranks {
			where = append(where, "rank "+strconv.Itoa(r))
		}
		dis.Values = append(dis.Values, FactValue{Value: w, Where: where, Evidence: &ev})
		d.Evidence = append(d.Evidence, ev)
		d.Ranks = append(d.Ranks, ranks...)
		parts = append(parts, fmt.Sprintf("%s in %s", phrase.RankList(ranks), w))
	}
	sort.Ints(d.Ranks)
	d.Count = len(d.Ranks)
	d.Disagreements = []Disagreement{dis}
	d.Explanation = fmt.Sprintf("At SeqNum=%d %s: the ranks called different collectives (or different sizes) in the same position. They run different code paths, so they wait for each other forever; the timeouts are its symptom, not a network problem.", k.seq, strings.Join(parts, ", "))
	d.Advice = append(d.Advice,
		"Find the code that makes ranks diverge: a collective under `if rank == 0`, a loop whose length depends on the rank's data, a skipped step, or tensors of different shapes.",
		"Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: PyTorch then checks every collective across ranks and fails at the first mismatch, naming both sides.",
		"TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1 keep a flight-recorder dump per rank; `ncclwiz hang --dumps DIR/nccl_trace_rank_` compares them.")
	return d
}
