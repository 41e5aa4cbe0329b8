//go:build !cgo

package hang

import "github.com/ncclwiz/ncclwiz/host"

// gpuUse: this build has no NVML.
func gpuUse(*host.Host, []int) map[int]GPUUse { return nil }
