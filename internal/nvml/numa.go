package nvml

// maxNUMANodes bounds the node mask asked of NVML (the kernel's
// MAX_NUMNODES is 1024 on the largest configurations).
const maxNUMANodes = 1024

// HostNUMANode is the host NUMA node nearest the GPU, where NCCL's cuMem
// host allocations go (the driver's memory affinity), or -1. It is not
// nvmlDeviceGetNumaNodeId, which on Grace Hopper and Grace Blackwell is the
// node of the GPU's own memory.
func HostNUMANode(d Device) int {
	set, r := d.GetMemoryAffinity(maxNUMANodes, AFFINITY_SCOPE_NODE)
	if r != SUCCESS {
		return -1
	}
	for w, v := range set {
		for b := 0; b < 64; b++ {
			if v&(1<<b) != 0 {
				return w*64 + b
			}
		}
	}
	return -1
}

// GPUMemoryNUMANode is the NUMA node of the GPU's own memory on platforms
// where GPU memory is one (NVLink-C2C: Grace Hopper, Grace Blackwell), or -1.
func GPUMemoryNUMANode(d Device) int {
	n, r := d.GetNumaNodeId()
	if r != SUCCESS {
		return -1
	}
	return n
}
