//go:build !cgo

package gpu

import (
	"context"

	"github.com/ncclwiz/ncclwiz/host"
)

// Probe cannot reach NVML in a CGO_ENABLED=0 build.
func Probe(context.Context, *host.Host) Snapshot {
	return Snapshot{State: StateUnavailable, Detail: "GPU checks are unavailable in this build (built with CGO_ENABLED=0, without NVML)"}
}
