// Package units formats sizes, counts and durations for people.
package units

import (
	"fmt"
	"strings"
	"time"
)

// Duration is an age or a span for people, to the unit that matters:
// "15 s", "4 min", "2 h 5 min", "3 days" (a negative one, from a clock
// that went back, is "0 s").
func Duration(d time.Duration) string {
	n := int64(d.Round(time.Second) / time.Second)
	switch {
	case n < 0:
		return "0 s"
	case n < 120:
		return fmt.Sprintf("%d s", n)
	case n < 2*3600:
		return fmt.Sprintf("%d min", n/60)
	case n < 48*3600:
		if m := (n % 3600) / 60; m > 0 {
			return fmt.Sprintf("%d h %d min", n/3600, m)
		}
		return fmt.Sprintf("%d h", n/3600)
	}
	return fmt.Sprintf("%d days", n/86400)
}

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
// The plural is singular+"s" unless one is given; thousands are grouped
// ("1,024 ranks").
func Count[N ~int | ~int64 | ~uint64](n N, singular string, plural ...string) string {
	word := singular + "s"
	switch {
	case n == 1:
		word = singular
	case len(plural) > 0:
		word = plural[0]
	}
	return Digits(n) + " " + word
}

// Word is the form of a word that agrees with n, without the number:
// Word(n, "holds", "hold"), Word(n, "entry", "entries").
func Word[N ~int | ~int64 | ~uint64](n N, singular, plural string) string {
	if n == 1 {
		return singular
	}
	return plural
}

// Digits writes n with its thousands grouped: "9,637,892".
func Digits[N ~int | ~int64 | ~uint64](n N) string {
	s := fmt.Sprint(n)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(s[i])
	}
	return sign + b.String()
}
