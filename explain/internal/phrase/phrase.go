// Package phrase holds the small helpers the explainer's analyses and its
// renderer share: one implementation, so that a report's sentences and its
// plain rendering say sizes, rates and rank lists the same way (and list
// map keys in one order).
package phrase

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Bytes renders a byte count in binary units ("512 B", "9.0 MiB").
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// Rate renders bytes per second in decimal units, as link speeds are.
func Rate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.1f GB/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.1f MB/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.1f kB/s", bps/1e3)
	case bps > 0 && bps < 1:
		// A 4-byte collective: not "0 B/s", which reads as nothing needed.
		return "less than 1 B/s"
	}
	return fmt.Sprintf("%.0f B/s", bps)
}

// Millis renders a timeout in milliseconds ("30 min", "1.5 s", "200 ms").
func Millis(ms int64) string {
	switch {
	case ms >= 60000 && ms%60000 == 0:
		return fmt.Sprintf("%d min", ms/60000)
	case ms >= 1000:
		return fmt.Sprintf("%.1f s", float64(ms)/1000)
	}
	return fmt.Sprintf("%d ms", ms)
}

// RankList says "rank 3" or "ranks 0, 2, 5", sorted, the first eight.
func RankList(rs []int) string {
	if len(rs) == 0 {
		return "no rank"
	}
	s := slices.Sorted(slices.Values(rs))
	if len(s) == 1 {
		return "rank " + strconv.Itoa(s[0])
	}
	return "ranks " + joinInts(s, 8, " ranks")
}

// IntList joins numbers for a sentence, the first twelve.
func IntList(v []int) string { return joinInts(v, 12, "") }

// joinInts joins the first n of v, then "… (len(v)unit)".
func joinInts(v []int, n int, unit string) string {
	var parts []string
	for i, x := range v {
		if i == n {
			parts = append(parts, fmt.Sprintf("… (%d%s)", len(v), unit))
			break
		}
		parts = append(parts, strconv.Itoa(x))
	}
	return strings.Join(parts, ", ")
}

// Limit keeps the first n items and counts the rest.
func Limit(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("… (%d)", len(s)))
}

// Or is s, or def when s is empty.
func Or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// SortedKeys are a map's keys in order (stable output from maps).
func SortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}
