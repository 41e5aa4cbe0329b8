package explain

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Small helpers of the analyses (explain/render has its own).

// intList joins ranks for a sentence, the first twelve.
func intList(v []int) string {
	var parts []string
	for i, x := range v {
		if i == 12 {
			parts = append(parts, fmt.Sprintf("… (%d)", len(v)))
			break
		}
		parts = append(parts, strconv.Itoa(x))
	}
	return strings.Join(parts, ", ")
}

// limit keeps the first n items and counts the rest.
func limit(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string{}, s[:n]...), fmt.Sprintf("… (%d)", len(s)))
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }
