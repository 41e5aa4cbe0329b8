package explain

import "testing"

// Issue 25 item 15: a 4-byte collective needs less than 1 B/s to finish
// within a timeout — "0 B/s" read as nothing needed at all.
func TestHumanRateUnderOneByte(t *testing.T) {
	for bps, want := range map[float64]string{2 * 4 / 600.0: "less than 1 B/s", 0: "0 B/s", 12: "12 B/s", 2.5e9: "2.5 GB/s"} {
		if got := humanRate(bps); got != want {
			t.Errorf("humanRate(%v) = %q, want %q", bps, got, want)
		}
	}
}
