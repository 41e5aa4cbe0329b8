package explain

import (
	"fmt"
	"strconv"
)

// storeDetails says which side of the rendezvous failed (the TCPStore
// server waiting for ranks, or a rank that never reached it) and what the
// counts in the message tell.
// storeReachAdvice is what to check when a rank cannot connect to the store.
const storeReachAdvice = "The store runs on MASTER_ADDR:MASTER_PORT (or --rdzv-endpoint): check from this node that the address routes and the port is open, that no firewall or security group drops it (ncclwiz check --only net.rendezvous), and that the node hosting the store started."

func storeDetails(d *Diagnosis) {
	f := d.Fields
	if f["host"] != "" && f["joined"] == "" && f["barrier_rank"] == "" {
		d.Title = fmt.Sprintf("A rank could not reach the rendezvous store at %s:%s", f["host"], f["port"])
		d.Advice = append(d.Advice, storeReachAdvice)
	}
	if f["connect_timeout_ms"] != "" && f["host"] == "" {
		// torch before 2.0 does not say where it tried to connect.
		d.Title = fmt.Sprintf("A rank could not connect to the rendezvous store (connect() timed out after %s ms)", f["connect_timeout_ms"])
		d.Advice = append(d.Advice, storeReachAdvice)
	}
	if f["wait_ms"] != "" {
		d.Title = "A rank waited for a store key that another rank never wrote (store wait timeout)"
		d.Advice = append(d.Advice, "The rank that should have written the key ("+f["keys"]+") never got there: look for its own error or hang first; it failed or is stuck before this point.")
	}
	joined, err1 := strconv.Atoi(f["joined"])
	expected, err2 := strconv.Atoi(f["expected"])
	if err1 == nil && err2 == nil && joined < expected {
		d.Advice = append(d.Advice, fmt.Sprintf("Only %d of %d clients reached the store: the missing ranks never started or could not connect; their launcher logs say why.", joined, expected))
	}
	world, err1 := strconv.Atoi(f["world_size"])
	workers, err2 := strconv.Atoi(f["worker_count"])
	switch {
	case err1 != nil || err2 != nil:
	case workers > world:
		d.Title = fmt.Sprintf("Rendezvous timed out: %d processes joined a store for %d ranks", workers, world)
		d.Advice = append(d.Advice, fmt.Sprintf("%d workers joined a store for world_size=%d: more processes were started than the job has ranks (e.g. srun tasks each running mp.spawn or torchrun), or another job (or an earlier run) uses the same MASTER_ADDR:MASTER_PORT. Start one process per rank and give each job its own port.", workers, world))
	case workers < world:
		d.Advice = append(d.Advice, fmt.Sprintf("Only %d of %d ranks reached the barrier: the others never started, crashed before init_process_group, or could not connect.", workers, world))
	}
}
