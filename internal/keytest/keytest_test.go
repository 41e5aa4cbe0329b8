package keytest

import "testing"

// The names tests use must be the names the models switch on.
func TestPressRoundTrips(t *testing.T) {
	for _, name := range All() {
		if got := Press(name).String(); got != name {
			t.Errorf("Press(%q).String() = %q", name, got)
		}
	}
}
