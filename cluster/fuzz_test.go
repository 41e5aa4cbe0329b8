package cluster

import (
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/report"
)

// FuzzAggregateReports: a --from-json file can hold anything that parses
// as a report; extracting facts, comparing and rendering never panic.
func FuzzAggregateReports(f *testing.F) {
	f.Add(string(genReportJSON(1, baseSpec())), `{"findings":[{"check":"net.interfaces","evidence":{"selected_nccl_2_28_plus":"eth0","interfaces":[1,{"name":"eth0","addrs":[null,"x/99"]}]}}]}`)
	f.Add(`{"findings":[{"check":"nccl.stack","evidence":{"nccl_builds":{"a":1}}},{"check":"gpu.inventory","evidence":{"driver":[],"gpus":"x"}}]}`,
		`{"findings":[{"check":"env.nccl","evidence":{"settings":[{"name":"\u001b[2J","value":7}]}},{"check":"host.ipc","evidence":{"memlock":"x"}}]}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		var nodes []Node
		for i, s := range []string{a, b, a} {
			var r report.JSONReport
			if json.Unmarshal([]byte(s), &r) != nil {
				return
			}
			nodes = append(nodes, Node{Name: string(rune('a' + i)), Status: StatusOK, Report: &r})
		}
		res := Aggregate(nodes)
		_ = NCCLAddr(nodes[0].Report)
		run := Run{Engine: "json", GeneratedAt: time.Unix(0, 0)}
		if err := WriteJSON(io.Discard, run, res); err != nil {
			t.Fatal(err)
		}
		if err := WritePlain(termio.New(io.Discard, nil, true), run, res, PlainOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
