package polltest

import (
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	if !Until(time.Minute, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("Until stopped after %d calls, want 3", n)
	}
	if Until(0, func() bool { return false }) {
		t.Error("Until reported a condition that never held")
	}
}
