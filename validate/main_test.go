package validate

import (
	"os"
	"testing"

	"github.com/ncclwiz/ncclwiz/internal/contain"
)

// TestMain lets this test binary serve as the containment keeper, as the
// ncclwiz binary does (runProcess re-executes /proc/self/exe).
func TestMain(m *testing.M) {
	contain.Main()
	os.Exit(m.Run())
}
