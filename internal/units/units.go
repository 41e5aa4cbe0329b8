// Package units formats sizes for people.
package units

import (
	"fmt"
	"strings"
)

// Bytes formats b with binary units: "512 B", "9.2 MiB", "64 MiB".
func Bytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	v := float64(b) / float64(div)
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %ciB", int64(v), "KMGTPE"[exp])
	}
	// 1023.96 KiB rounds to "1024.0"; print it without the ".0".
	return fmt.Sprintf("%s %ciB", strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0"), "KMGTPE"[exp])
}

// Count says "1 GPU" or "8 GPUs": findings read as sentences, not "GPU(s)".
// The plural is singular+"s" unless one is given.
func Count[N ~int | ~int64 | ~uint64](n N, singular string, plural ...string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, singular)
	}
	if len(plural) > 0 {
		return fmt.Sprintf("%d %s", n, plural[0])
	}
	return fmt.Sprintf("%d %ss", n, singular)
}
