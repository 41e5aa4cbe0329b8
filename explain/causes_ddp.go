package explain

import "fmt"

// ddpModelDetails words a desync found by DDP's constructor: it compares
// every rank's parameter count before training, so a mismatch there is a
// model built differently per rank, or a rank that was not in the
// constructor's allgather at all (its peers read 0 params).
func ddpModelDetails(d *Diagnosis) {
	f := d.Fields
	if f["other_params"] == "" {
		return
	}
	d.Title = fmt.Sprintf("DDP found different models on the ranks (rank %s: %s parameters, rank %s: %s)", f["rank"], f["params"], f["other_rank"], f["other_params"])
	if f["other_params"] == "0" || f["params"] == "0" {
		d.Advice = append(d.Advice, "A count of 0 means that rank never took part in DDP's parameter check: it was stuck or failed elsewhere (data loading, a barrier, its own exception) and its peers' allgather returned nothing. Find that rank's own error or where it hangs first.")
		return
	}
	d.Advice = append(d.Advice, "Every rank must build the same model before DistributedDataParallel(...): look for parameters created only on some ranks (if rank == 0, a config or checkpoint read differently per node, adapters added conditionally) and compare sum(p.numel() for p in model.parameters()) across ranks.")
}
