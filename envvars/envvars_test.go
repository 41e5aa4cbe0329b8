package envvars

import (
	"regexp"
	"testing"
)

func TestTableIsWellFormed(t *testing.T) {
	name := regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	seen := map[string]bool{}
	for _, v := range table {
		if !name.MatchString(v.Name) {
			t.Errorf("%q: bad name", v.Name)
		}
		if seen[v.Name] {
			t.Errorf("%s listed twice", v.Name)
		}
		seen[v.Name] = true
		if v.Source == "" || v.Meaning == "" || v.Status == "" {
			t.Errorf("%s: needs meaning, status and source", v.Name)
		}
		if v.ReplacedBy != "" {
			r, ok := Lookup(v.ReplacedBy)
			if !ok || !r.Suggestible() {
				t.Errorf("%s: replacement %s is not a current variable", v.Name, v.ReplacedBy)
			}
		}
		if v.Status == Nonexistent && v.Advice == "" {
			t.Errorf("%s: an invented variable needs advice on what to do instead", v.Name)
		}
	}
}

func TestInventedNamesAreFlagged(t *testing.T) {
	for _, n := range []string{"NCCL_TIMEOUT", "NCCL_SHM_DIR", "NCCL_SHM_USE_CUDA_MEMORY"} {
		v, ok := Lookup(n)
		if !ok || v.Exists() || v.Suggestible() {
			t.Errorf("%s must be known as nonexistent", n)
		}
	}
	if v, _ := Lookup("NCCL_ASYNC_ERROR_HANDLING"); v.ReplacedBy != "TORCH_NCCL_ASYNC_ERROR_HANDLING" {
		t.Errorf("NCCL_ASYNC_ERROR_HANDLING should point to the TORCH_ name")
	}
}

func TestClosest(t *testing.T) {
	tests := map[string]string{
		"NCCL_SOCKET_IFNAM":  "NCCL_SOCKET_IFNAME",
		"NCCL_P2P_DISABLED":  "NCCL_P2P_DISABLE",
		"NCCL_IB_DISBALE":    "NCCL_IB_DISABLE",
		"NCCL_COMPLETELY_XX": "",
	}
	for in, want := range tests {
		if got := Closest(in); got != want {
			t.Errorf("Closest(%s) = %q, want %q", in, got, want)
		}
	}
}
