package explain

import (
	"slices"
	"strings"
	"testing"
)

func rec(rank int, seq int64, op string, numel int64, timeout int64) wdRecord {
	return wdRecord{Rank: rank, Seq: seq, Op: op, NumelIn: numel, NumelOut: numel, TimeoutMS: timeout, RanForMS: timeout + 43}
}

func TestDecodeWatchdog(t *testing.T) {
	tests := []struct {
		name       string
		in         watchdogInput
		verdict    string
		stragglers []int
		reason     string // substring of some reason
	}{
		{
			name:    "needed bandwidth absurdly low",
			in:      watchdogInput{records: map[int]wdRecord{0: rec(0, 1, "BROADCAST", 131072000, 600000), 1: rec(1, 1, "BROADCAST", 131072000, 600000)}},
			verdict: "hang", reason: "needed only",
		},
		{
			name: "ranks disagree on SeqNum",
			in: watchdogInput{records: map[int]wdRecord{
				0: rec(0, 6336650, "_ALLGATHER_BASE", 3e12, 600000), 1: rec(1, 6336650, "_ALLGATHER_BASE", 3e12, 600000),
				2: rec(2, 6336649, "_ALLGATHER_BASE", 3e12, 600000)}},
			verdict: "hang", stragglers: []int{2}, reason: "different collectives",
		},
		{
			name: "status lines: one rank enqueued less",
			in: watchdogInput{
				records: map[int]wdRecord{0: rec(0, 48213, "ALLREDUCE", 5e12, 600000)},
				seqs:    map[int]seqRecord{0: {0, 48213, 48213, 48212}, 3: {3, -1, 48212, 48212}}},
			verdict: "hang", stragglers: []int{3}, reason: "rank 3 enqueued work only up to 48212",
		},
		{
			name: "one silent rank among many",
			in: watchdogInput{
				records:   map[int]wdRecord{0: rec(0, 9, "ALLREDUCE", 5e12, 600000), 1: rec(1, 9, "ALLREDUCE", 5e12, 600000), 2: rec(2, 9, "ALLREDUCE", 5e12, 600000)},
				ranksSeen: []int{0, 1, 2, 3}},
			verdict: "hang", stragglers: []int{3}, reason: "never timed out",
		},
		{
			name: "many silent ranks prove nothing",
			in: watchdogInput{
				records:   map[int]wdRecord{0: rec(0, 9, "ALLREDUCE", 5e12, 600000)},
				ranksSeen: []int{0, 1, 2, 3}},
			verdict: "too-slow", reason: "stopped them before",
		},
		{
			name: "a rank crashed first",
			in: watchdogInput{
				records: map[int]wdRecord{0: rec(0, 9, "ALLREDUCE", 5e12, 600000)},
				crashed: map[int]string{1: "ValueError"}},
			verdict: "hang", stragglers: []int{1}, reason: "rank 1 failed first (ValueError)",
		},
		{
			name:    "huge tensor on a short timeout: too slow is plausible",
			in:      watchdogInput{records: map[int]wdRecord{0: rec(0, 9, "ALLREDUCE", 4e9, 60000)}},
			verdict: "too-slow", reason: "could plausibly miss",
		},
		{
			name:    "barrier",
			in:      watchdogInput{records: map[int]wdRecord{0: rec(0, 2, "BARRIER", 1, 1800000)}},
			verdict: "hang", reason: "cannot take 30 min",
		},
		{
			name:    "old format without sizes",
			in:      watchdogInput{records: map[int]wdRecord{0: {Rank: 0, Seq: -1, Op: "ALLREDUCE", NumelIn: -1, NumelOut: -1, TimeoutMS: 1800000, RanForMS: 1800100}}},
			verdict: "unknown", reason: "does not give the tensor sizes",
		},
		{
			name:    "frozen processes",
			in:      watchdogInput{seqs: map[int]seqRecord{0: {0, -1, -1, -1}, 1: {1, -1, -1, -1}}},
			verdict: "hang", reason: "no collective was in flight",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := decodeWatchdog(tt.in)
			if w == nil {
				t.Fatal("nil")
			}
			if w.Verdict != tt.verdict {
				t.Errorf("verdict = %s, want %s (reasons %q)", w.Verdict, tt.verdict, w.Reasons)
			}
			if !slices.Equal(w.Stragglers, tt.stragglers) {
				t.Errorf("stragglers = %v, want %v", w.Stragglers, tt.stragglers)
			}
			if !strings.Contains(strings.Join(w.Reasons, "\n"), tt.reason) {
				t.Errorf("reasons %q lack %q", w.Reasons, tt.reason)
			}
			if len(w.Advice) == 0 {
				t.Error("no advice")
			}
		})
	}
}

func TestWatchdogSizes(t *testing.T) {
	w := decodeWatchdog(watchdogInput{records: map[int]wdRecord{0: {Rank: 0, Seq: 1, Op: "BROADCAST", NumelIn: 131072000, NumelOut: 131072000, TimeoutMS: 600000, RanForMS: 600081}}})
	if w.Bytes["float32"] != 524288000 || w.Bytes["bfloat16/float16"] != 262144000 || w.Bytes["int8/float8"] != 131072000 {
		t.Errorf("bytes = %v", w.Bytes)
	}
	// 2 × 524288000 B in 600 s.
	if got := w.NeededBytesPerSec["float32"]; got < 1747626 || got > 1747627 {
		t.Errorf("needed = %f", got)
	}
	if w.SeqNum != 1 || w.OpType != "BROADCAST" || w.RanForMS != 600081 {
		t.Errorf("decoded %+v", w)
	}
}

func TestAdviceNamesOnlySuggestibleVariables(t *testing.T) {
	w := decodeWatchdog(watchdogInput{records: map[int]wdRecord{0: rec(0, 1, "ALLREDUCE", 100, 600000)}, transports: map[string]int{"P2P/IPC": 4}})
	s := decodeWatchdog(watchdogInput{records: map[int]wdRecord{0: rec(0, 1, "ALLREDUCE", 4e9, 60000)}, transports: map[string]int{"SHM": 4}})
	checkVarsSuggestible(t, append(w.Advice, s.Advice...))
}
