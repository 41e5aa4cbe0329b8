// Package netcheck holds the network checks: which interface NCCL and Gloo
// will use on this machine and which they should (net.interfaces), the way
// to the rank-0 machine (net.rendezvous), InfiniBand/RoCE health and
// settings (net.rdma), and IOMMU/ACS settings that make GPU peer-to-peer
// hang (host.pcie). NCCL's own selection rules are reproduced from its
// source so each verdict can show what NCCL will actually do.
package netcheck

import (
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
)

// Checks returns net.interfaces, net.rendezvous, net.rdma and host.pcie.
func Checks() []checks.Check {
	return []checks.Check{
		{ID: "net.interfaces", Title: "Network interfaces for NCCL and Gloo", Category: "net", Tier: checks.Quick, Run: runInterfaces},
		{ID: "net.rendezvous", Title: "Way to the rank-0 machine (MASTER_ADDR or --peer)", Category: "net", Tier: checks.Quick,
			Timeout: 15 * time.Second, Run: runRendezvous},
		{ID: "net.rdma", Title: "InfiniBand / RoCE devices", Category: "net", Tier: checks.Quick, Run: runRDMA},
		{ID: "host.pcie", Title: "IOMMU and PCIe ACS (GPU peer-to-peer)", Category: "host", Tier: checks.Quick, Run: runPCIe},
	}
}

// list returns s, or an empty slice for nil: evidence never holds JSON null.
func list[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
