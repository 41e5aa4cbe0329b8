package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/report"
)

// BenchmarkAggregate1000 is the scale claim in README: decoding 1,000
// node reports (as they arrive, JSON), extracting their facts, comparing
// them and writing the JSON result. Three nodes carry planted outliers.
func BenchmarkAggregate1000(b *testing.B) {
	const n = 1000
	raw := make([][]byte, n)
	for i := range n {
		s := baseSpec()
		switch i {
		case 17:
			s.nccl = "2.18.1"
		case 500:
			s.mtu = 1500
		case 999:
			s.env = map[string]string{"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5_0"}
		}
		raw[i] = genReportJSON(i, s)
	}
	b.SetBytes(int64(len(raw[0]) * n))
	b.ResetTimer()
	for range b.N {
		nodes := make([]Node, n)
		for i, r := range raw {
			var rep report.JSONReport
			if err := json.Unmarshal(r, &rep); err != nil {
				b.Fatal(err)
			}
			off := time.Duration(i) * time.Microsecond
			nodes[i] = Node{Name: fmt.Sprintf("gpu%04d", i), Status: StatusOK, Report: &rep, ClockOffset: &off}
		}
		res := Aggregate(nodes)
		if len(res.Suspects) != 3 {
			b.Fatalf("suspects %+v", res.Suspects)
		}
		if err := WriteJSON(io.Discard, Run{Engine: "json", GeneratedAt: time.Unix(0, 0)}, res); err != nil {
			b.Fatal(err)
		}
	}
}
