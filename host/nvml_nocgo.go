//go:build !cgo

package host

// NVML stands in for nvml.Interface in builds without cgo, where go-nvml
// cannot be compiled; GPU checks report that they are unavailable.
type NVML interface{}

// NVMLAvailableInBuild reports whether this binary can talk to NVML at all.
const NVMLAvailableInBuild = false

// RealNVML returns nil: this build has no NVML.
func RealNVML() NVML { return nil }
