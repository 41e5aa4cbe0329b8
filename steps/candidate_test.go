package steps

import (
	"slices"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
)

// The candidate rung runs what the job would have after the fixes: the
// user's NCCL settings without the removed names, with the recommended
// values — not the recommendations alone.
func TestCandidateEnv(t *testing.T) {
	fs := []checks.Finding{
		{Check: "net.interfaces", Severity: checks.Error, Evidence: map[string]any{
			"recommended_env":        map[string]string{"NCCL_SOCKET_IFNAME": "ib0"},
			"recommended_env_reason": map[string]string{"NCCL_SOCKET_IFNAME": "eth9 does not exist"},
		}},
		{Check: "env.nccl", Severity: checks.Warn, Evidence: map[string]any{
			"recommended_unset": map[string]string{"NCCL_TIMEOUT": "not an NCCL variable"},
		}},
	}
	tests := []struct {
		name string
		env  []string
		fs   []checks.Finding
		want []string
	}{
		{"nothing to change", []string{"NCCL_DEBUG=INFO"}, nil, nil},
		{"set, remove, keep the rest in order",
			[]string{"PATH=/usr/bin", "NCCL_TIMEOUT=1800", "NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME=eth9"}, fs,
			[]string{"NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME=ib0"}},
		{"a recommendation not yet set is added", []string{"NCCL_IB_HCA=mlx5_0"}, fs,
			[]string{"NCCL_IB_HCA=mlx5_0", "NCCL_SOCKET_IFNAME=ib0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CandidateEnv(tt.env, tt.fs); !slices.Equal(got, tt.want) {
				t.Errorf("CandidateEnv = %q, want %q", got, tt.want)
			}
		})
	}
}
