package cluster

import "sort"

// MeshPair is one node-to-node (or node-to-MASTER_ADDR) connection of
// --mesh, made on the interface NCCL would pick.
type MeshPair struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Addr   string `json:"addr"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// MasterName is the To of a pair that tested MASTER_ADDR:MASTER_PORT.
const MasterName = "MASTER_ADDR"

// AddMesh adds the reachability matrix: every failed pair is a problem,
// and a node that cannot reach others (or be reached) moves up.
func (r *Result) AddMesh(pairs []MeshPair) {
	sort.SliceStable(pairs, func(i, j int) bool {
		if pairs[i].From != pairs[j].From {
			return pairs[i].From < pairs[j].From
		}
		return pairs[i].To < pairs[j].To
	})
	r.Mesh = pairs
	fails := map[string]int{}
	for _, p := range pairs {
		if !p.OK {
			r.Summary.MeshFailures++
			fails[p.From]++
			fails[p.To]++
		}
	}
	if r.Summary.MeshFailures == 0 {
		return
	}
	r.Summary.ExitCode = 1
	for i := range r.Nodes {
		r.Nodes[i].Score += fails[r.Nodes[i].Name]
	}
	sort.SliceStable(r.Nodes, func(i, j int) bool { return r.Nodes[i].Score > r.Nodes[j].Score })
}
