package cli

import (
	"os"
	"testing"

	"github.com/ncclwiz/ncclwiz/internal/contain"
)

// TestMain lets this test binary serve as the containment keeper of the
// collective test, as the ncclwiz binary does.
func TestMain(m *testing.M) {
	contain.Main()
	os.Exit(m.Run())
}
