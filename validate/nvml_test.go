//go:build cgo

package validate

import (
	"context"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/scenario"
)

// The real gpu.Probe against go-nvml's simulated servers (the practice
// scenarios' boxes) feeds the expected-range logic: an H100 DGX is judged
// against the NVLink 4 range; two GeForce cards without P2P use shared
// memory, which is expected there and not judged.
func TestProbedBoxes(t *testing.T) {
	cases := []struct {
		scenario, system, expect string
		env                      []string
		bw                       string
	}{
		{"healthy-h100", "8x NVIDIA H100 80GB HBM3, NVLink 4 between all pairs", "nvlink4-nvswitch", []string{"FAKE_GPUS=8"}, BWOK},
		{"consumer-no-p2p", "2x NVIDIA GeForce RTX 4090, no NVLink, PCIe Gen4 x16", "", []string{"FAKE_GPUS=2", "FAKE_NO_P2P=1"}, BWNotJudged},
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			sc, err := scenario.Build(c.scenario)
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			f := newFakeMachine(t, c.env...)
			f.h.NVML = sc.Host.NVML // a real host whose NVML is the simulated box
			res, err := Run(context.Background(), f.h, Options{Rungs: []string{RungAll}, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.System != c.system {
				t.Errorf("system %q, want %q", res.System, c.system)
			}
			r := rung(t, res, RungAll)
			if r.Status != Pass || r.Bandwidth.State != c.bw {
				t.Fatalf("%s %v %+v", r.Status, r.Reasons, r.Bandwidth)
			}
			if (r.Expected == nil) != (c.expect == "") || (r.Expected != nil && r.Expected.ID != c.expect) {
				t.Errorf("expected %+v, want %q", r.Expected, c.expect)
			}
		})
	}
}
