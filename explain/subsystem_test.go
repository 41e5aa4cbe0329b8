package explain

import "testing"

func TestSubsystemOf(t *testing.T) {
	e := testExplainer(t)
	tests := []struct {
		line, file, guide string
	}{
		{"node1:8812:8901 [3] graph/search.cc:1023 NCCL WARN Could not find a path", "graph/search.cc", "p2p-acs-iommu"},
		{"h:1:2 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer x with status=12", "ib_plugin.c", "ib-roce"},
		{"h:1:2 [0] NCCL INFO transport/net_ib.cc:1112 -> 2", "transport/net_ib.cc", "ib-roce"},
		{"h:1:2 [0] misc/shmutils.cc:112 NCCL WARN Error while creating", "misc/shmutils.cc", "container-shm"},
		{"h:1:2 [0] transport/p2p.cc:309 NCCL WARN failed to peer", "transport/p2p.cc", "p2p-acs-iommu"},
		{"h:1:2 [0] proxy.cc:1485 NCCL WARN [Service thread] Error", "proxy.cc", "multi-node-basics"},
		{"h:1:2 [0] bootstrap.cc:77 NCCL WARN Message truncated", "bootstrap.cc", "socket-interface"},
		{"h:1:2 [0] src/transport/nvls.cc:254 NCCL WARN Cuda failure 1", "transport/nvls.cc", "nvls"},
		{"[rank0]:h:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect", "misc/socket.cc", "socket-connect"},
		// Files of older and newer trees (NCCL 2.4 .cu names, 2.30 os/).
		{"h:1:2 [0] misc/ibvwrap.cu:280 NCCL WARN Call to ibv_create_qp failed", "misc/ibvwrap.cu", "ib-roce"},
		{"hvd1:2918:3333 [0] external/nccl_archive/src/transport/net_socket.cc:200 NCCL WARN NET/Socket : x", "transport/net_socket.cc", "socket-connect"},
		{"h:1:2 [0] include/socket.h:318 NCCL WARN Net : Socket creation failed", "include/socket.h", "socket-connect"},
		{"h:1:2 [0] misc/topo.cc:41 NCCL WARN Could not find real path", "misc/topo.cc", "p2p-acs-iommu"},
		{"[2026-03-02 10:11:12] h:1:2 [0] os/linux.cc:806 (ncclOsShmOpen) NCCL WARN Error: Could not map", "os/linux.cc", "container-shm"},
		{"h:1:2 [0] os/linux_ipcsocket.cc:233 NCCL WARN UDS: Sending data over socket", "os/linux_ipcsocket.cc", "consequence-errors"},
	}
	for _, tt := range tests {
		file, sub, ok := e.subsystemOf(tt.line)
		if !ok || file != tt.file || sub.Guide != tt.guide {
			t.Errorf("%q: %q %q %v, want %q %q", tt.line, file, sub.Guide, ok, tt.file, tt.guide)
		}
	}
	for _, line := range []string{"NCCL WARN no file here", "h:1:2 [0] unknown/thing.cc:3 NCCL WARN x"} {
		if _, sub, ok := e.subsystemOf(line); ok {
			t.Errorf("%q placed in %+v", line, sub)
		}
	}
}
