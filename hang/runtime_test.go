package hang

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

func TestOlder(t *testing.T) {
	for _, tc := range []struct {
		v, want string
		older   bool
	}{
		{"2.21.5", "2.24", true}, {"2.24.3", "2.24", false}, {"2.28.9", "2.24", false}, {"1.13.0a0", "2.2", true},
		{"2.1.2+cu121", "2.2", true}, {"2.2.0", "2.2", false}, {"2.10.0", "2.2", false}, {"loaded", "2.24", false}, {"", "2.2", false},
	} {
		if got := older(tc.v, tc.want); got != tc.older {
			t.Errorf("older(%q, %q) = %v", tc.v, tc.want, got)
		}
	}
}

// The advice follows the job: NCCL 2.21 has no RAS (not asked, said so);
// a gloo job is not asked unless the user or the job names an address;
// torch 2.1 writes no flight-recorder dump.
func TestAdviceFitsTheJob(t *testing.T) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	j := Job{Ranks: []proctab.Process{{PID: 1 << 30, Env: map[string]string{}}}}
	ctx := context.Background()
	if r := askRAS(ctx, h, j, Runtime{Backend: "nccl", NCCL: "2.21.5"}, Options{}); !strings.Contains(r.Skipped, "NCCL 2.21.5, and RAS arrived in NCCL 2.24") {
		t.Errorf("NCCL 2.21: %+v", r)
	}
	if r := askRAS(ctx, h, j, Runtime{Backend: "gloo"}, Options{}); !strings.Contains(r.Skipped, "gloo") {
		t.Errorf("gloo: %+v", r)
	}
	if r := askRAS(ctx, h, j, Runtime{Backend: "gloo"}, Options{NoRAS: true}); r.Skipped != "not asked (--no-ras)" {
		t.Errorf("--no-ras: %+v", r)
	}
	if fr := findDumps(h, j, Runtime{Backend: "nccl", Torch: "2.1.2"}, Options{}); !strings.Contains(fr.Note, "torch 2.1.2") || len(fr.HowTo) > 0 {
		t.Errorf("torch 2.1: %+v", fr)
	}
	if fr := findDumps(h, j, Runtime{Backend: "gloo", Torch: "1.13.0a0"}, Options{}); !strings.Contains(fr.Note, "gloo") {
		t.Errorf("gloo: %+v", fr)
	}
}

func TestNCCLVersionFromFileName(t *testing.T) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	if v := ncclVersion(h, "/nonexistent", "/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5"); v != "2.21.5" {
		t.Errorf("from the file name: %q", v)
	}
	if v := ncclVersion(h, "/nonexistent", "/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"); v != "loaded" {
		t.Errorf("unknown: %q", v)
	}
	// pip's wheel, read through the rank's root.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "site", "nvidia_nccl_cu12-2.21.5.dist-info"), 0o755); err != nil {
		t.Fatal(err)
	}
	if v := ncclVersion(h, root, "/site/nvidia/nccl/lib/libnccl.so.2"); v != "2.21.5" {
		t.Errorf("from the wheel: %q", v)
	}
}
