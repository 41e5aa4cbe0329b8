package report

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// HumanEvidence renders a finding's evidence for people (issue 25 item
// 10): plain facts first, then each listed thing on its own line with its
// name first ("nccl-Ab12 — 9.2 MiB, 15 s old, held by pid 20447 python3
// via fd"), sizes and ages in human units, snake_case keys as words, and
// nothing that says nothing (empty, "unknown", raw inode numbers). The raw
// keys and numbers stay in --json. Lines are not wrapped: the caller
// wraps them at its width.
func HumanEvidence(ev map[string]any) []string {
	keys := make([]string, 0, len(ev))
	for k := range ev {
		if !quiet(k, ev[k]) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var facts, lists []string
	for _, k := range keys {
		v := sanitizeValue(ev[k])
		if recs := records(v); recs != nil {
			lists = append(lists, words(k)+":")
			for _, r := range recs {
				lists = append(lists, "  - "+humanRecord(r))
			}
			continue
		}
		facts = append(facts, humanPair(k, v))
	}
	return append(facts, lists...)
}

// quiet reports whether a value says nothing a person needs here.
func quiet(k string, v any) bool {
	if k == "inode" || k == "dev" || strings.HasSuffix(k, "_reason") {
		return true
	}
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == "" || x == "unknown"
	case []any:
		return len(x) == 0
	case []string:
		return len(x) == 0
	case []map[string]any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// records returns v as a list of records, or nil when it is not one.
func records(v any) []map[string]any {
	switch x := v.(type) {
	case []map[string]any:
		return x
	case []any:
		var out []map[string]any
		for _, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				return nil
			}
			out = append(out, m)
		}
		return out
	}
	return nil
}

// nameKeys are the keys that name a record, most telling first.
var nameKeys = []string{"name", "path", "interface", "device", "node", "pid", "id", "rank", "command"}

// humanRecord is one listed thing: its name, then its other facts.
func humanRecord(r map[string]any) string {
	name, used := "", ""
	for _, k := range nameKeys {
		if v, ok := r[k]; ok && !quiet(k, v) {
			name, used = inline(sanitizeValue(v)), k
			if k == "pid" {
				name = "pid " + name
			}
			break
		}
	}
	// A process is its PID and command line.
	if used == "pid" {
		if c, ok := r["command"]; ok && !quiet("command", c) {
			name += ": " + inline(sanitizeValue(c))
		}
	}
	keys := make([]string, 0, len(r))
	for k := range r {
		switch {
		case k == used || quiet(k, r[k]):
		case used == "pid" && k == "command":
		case k == "why" && r["reason"] != nil: // the reason says it in one line
		default:
			keys = append(keys, k)
		}
	}
	sort.SliceStable(keys, func(i, j int) bool {
		return recordRank(keys[i]) < recordRank(keys[j]) || (recordRank(keys[i]) == recordRank(keys[j]) && keys[i] < keys[j])
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, humanPair(k, sanitizeValue(r[k])))
	}
	switch {
	case name == "":
		return strings.Join(parts, ", ")
	case len(parts) == 0:
		return name
	}
	return name + " — " + strings.Join(parts, ", ")
}

// recordRank orders a record's facts: what it is and how big and old
// first, raw identifiers last.
func recordRank(k string) int {
	switch {
	case k == "state" || k == "verdict":
		return 0
	case k == "kind":
		return 1
	case isBytes(k) || k == "age_seconds":
		return 2
	case k == "holders" || k == "reason" || k == "why":
		return 3
	case k == "uid" || k == "ppid" || strings.HasSuffix(k, "_id"):
		return 5
	}
	return 4
}

// humanPair renders one fact: a state alone, an age as "N old", holders as
// "held by …", sizes and durations in human units, other keys as words.
func humanPair(k string, v any) string {
	val := inline(v)
	switch {
	case k == "state":
		if w, ok := procStates[val]; ok {
			return w
		}
		return val
	case k == "verdict" || k == "kind":
		return val
	case k == "age_seconds":
		if n, ok := number(v); ok {
			return duration(n) + " old"
		}
	case k == "holders":
		return "held by " + val
	case isBytes(k):
		if n, ok := number(v); ok && n >= 0 {
			return words(strings.TrimSuffix(k, "_bytes")) + " " + units.Bytes(uint64(n))
		}
	case strings.HasSuffix(k, "_seconds"):
		if n, ok := number(v); ok {
			return words(strings.TrimSuffix(k, "_seconds")) + " " + duration(n)
		}
	case strings.HasSuffix(k, "_ms"):
		if n, ok := number(v); ok {
			return words(strings.TrimSuffix(k, "_ms")) + " " + millis(n)
		}
	case strings.HasSuffix(k, "_percent"):
		return words(strings.TrimSuffix(k, "_percent")) + " " + val + "%"
	}
	if b, ok := v.(bool); ok {
		val = map[bool]string{true: "yes", false: "no"}[b]
	}
	return words(k) + ": " + val
}

// procStates are /proc's one-letter process states in words.
var procStates = map[string]string{"R": "running", "S": "sleeping", "D": "in uninterruptible wait", "Z": "zombie", "T": "stopped", "t": "traced", "I": "idle"}

// isBytes reports whether a key holds a byte count.
func isBytes(k string) bool {
	return strings.HasSuffix(k, "_bytes") || k == "size" || k == "allocated" || k == "memory" || k == "bytes"
}

func words(k string) string { return strings.ReplaceAll(k, "_", " ") }

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case int32:
		return float64(x), true
	case float64:
		return x, true
	case float32:
		return float64(x), true
	}
	return 0, false
}

// duration is a number of seconds for people (units.Duration).
func duration(s float64) string {
	return units.Duration(time.Duration(math.Round(s)) * time.Second)
}

func millis(ms float64) string {
	if ms < 2000 {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return duration(ms / 1000)
}

// WrapEvidence wraps one evidence line at width, continuation lines
// indented under its text (after a list item's "- ").
func WrapEvidence(l string, width int) []string {
	trimmed := strings.TrimLeft(l, " ")
	lead := l[:len(l)-len(trimmed)]
	if strings.HasPrefix(trimmed, "- ") {
		lead += "- "
		trimmed = trimmed[2:]
	}
	out := textwrap.Lines(trimmed, width-len(lead))
	for i := range out {
		if i == 0 {
			out[i] = lead + out[i]
		} else {
			out[i] = strings.Repeat(" ", len(lead)) + out[i]
		}
	}
	return out
}
