//go:build !cgo

package scenario

import "github.com/ncclwiz/ncclwiz/host"

// simulatedGPUs has nothing to simulate with in a CGO_ENABLED=0 build: the
// scenario runs without GPUs and the GPU checks say why.
func simulatedGPUs(string, map[int][]GPUProcess) (host.NVML, error) { return nil, nil }

// simulatedPCI has no simulated GPUs to place on the bus without cgo.
func simulatedPCI(string) []pciGPU { return nil }
