package host

import "github.com/ncclwiz/ncclwiz/internal/nvml"

// NVML is the NVIDIA Management Library interface. Production uses the
// driver's library (internal/nvml, bound without cgo); practice scenarios
// and tests use simulated servers.
type NVML = nvml.Interface

// NVMLAvailableInBuild reports whether this binary can talk to NVML at all:
// every build can (the binding needs no cgo) except a static -tags nonvml one.
const NVMLAvailableInBuild = nvml.Available

// RealNVML returns the driver's library. Nothing is loaded until Init.
func RealNVML() NVML { return nvml.New() }
