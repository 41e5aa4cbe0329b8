package dotted

import "testing"

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"2.17", "2.34", -1}, {"12.10", "12.9", 1}, {"11.8", "12.1", -1}, {"12", "12.0", 0},
		{"550.40.07", "550.40.7", 0}, {"2.18.3", "2.18", 1}, {"", "0", 0},
	} {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Compare(c.b, c.a); got != -c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}
