package explain

import (
	"testing"

	"github.com/ncclwiz/ncclwiz/explain/catalog"
)

func TestLookupCudaError(t *testing.T) {
	tests := []struct {
		text string
		code int
		ok   bool
	}{
		{"enqueue.cc:1556 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'", 700, true},
		{"NCCL WARN Cuda failure 'unspecified launch failure'", 719, true},
		{"transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer access is not supported between these two devices'", 217, true},
		{"RuntimeError: CUDA error: invalid device ordinal", 101, true},
		{"RuntimeError: cuda runtime error (802) : system not yet initialized at /pytorch/aten/src/THC/THCGeneral.cpp:50", 802, true},
		{"Test CUDA failure common.cu:941 'no CUDA-capable device is detected'", 100, true},
		{"ncclUnhandledCudaError: cudaErrorInvalidResourceHandle", 400, true},
		// The code wins over a text it does not know (driver strings differ).
		{"NCCL WARN Cuda failure 801 'operation not supported on this platform'", 801, true},
		{"NCCL WARN Cuda failure 'something new'", 0, false},
		// CUDA 9 numbering: 4 was cudaErrorLaunchFailure, now 719.
		{"RuntimeError: cuda runtime error (4) : unspecified launch failure at /pytorch/aten/src/THC/generic/THCStorage.cpp:36", 719, true},
		{"no cuda here", 0, false},
	}
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		c, ok := lookupCudaError(cat, tt.text)
		if ok != tt.ok || c.Code != tt.code {
			t.Errorf("%q: %d %v, want %d %v", tt.text, c.Code, ok, tt.code, tt.ok)
		}
	}
	// Every table row is found by its code, its string and its name.
	for _, c := range cat.Cuda {
		for _, text := range []string{"Cuda failure " + itoa(c.Code) + " 'x'", "Cuda failure '" + c.Text + "'", "error " + c.Name} {
			if got, ok := lookupCudaError(cat, text); !ok || got.Code != c.Code {
				t.Errorf("%q: %d %v, want %d", text, got.Code, ok, c.Code)
			}
		}
	}
}

// A framework's CUDA check whose text names a cause outside the model is
// that cause, never an all-clear.
func TestCudaCauseInFrameworkLines(t *testing.T) {
	e := testExplainer(t)
	for _, tt := range []struct{ line, root string }{
		{"RuntimeError: CUDA error: peer access is not supported between these two devices", "p2p-unsupported"},
		{"[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaDeviceEnablePeerAccess(peer, 0): peer access is not supported between these two devices (/src/cpp/tensorrt_llm/runtime/ipcUtils.cpp:52)", "p2p-unsupported"},
		{"RuntimeError: CUDA error: invalid device ordinal", "invalid-device-ordinal"},
	} {
		r := analyze(t, e, tt.line+"\n")
		if root := rootOf(r); root == nil || root.ID != tt.root {
			t.Errorf("%q: root %v, want %s (diagnoses %v)", tt.line, root, tt.root, diagIDs(r))
		}
	}
}
