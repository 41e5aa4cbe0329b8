package validate

import "testing"

// The reasons and hints are sentences of their own, so the CLI's list and
// the wizard's prose read right; the error is one clause.
func TestCannotRunSentences(t *testing.T) {
	for _, c := range []struct {
		reasons, hints []string
		text, err      string
	}{
		{
			reasons: []string{"no usable GPU: no NVIDIA driver found", "the torchrun backend cannot be used: python3 cannot import torch", "the nccl-tests backend cannot be used: all_reduce_perf is not on PATH"},
			hints:   []string{"install PyTorch with CUDA", " ", "pass --gpus N."},
			text:    "No usable GPU: no NVIDIA driver found. The torchrun backend cannot be used: python3 cannot import torch. The nccl-tests backend cannot be used: all_reduce_perf is not on PATH.\n\nInstall PyTorch with CUDA. Pass --gpus N.",
			err:     "a collective test cannot run here: no usable GPU: no NVIDIA driver found",
		},
		{
			reasons: []string{"NVML cannot be loaded"},
			text:    "NVML cannot be loaded.",
			err:     "a collective test cannot run here: NVML cannot be loaded",
		},
		{reasons: []string{"élan vital is missing"}, text: "Élan vital is missing.", err: "a collective test cannot run here: élan vital is missing"},
		{hints: []string{"run it elsewhere"}, text: "Run it elsewhere.", err: "a collective test cannot run here"},
		{text: "", err: "a collective test cannot run here"},
	} {
		e := newCannotRun(c.reasons, c.hints)
		if got := e.Text(); got != c.text {
			t.Errorf("Text() = %q, want %q", got, c.text)
		}
		if got := e.Error(); got != c.err {
			t.Errorf("Error() = %q, want %q", got, c.err)
		}
	}
}
