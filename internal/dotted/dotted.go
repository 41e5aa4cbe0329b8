// Package dotted compares dotted version numbers ("2.17", "12.4",
// "550.40.07") number by number, the one way ncclwiz orders the versions
// of glibc, CUDA, torch, NCCL and the driver. A missing part counts as 0
// ("12" == "12.0"); a part that is not a number counts as 0 too.
package dotted

import (
	"strconv"
	"strings"
)

// Compare returns -1, 0 or 1 as a is before, equal to or after b.
func Compare(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Less reports a < b.
func Less(a, b string) bool { return Compare(a, b) < 0 }
