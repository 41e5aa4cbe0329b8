package validate

import (
	"context"

	"github.com/ncclwiz/ncclwiz/checks/gpu"
	"github.com/ncclwiz/ncclwiz/host"
)

// Snapshot is checks/gpu's view of the GPUs: devices (NVLink links and
// version, PCIe generation and width, compute capability) and the
// nvidia-smi-style topology matrix, indexed like Devices.
type Snapshot = gpu.Snapshot

// Device is one GPU of a Snapshot.
type Device = gpu.Device

// probeGPUs asks NVML through the host seam (one Init, one Shutdown).
func probeGPUs(ctx context.Context, h *host.Host) Snapshot { return gpu.Probe(ctx, h) }
