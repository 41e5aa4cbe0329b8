//go:build cgo

package host

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// NVML is the NVIDIA Management Library interface. Production uses
// nvml.New(); tests use go-nvml's simulated servers.
type NVML = nvml.Interface

// NVMLAvailableInBuild reports whether this binary can talk to NVML at all.
const NVMLAvailableInBuild = true

// RealNVML returns the dlopen-backed library. Nothing is loaded until Init.
func RealNVML() NVML { return nvml.New() }
