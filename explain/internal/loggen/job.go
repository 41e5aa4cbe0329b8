package loggen

import (
	"fmt"
	"io"
	"strings"
)

// The realistic mode models the log the speed issue was measured on: a
// 2-node, 16-rank torchrun job run with NCCL_DEBUG=INFO and
// NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV,COLL, both nodes' output merged into
// one file (srun does this), every line behind torchrun's "[rankN]:" prefix
// and the ranks' lines interleaved. Formats are NCCL v2.30.7-1's:
// debug.cc (the "host:pid:tid [dev] NCCL INFO" prefix), init.cc (comm and
// Trees lines, Init START/COMPLETE, Init timings), graph/rings.cc (ring
// dumps "Channel 00/32 :    0   1 …"), the GRAPH "Ring 00 : 15 -> 0 -> 1"
// lines, transport/p2p.cc and transport/net.cc (transport lines, with
// "[send]"/"[receive]" for NET), transport/generic.cc ("Connected all
// rings, use ring PXN 0 GDR 1"), net_ib/init.cc ("NET/IB : Using … ; OOB"),
// enqueue.cc (COLL lines). Training output includes tqdm bars redrawn with
// \r and long lines.

const (
	jobNodes      = 2
	jobGPUs       = 8
	jobRanks      = jobNodes * jobGPUs
	jobChannels   = 32
	jobP2PPerPeer = 2
)

// jobGen holds each rank's pending lines; lines of different ranks are
// merged in random order, each rank's own order kept.
type jobGen struct {
	*gen
	pending [jobRanks][]string
	comm    int
}

func (j *jobGen) host(r int) string { return fmt.Sprintf("gpu-node-%02d", r/jobGPUs+1) }

func (j *jobGen) prefix(r int) string {
	return fmt.Sprintf("[rank%d]:%s:%d:%d [%d] NCCL INFO ", r, j.host(r), 52300+r%jobGPUs, 53100+r%jobGPUs*7, r%jobGPUs)
}

func (j *jobGen) add(r int, format string, a ...any) {
	j.pending[r] = append(j.pending[r], j.prefix(r)+fmt.Sprintf(format, a...)+"\n")
}

// flush writes the pending lines, interleaving ranks at random.
func (j *jobGen) flush() {
	live := make([]int, 0, jobRanks)
	pos := make([]int, jobRanks)
	for r := range j.pending {
		if len(j.pending[r]) > 0 {
			live = append(live, r)
		}
	}
	for len(live) > 0 {
		k := j.r.IntN(len(live))
		r := live[k]
		// A rank writes a few lines in a row before another gets in.
		for n := 1 + j.r.IntN(4); n > 0 && pos[r] < len(j.pending[r]); n-- {
			_, _ = io.WriteString(j.w, j.pending[r][pos[r]])
			pos[r]++
		}
		if pos[r] == len(j.pending[r]) {
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
		}
	}
	for r := range j.pending {
		j.pending[r] = j.pending[r][:0]
	}
}

func (j *jobGen) header() {
	j.pf("W0501 12:00:00.512000 140229394450240 torch/distributed/run.py:793] \n")
	j.pf("W0501 12:00:00.512000 140229394450240 torch/distributed/run.py:793] *****************************************\n")
	j.pf("W0501 12:00:00.512000 140229394450240 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. \n")
	for r := 0; r < jobRanks; r++ {
		if r%jobGPUs == 0 {
			j.add(r, "Bootstrap: Using ib0:10.1.%d.1<0>", r/jobGPUs)
			j.add(r, "cudaDriverVersion 12080")
			j.pending[r] = append(j.pending[r], fmt.Sprintf("[rank%d]:NCCL version 2.30.7+cuda12.8\n", r))
		}
		j.add(r, "NCCL_IB_HCA set by environment to mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7")
		j.add(r, "NCCL_SOCKET_IFNAME set by environment to ib0")
		j.add(r, "NET/Plugin: Could not find: libnccl-net.so.")
		j.add(r, "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [4]mlx5_4:1/IB [5]mlx5_5:1/IB [6]mlx5_6:1/IB [7]mlx5_7:1/IB [RO]; OOB ib0:10.1.%d.1<0>", r/jobGPUs)
		j.add(r, "Using network IB")
	}
	j.flush()
}

// commInit is one communicator's initialisation on every rank; api is
// ncclCommInitRank for the world, ncclCommSplit for the process groups
// (tensor and data parallel) a training framework makes next.
func (j *jobGen) commInit(api string) {
	j.comm++
	comm := func(r int) int { return 0x55d0c0de0000 + j.comm*0x100000 + r*0x1000 }
	id := 0x7a3f00c0ffee + j.comm
	for r := 0; r < jobRanks; r++ {
		lr := r % jobGPUs
		bus := 0x18000 + lr*0x10000
		j.add(r, "%s comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x commId 0x%x - Init START", api, comm(r), r, jobRanks, lr, lr, bus, id)
		j.add(r, "Using network IB")
		j.add(r, "Bootstrap timings total 0.%06d (create 0.000021, send 0.000102, recv 0.%06d, ring 0.000410, delay 0.000000)", j.r.IntN(999999), j.r.IntN(999999))
		j.add(r, "Setting affinity for GPU %d to ffffffff,00000000,ffffffff", lr)
		j.add(r, "comm 0x%x rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0", comm(r), r, jobRanks, jobNodes, jobGPUs, lr)
		j.add(r, "Trees%s", treeList(r, lr))
		if r == 0 {
			for c := 0; c < jobChannels; c++ {
				var ring strings.Builder
				for i := 0; i < jobRanks; i++ {
					fmt.Fprintf(&ring, "%4d", i)
				}
				j.add(r, "Channel %02d/%02d :%s", c, jobChannels, ring.String())
			}
		}
		j.connect(r, lr, api, comm(r), bus, id, false)
	}
	j.flush()
}

// p2pConnect is the first all-to-all: every rank connects to every peer
// on its p2p channels.
func (j *jobGen) p2pConnect() {
	for r := 0; r < jobRanks; r++ {
		lr := r % jobGPUs
		for d := 1; d < jobRanks; d++ {
			peer := (r + d) % jobRanks
			for c := 0; c < jobP2PPerPeer; c++ {
				ch := (d*jobP2PPerPeer + c) % jobChannels
				if peer/jobGPUs == r/jobGPUs {
					j.add(r, "Channel %02d/1 : %d[%d] -> %d[%d] via P2P/CUMEM/read", ch, r, lr, peer, peer%jobGPUs)
					continue
				}
				j.add(r, "Channel %02d/1 : %d[%d] -> %d[%d] [send] via NET/IB/%d/GDRDMA/Shared", ch, r, lr, peer, peer%jobGPUs, lr)
				j.add(r, "Channel %02d/1 : %d[%d] -> %d[%d] [receive] via NET/IB/%d/GDRDMA/Shared", ch, peer, peer%jobGPUs, r, lr, lr)
			}
		}
	}
	j.flush()
}

var collOps = []string{"AllReduce", "AllReduce", "AllReduce", "AllGather", "ReduceScatter", "Broadcast"}

// train is a stretch of training: COLL lines and the script's output.
func (j *jobGen) train(steps int) {
	for s := 0; s < steps; s++ {
		j.op++
		op := collOps[j.r.IntN(len(collOps))]
		for r := 0; r < jobRanks; r++ {
			j.add(r, "%s: opCount %x sendbuff 0x7f3a%08x recvbuff 0x7f3a%08x count %d datatype 7 op 0 root 0 comm 0x%x [nranks=%d] stream 0x55d0c1a0%04x",
				op, j.op, j.r.IntN(1<<28), j.r.IntN(1<<28), 1<<(10+j.r.IntN(14)), 0x55d0c0de0000+j.comm*0x100000+r*0x1000, jobRanks, r)
		}
		j.flush()
		if s%8 == 0 {
			j.step++
			// tqdm redraws its bar with \r; a log keeps every redraw on one line.
			var bar strings.Builder
			fmt.Fprintf(&bar, "[rank0]:")
			for k := 0; k < 6; k++ {
				fmt.Fprintf(&bar, "\rTraining: %3d%%|%-20s| %d/100000 [%02d:%02d<%02d:%02d, %.2fit/s]", j.step%100, strings.Repeat("█", j.step%20), j.step, j.step/60%60, j.step%60, 40, 12, 2+j.r.Float64())
			}
			bar.WriteByte('\n')
			_, _ = io.WriteString(j.w, bar.String())
			j.pf("[rank0]:{'loss': %.4f, 'grad_norm': %.3f, 'learning_rate': %.2e, 'epoch': %.2f}\n", 2.5-float64(j.step%1000)/1000, j.r.Float64()*3, 3e-4, float64(j.step)/1000)
		}
		if s%97 == 0 {
			// A long line: a tensor printed by the script.
			var t strings.Builder
			t.WriteString("[rank0]:tensor([")
			for k := 0; k < 400; k++ {
				fmt.Fprintf(&t, "%.4f, ", j.r.Float64()-0.5)
			}
			t.WriteString("], device='cuda:0')\n")
			_, _ = io.WriteString(j.w, t.String())
			j.pf("[rank0]:/opt/conda/lib/python3.11/site-packages/torch/utils/checkpoint.py:92: UserWarning: None of the inputs have requires_grad=True. Gradients will be None\n")
		}
	}
}

// failure ends the job with a watchdog timeout on every rank but one.
func (j *jobGen) failure() {
	for r := 0; r < jobRanks; r++ {
		if r == 11 {
			continue
		}
		j.pending[r] = append(j.pending[r], fmt.Sprintf("[rank%d]:[E501 14:10:21.%09d ProcessGroupNCCL.cpp:616] [Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=%d, OpType=ALLREDUCE, NumelIn=262144000, NumelOut=262144000, Timeout(ms)=600000) ran for %d milliseconds before timing out.\n",
			r, 100000000+r, r, j.op, 600000+40+r))
	}
	j.flush()
	j.pf("[rank0]:[E501 14:10:21.200000000 ProcessGroupNCCL.cpp:630] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n")
	j.pf("[rank0]:[E501 14:10:21.200000000 ProcessGroupNCCL.cpp:636] [Rank 0] To avoid data inconsistency, we are taking the entire process down.\n")
}

// connect is the end of one rank's communicator set-up, shared by the
// realistic and the init-heavy job: rings, the ring and tree connections
// and Init COMPLETE (proxy: with the proxy thread's affinity line of
// NCCL_DEBUG_SUBSYS=ALL).
func (j *jobGen) connect(r, lr int, api string, commAddr, bus, id int, proxy bool) {
	j.add(r, "P2P Chunksize set to 131072")
	prev, next := (r+jobRanks-1)%jobRanks, (r+1)%jobRanks
	for c := 0; c < jobChannels; c++ {
		j.add(r, "Ring %02d : %d -> %d -> %d", c, prev, r, next)
	}
	if proxy {
		j.add(r, "[Proxy Progress] Device %d CPU core %d", lr, 16+lr)
	}
	for c := 0; c < jobChannels; c++ {
		if next/jobGPUs == r/jobGPUs {
			j.add(r, "Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read", c, r, lr, next, next%jobGPUs)
		} else {
			j.add(r, "Channel %02d/0 : %d[%d] -> %d[%d] [send] via NET/IB/%d/GDRDMA", c, r, lr, next, next%jobGPUs, c%jobGPUs)
		}
		if prev/jobGPUs != r/jobGPUs {
			j.add(r, "Channel %02d/0 : %d[%d] -> %d[%d] [receive] via NET/IB/%d/GDRDMA", c, prev, prev%jobGPUs, r, lr, c%jobGPUs)
		}
	}
	j.add(r, "Connected all rings, use ring PXN 0 GDR 1")
	for c := 0; c < jobChannels; c++ {
		if lr > 0 {
			j.add(r, "Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read", c, r, lr, r-1, lr-1)
		}
	}
	j.add(r, "Connected all trees")
	j.add(r, "threadThresholds 8/8/64 | 128/8/64 | 512 | 512")
	j.add(r, "%d coll channels, %d collnet channels, 0 nvls channels, %d p2p channels, %d p2p channels per peer", jobChannels, jobChannels, jobChannels, jobP2PPerPeer)
	j.add(r, "CC Off, workFifoBytes 1048576")
	j.add(r, "%s comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x commId 0x%x - Init COMPLETE", api, commAddr, r, jobRanks, lr, lr, bus, id)
	j.add(r, "Init timings - %s: rank %d nranks %d total %.2f (kernels 0.21, alloc 0.02, bootstrap 0.41, allgathers 0.01, topo 0.18, graphs 0.01, connections 0.30, rest 0.01)", api, r, jobRanks, 1+j.r.Float64())
}

// treeNeighbours is a rank's parent and child in the intra-node chain
// NCCL's trees use (-1 at the ends).
func treeNeighbours(r, lr int) (up, down int) {
	up, down = r-1, r+1
	if lr == 0 {
		up = -1
	}
	if lr == jobGPUs-1 {
		down = -1
	}
	return up, down
}

// treeList is the " [c] down/-1/-1->r->up" list of a "Trees" line.
func treeList(r, lr int) string {
	var b strings.Builder
	for c := 0; c < jobChannels; c++ {
		up, down := treeNeighbours(r, lr)
		fmt.Fprintf(&b, " [%d] %d/-1/-1->%d->%d", c, down, r, up)
	}
	return b.String()
}
