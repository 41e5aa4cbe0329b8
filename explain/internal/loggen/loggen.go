// Package loggen writes synthetic NCCL_DEBUG=INFO training logs of any size
// for benchmarks: an 8-rank torchrun job whose ranks print NCCL's INFO
// lines (init, interfaces, one transport line per channel and peer, and
// NCCL_DEBUG_SUBSYS=COLL collective lines, which is how real INFO logs reach
// hundreds of megabytes), interleaved with training output, and a watchdog
// timeout at the end. The line formats are those of reference §1 and §5.
// Options.Realistic writes the heavier 2-node, 16-rank job of job.go
// instead, the speed issue's measurement; Options.InitHeavy that job's
// communicator set-up under NCCL_DEBUG_SUBSYS=ALL (initheavy.go).
package loggen

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
)

// Options shape the log.
type Options struct {
	// Size is the approximate number of bytes to write.
	Size int64
	// Seed makes the output reproducible.
	Seed uint64
	// Ranks is the number of ranks (default 8; the realistic job has 16).
	Ranks int
	// Realistic writes the 2-node, 16-rank job of job.go instead: every
	// line behind a torchrun prefix, ranks interleaved, GRAPH and NET
	// lines, tqdm bars and long lines, as real INFO logs have.
	Realistic bool
	// InitHeavy writes the same job's communicator set-up under
	// NCCL_DEBUG_SUBSYS=ALL (initheavy.go): nearly every line an INFO
	// init, topology, graph, ENV or connection line. It wins over
	// Realistic.
	InitHeavy bool
}

// Generate writes the log and returns the bytes written.
func Generate(w io.Writer, o Options) (int64, error) {
	if o.Ranks <= 0 {
		o.Ranks = 8
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	g := &gen{w: cw, r: rand.New(rand.NewPCG(o.Seed, 0x6e63636c)), ranks: o.Ranks}
	if o.InitHeavy {
		return generateInitHeavy(&jobGen{gen: g}, o.Size, bw, cw)
	}
	if o.Realistic {
		return generateJob(&jobGen{gen: g}, o.Size, bw, cw)
	}
	g.header()
	for cw.n < o.Size-4096 {
		g.block()
		if cw.err != nil {
			return cw.n, cw.err
		}
	}
	g.failure()
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, cw.err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

type gen struct {
	w     io.Writer
	r     *rand.Rand
	ranks int
	step  int
	op    int
	comm  int
}

func (g *gen) pf(format string, a ...any) { fmt.Fprintf(g.w, format, a...) }

func (g *gen) prefix(rank int) string {
	return fmt.Sprintf("gpu-node-01:%d:%d [%d]", 41000+rank, 41100+rank, rank)
}

func (g *gen) header() {
	g.pf("W0501 12:00:00.512000 140229394450240 torch/distributed/run.py:793] *****************************************\n")
	g.pf("W0501 12:00:00.512000 140229394450240 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default\n")
	for r := 0; r < g.ranks; r++ {
		p := g.prefix(r)
		if r == 0 {
			g.pf("%s NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n", p)
			g.pf("%s NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation\n", p)
			g.pf("%s NCCL INFO cudaDriverVersion 12040\n", p)
			g.pf("NCCL version 2.21.5+cuda12.4\n")
		}
		g.pf("%s NCCL INFO Failed to open libibverbs.so[.1]\n", p)
		g.pf("%s NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n", p)
		g.pf("%s NCCL INFO Using non-device net plugin version 0\n", p)
		g.pf("%s NCCL INFO Using network Socket\n", p)
	}
}

// block is one communicator init followed by a stretch of training.
func (g *gen) block() {
	g.comm++
	comm := 0x55d0c0de0000 + g.comm*0x1000
	for r := 0; r < g.ranks; r++ {
		p := g.prefix(r)
		g.pf("%s NCCL INFO ncclCommInitRank comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x commId 0x%x - Init START\n", p, comm, r, g.ranks, r, r, 0x18000+r*0x10000, 0x7a3f00+g.comm)
		g.pf("%s NCCL INFO Setting affinity for GPU %d to ffff,ffffffff\n", p, r)
		g.pf("%s NCCL INFO comm 0x%x rank %d nRanks %d nNodes 1 localRanks %d localRank %d MNNVL 0\n", p, comm, r, g.ranks, g.ranks, r)
		g.pf("%s NCCL INFO P2P Chunksize set to 524288\n", p)
		for ch := 0; ch < 16; ch++ {
			next := (r + 1) % g.ranks
			via := "P2P/CUMEM/read"
			if g.r.IntN(10) == 0 {
				via = "P2P/IPC/read"
			}
			g.pf("%s NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via %s\n", p, ch, r, r, next, next, via)
		}
		g.pf("%s NCCL INFO Connected all rings\n", p)
		for ch := 0; ch < 4; ch++ {
			g.pf("%s NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read\n", p, ch, r, r, (r+g.ranks-1)%g.ranks, (r+g.ranks-1)%g.ranks)
		}
		g.pf("%s NCCL INFO Connected all trees\n", p)
		g.pf("%s NCCL INFO threadThresholds 8/8/64 | 64/8/64 | 512 | 512\n", p)
		g.pf("%s NCCL INFO 16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels, 16 p2p channels per peer\n", p)
		g.pf("%s NCCL INFO ncclCommInitRank comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x commId 0x%x - Init COMPLETE\n", p, comm, r, g.ranks, r, r, 0x18000+r*0x10000, 0x7a3f00+g.comm)
	}
	// Training: COLL lines (NCCL_DEBUG_SUBSYS=COLL) and the script's output.
	for i := 0; i < 120; i++ {
		g.op++
		for r := 0; r < g.ranks; r++ {
			g.pf("%s NCCL INFO AllReduce: opCount %x sendbuff 0x7f3a%08x recvbuff 0x7f3a%08x count %d datatype 7 op 0 root 0 comm 0x%x [nranks=%d] stream 0x55d0c1a0%04x\n",
				g.prefix(r), g.op, g.r.IntN(1<<28), g.r.IntN(1<<28), 1<<(10+g.r.IntN(14)), comm, g.ranks, r)
		}
		if i%6 == 0 {
			g.step++
			g.pf("[rank0]:{'loss': %.4f, 'grad_norm': %.3f, 'learning_rate': %.2e, 'epoch': %.2f}\n", 2.5-float64(g.step%1000)/1000, g.r.Float64()*3, 3e-4, float64(g.step)/1000)
			g.pf("[rank0]: %3d%%|%s| %d/100000 [%02d:%02d<%02d:%02d, 2.31it/s]\n", g.step%100, "██████▌   ", g.step, g.step/60%60, g.step%60, 40, 12)
		}
	}
}

// failure ends the log the way a hang does.
func (g *gen) failure() {
	for r := 0; r < g.ranks; r++ {
		if r == 3 {
			continue
		}
		g.pf("[rank%d]:[E501 14:10:21.%09d ProcessGroupNCCL.cpp:616] [Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=%d, OpType=ALLREDUCE, NumelIn=262144000, NumelOut=262144000, Timeout(ms)=600000) ran for %d milliseconds before timing out.\n",
			r, 100000000+r, r, g.op, 600000+40+r)
	}
	g.pf("[rank0]:[E501 14:10:21.200000000 ProcessGroupNCCL.cpp:630] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n")
	g.pf("[rank0]:[E501 14:10:21.200000000 ProcessGroupNCCL.cpp:636] [Rank 0] To avoid data inconsistency, we are taking the entire process down.\n")
}

func generateJob(j *jobGen, size int64, bw *bufio.Writer, cw *countWriter) (int64, error) {
	return runJob(j, size, bw, cw, func(i int) {
		j.commInit("ncclCommInitRank")
		j.commInit("ncclCommSplit")
		j.commInit("ncclCommSplit")
		if i%2 == 0 {
			j.p2pConnect()
		}
		j.train(60)
	})
}

// runJob writes the job's header, then steps until the log is about size
// bytes, then its failure.
func runJob(j *jobGen, size int64, bw *bufio.Writer, cw *countWriter, step func(i int)) (int64, error) {
	j.header()
	for i := 0; cw.n < size-64<<10; i++ {
		step(i)
		if cw.err != nil {
			return cw.n, cw.err
		}
	}
	j.failure()
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, cw.err
}
