package render

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain"
)

// Wording helpers of the plain report (the analyses keep their own).

// errWords names a first error in words: its kind and where.
func errWords(e *explain.ErrorLine) string {
	kind := map[string]string{"python-exception": "a Python exception", "cuda-oom": "CUDA running out of memory in the model",
		"killed": "a process killed by SIGKILL", "segfault": "a segmentation fault", "cuda-assert": "a device-side assert in a CUDA kernel"}[e.Kind]
	if kind == "" {
		kind = e.Kind
	}
	if w := whereEv(e.Evidence); w != "" {
		kind += " on " + w
	}
	return kind
}

// whereEv names the rank/host of a line, or "".
func whereEv(ev explain.Evidence) string {
	switch {
	case ev.Rank >= 0 && ev.Host != "":
		return fmt.Sprintf("rank %d (%s)", ev.Rank, ev.Host)
	case ev.Rank >= 0:
		return fmt.Sprintf("rank %d", ev.Rank)
	case ev.Host != "":
		return ev.Host
	}
	return ""
}

func rankList(rs []int) string {
	if len(rs) == 0 {
		return "no rank"
	}
	s := append([]int(nil), rs...)
	sort.Ints(s)
	var parts []string
	for i, r := range s {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("… (%d ranks)", len(s)))
			break
		}
		parts = append(parts, strconv.Itoa(r))
	}
	if len(s) == 1 {
		return "rank " + parts[0]
	}
	return "ranks " + strings.Join(parts, ", ")
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// humanBytes renders a byte count in binary units.
func humanBytes(n int64) string {
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

// humanRate renders bytes per second in decimal units, as link speeds are.
func humanRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.1f GB/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.1f MB/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.1f kB/s", bps/1e3)
	}
	return fmt.Sprintf("%.0f B/s", bps)
}

func humanMS(ms int64) string {
	switch {
	case ms >= 60000 && ms%60000 == 0:
		return fmt.Sprintf("%d min", ms/60000)
	case ms >= 1000:
		return fmt.Sprintf("%.1f s", float64(ms)/1000)
	}
	return fmt.Sprintf("%d ms", ms)
}

func sortedStringKeys(m map[string]string) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}
