// Package cluster aggregates `ncclwiz check --json` reports of the nodes of
// one job into a table of the facts that must agree, names the odd node
// out, and renders the result (plain or versioned JSON). Reaching the
// nodes is cluster/remote's job; this package only reads reports.
package cluster

import (
	"fmt"
	"sort"
	"time"

	"github.com/ncclwiz/ncclwiz/report"
)

// Status of one node.
type Status string

// Node statuses: a node that could not be checked is a finding too.
const (
	StatusOK          Status = "ok"
	StatusUnreachable Status = "unreachable"
	StatusTimeout     Status = "timeout"
	StatusFailed      Status = "failed"
)

// Node is what an engine learned about one node.
type Node struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Reason says why a node is not ok: dns, refused, auth, host-key,
	// no-route, timeout, arch, libc, remote-error, bad-report.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// Delivery says how ncclwiz got there: shared (same path, same
	// checksum), copied (private temp copy, removed), json (--from-json).
	Delivery string `json:"delivery,omitempty"`
	// ClockOffset is the node's clock minus ours, measured over the ssh
	// round trip; ClockError bounds it (half the round trip plus the
	// reports' one-second resolution where that is the source).
	ClockOffset *time.Duration     `json:"-"`
	ClockError  time.Duration      `json:"-"`
	Report      *report.JSONReport `json:"-"`
}

// ClockSkewLimit is the offset past which a node's clock is suspect: log
// timestamps stop lining up and TLS/Kerberos-based storage starts failing.
const ClockSkewLimit = 5 * time.Second

// Suspect is one fact on which a node is in the minority.
type Suspect struct {
	Node     string `json:"node"`
	Fact     string `json:"fact"`
	Label    string `json:"label"`
	Value    string `json:"value"`
	Majority string `json:"majority"`
	Guide    string `json:"guide"`
	// Ambiguous is set when no value has a majority (a tie): every node
	// is listed and the user decides which is right.
	Ambiguous bool `json:"ambiguous,omitempty"`
}

// FactRow is one fact across the reachable nodes.
type FactRow struct {
	FactDef
	Agree    bool                `json:"agree"`
	Majority string              `json:"majority,omitempty"`
	Values   map[string][]string `json:"values"` // value → nodes
}

// NodeRow is one node in suspicion order.
type NodeRow struct {
	Node
	Score      int               `json:"score"`
	Facts      map[string]string `json:"facts,omitempty"`
	Differs    []string          `json:"differs,omitempty"`
	Problems   int               `json:"problems"` // warnings + errors in its own report
	ExitCode   *int              `json:"exit_code,omitempty"`
	ClockMS    *float64          `json:"clock_offset_ms,omitempty"`
	ClockErrMS *float64          `json:"clock_error_ms,omitempty"`
}

// Result is the aggregation.
type Result struct {
	Nodes    []NodeRow `json:"nodes"`
	Facts    []FactRow `json:"facts"`
	Suspects []Suspect `json:"suspects"`
	Summary  Summary   `json:"summary"`
	// Mesh is the --mesh reachability matrix (nil without --mesh).
	Mesh []MeshPair `json:"mesh,omitempty"`
}

// Summary counts nodes and disagreements; ExitCode follows `check`.
type Summary struct {
	Nodes         int `json:"nodes"`
	Checked       int `json:"checked"`
	Unreachable   int `json:"unreachable"`
	Disagreements int `json:"disagreements"`
	NodeProblems  int `json:"nodes_with_problems"`
	MeshFailures  int `json:"mesh_failures,omitempty"`
	ExitCode      int `json:"exit_code"`
}

// unreachableScore puts nodes that could not be checked first: nothing is
// known about them and a job cannot start there.
const unreachableScore = 1000

// Aggregate compares the nodes. Nodes are sorted by suspicion: unreachable
// first, then by the summed weight of the facts they are odd on, then by
// the problems in their own reports, then by name.
func Aggregate(nodes []Node) Result {
	var res Result
	rows := make([]NodeRow, len(nodes))
	keys := map[string]FactDef{}
	for _, d := range fixedFacts {
		keys[d.Key] = d
	}
	for i, n := range nodes {
		rows[i] = NodeRow{Node: n}
		if n.Status != StatusOK || n.Report == nil {
			rows[i].Score = unreachableScore
			res.Summary.Unreachable++
			continue
		}
		res.Summary.Checked++
		rows[i].Facts = ExtractFacts(n.Report)
		for k := range rows[i].Facts {
			if _, ok := keys[k]; !ok && len(k) > 4 && k[:4] == "env:" {
				keys[k] = envFact(k[4:])
			}
		}
		code := n.Report.Summary.ExitCode
		rows[i].ExitCode = &code
		rows[i].Problems = n.Report.Summary.Errors + n.Report.Summary.Warnings
		if rows[i].Problems > 0 {
			res.Summary.NodeProblems++
		}
		if n.ClockOffset != nil {
			ms := float64(n.ClockOffset.Microseconds()) / 1000
			em := float64(n.ClockError.Microseconds()) / 1000
			rows[i].ClockMS, rows[i].ClockErrMS = &ms, &em
		}
	}
	defs := orderedDefs(keys)
	idx := map[string]int{}
	for i := range rows {
		idx[rows[i].Name] = i
	}
	for _, d := range defs {
		fr := FactRow{FactDef: d, Values: map[string][]string{}}
		for _, r := range rows {
			if r.Facts == nil {
				continue
			}
			v, ok := r.Facts[d.Key]
			if !ok {
				v = unsetOrUnknown(d)
			}
			fr.Values[v] = append(fr.Values[v], r.Name)
		}
		if len(fr.Values) == 0 {
			continue
		}
		fr.Agree = len(fr.Values) == 1
		maj, tie := majority(fr.Values)
		if !tie {
			fr.Majority = maj
		}
		if !fr.Agree {
			res.Summary.Disagreements++
			for v, ns := range fr.Values {
				if v == maj && !tie {
					continue
				}
				for _, n := range ns {
					r := &rows[idx[n]]
					r.Score += d.Weight
					r.Differs = append(r.Differs, d.Key)
					res.Suspects = append(res.Suspects, Suspect{Node: n, Fact: d.Key, Label: d.Label, Value: v,
						Majority: fr.Majority, Guide: d.Guide, Ambiguous: tie})
				}
			}
		}
		res.Facts = append(res.Facts, fr)
	}
	for i := range rows {
		r := &rows[i]
		if r.ClockOffset != nil && absDur(*r.ClockOffset)-r.ClockError > ClockSkewLimit {
			r.Score += 3
			r.Differs = append(r.Differs, "clock")
			res.Suspects = append(res.Suspects, Suspect{Node: r.Name, Fact: "clock", Label: "clock",
				Value: fmt.Sprintf("%+.1fs", r.ClockOffset.Seconds()), Majority: fmt.Sprintf("within %s", ClockSkewLimit), Guide: "multi-node-basics"})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Score != rows[j].Score {
			return rows[i].Score > rows[j].Score
		}
		if rows[i].Problems != rows[j].Problems {
			return rows[i].Problems > rows[j].Problems
		}
		return rows[i].Name < rows[j].Name
	})
	rank := map[string]int{}
	for i, r := range rows {
		rank[r.Name] = i
	}
	sort.SliceStable(res.Suspects, func(i, j int) bool {
		a, b := res.Suspects[i], res.Suspects[j]
		if rank[a.Node] != rank[b.Node] {
			return rank[a.Node] < rank[b.Node]
		}
		return a.Fact < b.Fact
	})
	res.Nodes = rows
	res.Summary.Nodes = len(rows)
	if res.Summary.Unreachable > 0 || len(res.Suspects) > 0 || res.Summary.NodeProblems > 0 {
		res.Summary.ExitCode = 1
	}
	return res
}

// unsetOrUnknown is the value of a fact a node does not report: for an
// environment variable that means it is not set there.
func unsetOrUnknown(d FactDef) string {
	if len(d.Key) > 4 && d.Key[:4] == "env:" {
		return "(unset)"
	}
	return Unknown
}

// majority returns the value most nodes share and whether the top count
// is tied (then nobody is the odd one out).
func majority(vals map[string][]string) (string, bool) {
	best, bestN, tie := "", -1, false
	for v, ns := range vals {
		switch {
		case len(ns) > bestN:
			best, bestN, tie = v, len(ns), false
		case len(ns) == bestN:
			tie = true
			if v < best {
				best = v
			}
		}
	}
	return best, tie
}

func orderedDefs(keys map[string]FactDef) []FactDef {
	out := append([]FactDef(nil), fixedFacts...)
	var env []FactDef
	for k, d := range keys {
		if len(k) > 4 && k[:4] == "env:" {
			env = append(env, d)
		}
	}
	sort.Slice(env, func(i, j int) bool { return env[i].Key < env[j].Key })
	return append(out, env...)
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
