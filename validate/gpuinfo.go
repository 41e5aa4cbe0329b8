package validate

import (
	"context"

	"github.com/ncclwiz/ncclwiz/host"
)

// Snapshot and Device mirror checks/gpu's contract until that package lands.
type Snapshot struct {
	State, Detail, Driver, CUDA string
	Devices                     []Device
	Topology                    [][]string
}

// Device mirrors gpu.Device.
type Device struct {
	Index                                                     int
	Name, UUID, BusID                                         string
	MemTotal, MemUsed                                         uint64
	CC                                                        string
	NVLinkActive, NVLinkVersion, PCIeGen, PCIeWidth, NUMANode int
}

func probeGPUs(_ context.Context, _ *host.Host) Snapshot {
	return Snapshot{State: "unavailable-in-build", Detail: "checks/gpu is not built yet"}
}
