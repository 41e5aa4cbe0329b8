package loggen

import (
	"bufio"
	"fmt"
	"strings"
)

// The init-heavy mode models an NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL log
// of the same 2-node 16-rank job whose lines are nearly all communicator
// set-up: a framework that creates many process groups (ncclCommInitRank,
// then ncclCommSplit per tensor/pipeline/data-parallel group), each printing
// its ENV, bootstrap, NET/IB, topology, graph search, ring/tree, channel and
// connection lines, with no COLL lines and little training output. This is
// the shape where every line is an INFO line the digest must read, the
// speed issue's ~50 MB/s case. Formats are NCCL v2.30.7-1's: misc/param.cc
// and graph/paths.cc ("NCCL_X set by environment to Y"), bootstrap.cc
// ("Bootstrap: Using", "Bootstrap timings"), graph/topo.cc ("=== System :
// maxBw …", the topology tree "CPU/0-0 (1/1/3)", "+ PCI[24.0] - …", "NET/IB
// : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"), graph/search.cc
// ("Pattern 4, crossNic 0, nChannels 16, bw …, type NVL/PIX, sameChannels
// 1" and its " 0 : NET/0-0 GPU/0-18000 … NET/0-0" lines), graph/connect.cc
// ("Tree 0 : -1 -> 0 -> 1/-1/-1", "Channel 00/32 :    0   1 …"), init.cc
// ("Rank 3: 8 Net devices", "DMA-BUF is available on GPU device 3", Init
// START/COMPLETE, "Init timings"), proxy.cc ("[Proxy Progress] Device 3 CPU
// core 17"), transport/net.cc and transport/p2p.cc (transport lines).

func generateInitHeavy(j *jobGen, size int64, bw *bufio.Writer, cw *countWriter) (int64, error) {
	return runJob(j, size, bw, cw, func(i int) {
		if i > 0 {
			j.restart()
		}
		j.commInitAll("ncclCommInitRank")
		for k := 0; k < 3; k++ {
			j.commInitAll("ncclCommSplit")
		}
		if i%2 == 0 {
			j.p2pConnect()
		}
		j.train(8)
	})
}

// envVars are variables a cluster's job script sets; NCCL prints each once
// per communicator under NCCL_DEBUG_SUBSYS=ENV (names from NCCL's docs).
var envVars = []string{
	"NCCL_IB_HCA set by environment to mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7",
	"NCCL_SOCKET_IFNAME set by environment to ib0",
	"NCCL_IB_GID_INDEX set by environment to 3.",
	"NCCL_IB_TIMEOUT set by environment to 22.",
	"NCCL_IB_QPS_PER_CONNECTION set by environment to 2.",
	"NCCL_NET_GDR_LEVEL set by environment to PHB",
	"NCCL_CROSS_NIC set by environment to 0.",
}

// restart is torchrun's elastic restart: new processes, each printing
// NCCL's version, its ENV lines and its bootstrap and IB interfaces again
// (NCCL reads most variables once per process). The agent line is
// torch/distributed/elastic/agent/server/api.py's logger.info.
func (j *jobGen) restart() {
	j.pf("I0501 12:%02d:00.512000 140229394450240 torch/distributed/elastic/agent/server/api.py:725] [default] Worker group FAILED. 3/3 attempts left; will restart worker group\n", j.comm%60)
	for r := 0; r < jobRanks; r++ {
		lr := r % jobGPUs
		if lr == 0 {
			j.pending[r] = append(j.pending[r], fmt.Sprintf("[rank%d]:NCCL version 2.30.7+cuda12.8\n", r))
		}
		j.add(r, "cudaDriverVersion 12080")
		for _, e := range envVars {
			j.add(r, "%s", e)
		}
		j.add(r, "Bootstrap: Using ib0:10.1.%d.%d<0>", r/jobGPUs, 1+lr)
		j.add(r, "NET/Plugin: Could not find: libnccl-net.so.")
		j.add(r, "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [4]mlx5_4:1/IB [5]mlx5_5:1/IB [6]mlx5_6:1/IB [7]mlx5_7:1/IB [RO]; OOB ib0:10.1.%d.1<0>", r/jobGPUs)
	}
	j.flush()
}

// commInitAll is commInit with everything NCCL_DEBUG_SUBSYS=ALL adds.
func (j *jobGen) commInitAll(api string) {
	j.comm++
	comm := func(r int) int { return 0x55d0c0de0000 + j.comm*0x100000 + r*0x1000 }
	id := 0x7a3f00c0ffee + j.comm
	for r := 0; r < jobRanks; r++ {
		lr := r % jobGPUs
		bus := 0x18000 + lr*0x10000
		j.add(r, "%s comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x commId 0x%x - Init START", api, comm(r), r, jobRanks, lr, lr, bus, id)
		j.add(r, "Bootstrap timings total 0.%06d (create 0.000021, send 0.000102, recv 0.%06d, ring 0.000410, delay 0.000000)", j.r.IntN(999999), j.r.IntN(999999))
		j.add(r, "Using network IB")
		j.add(r, "DMA-BUF is available on GPU device %d", lr)
		j.add(r, "Rank %d: %d Net devices", r, jobGPUs)
		j.add(r, "Rank %d: 0 CollNet devices", r)
		for h := 0; h < jobGPUs; h++ {
			j.add(r, "NET/IB : GPU Direct RDMA Enabled for HCA %d 'mlx5_%d'", h, h)
		}
		j.add(r, "=== System : maxBw 48.0 totalBw 480.0 ===")
		for cpu := 0; cpu < 2; cpu++ {
			j.add(r, "CPU/0-%x (1/1/3)", cpu)
			for g := cpu * 4; g < cpu*4+4; g++ {
				j.add(r, "+ PCI[48.0] - PCI/0-%x (1000c01010000000)", 0x15000+g*0x10000)
				j.add(r, "              + PCI[48.0] - GPU/0-%x (%d)", 0x18000+g*0x10000, g)
				j.add(r, "                            + NVL[480.0] - NVS/0-0")
				j.add(r, "              + PCI[48.0] - NIC/0-%x", 0x19000+g*0x10000)
				j.add(r, "                            + NET[50.0] - NET/0-%x (%x/0/1/50.000000)", g, 0x8f3e1c0000+g)
			}
			j.add(r, "+ SYS[10.0] - CPU/0-%x", 1-cpu)
		}
		j.add(r, "==========================================")
		j.add(r, "Setting affinity for GPU %d to ffffffff,00000000,ffffffff", lr)
		j.add(r, "comm 0x%x rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0", comm(r), r, jobRanks, jobNodes, jobGPUs, lr)
		for _, g := range []struct {
			pattern, n int
			typ        string
		}{{4, 16, "NVL/PIX"}, {1, 16, "NVL/PIX"}, {3, 16, "NVL/PIX"}} {
			j.add(r, "Pattern %d, crossNic 0, nChannels %d, bw 40.000000/40.000000, type %s, sameChannels 1", g.pattern, g.n, g.typ)
			for c := 0; c < g.n; c++ {
				var line strings.Builder
				fmt.Fprintf(&line, "%2d : NET/0-%x", c, c%jobGPUs)
				for k := 0; k < jobGPUs; k++ {
					fmt.Fprintf(&line, " GPU/0-%x", 0x18000+((k+c)%jobGPUs)*0x10000)
				}
				fmt.Fprintf(&line, " NET/0-%x", c%jobGPUs)
				j.add(r, "%s", line.String())
			}
		}
		j.add(r, "Trees%s", treeList(r, lr))
		for c := 0; c < jobChannels; c++ {
			up, down := treeNeighbours(r, lr)
			j.add(r, "Tree %d : %d -> %d -> %d/-1/-1", c, up, r, down)
		}
		if lr == 0 {
			for c := 0; c < jobChannels; c++ {
				var ring strings.Builder
				for i := 0; i < jobRanks; i++ {
					fmt.Fprintf(&ring, "%4d", i)
				}
				j.add(r, "Channel %02d/%02d :%s", c, jobChannels, ring.String())
			}
		}
		j.connect(r, lr, api, comm(r), bus, id, true)
	}
	j.flush()
}
