package hang

import (
	"context"
	"testing"

	"github.com/ncclwiz/ncclwiz/host"
)

// BenchmarkFindJobs reads this machine's process table with the variables
// hang needs and groups the ranks into jobs: the fixed cost of every
// `ncclwiz hang` before its sample interval.
func BenchmarkFindJobs(b *testing.B) {
	h := host.Local(host.LocalOptions{})
	for b.Loop() {
		t, err := ReadTable(context.Background(), h)
		if err != nil {
			b.Fatal(err)
		}
		_ = FindJobs(t)
	}
}
