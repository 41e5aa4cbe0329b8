package phrase

import (
	"slices"
	"testing"
)

func TestPhrase(t *testing.T) {
	tests := []struct{ got, want string }{
		// Issue 25 item 15: a 4-byte collective needs less than 1 B/s to
		// finish within a timeout — "0 B/s" read as nothing needed at all.
		{Rate(2 * 4 / 600.0), "less than 1 B/s"},
		{Rate(0), "0 B/s"},
		{Rate(12), "12 B/s"},
		{Rate(2.5e9), "2.5 GB/s"},
		{Bytes(512), "512 B"},
		{Bytes(9 << 20), "9.0 MiB"},
		{Millis(1800000), "30 min"},
		{Millis(1500), "1.5 s"},
		{Millis(200), "200 ms"},
		{RankList(nil), "no rank"},
		{RankList([]int{3}), "rank 3"},
		{RankList([]int{5, 0, 2}), "ranks 0, 2, 5"},
		{IntList([]int{1, 2}), "1, 2"},
		{Or("", "x"), "x"},
		{Or("y", "x"), "y"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if got := Limit([]string{"a", "b", "c"}, 2); !slices.Equal(got, []string{"a", "b", "… (3)"}) {
		t.Errorf("Limit = %q", got)
	}
	if got := SortedKeys(map[string]int{"b": 1, "a": 2}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("SortedKeys = %q", got)
	}
}
