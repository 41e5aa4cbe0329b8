package ras

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Peer is a process or rank RAS reports as missing or dead.
type Peer struct {
	// Comm is the communicator ("#0-0 (9e1b…)" in text, the hash in JSON);
	// empty for a process missing from the whole job.
	Comm string `json:"comm,omitempty"`
	// Rank is the rank in that communicator, -1 for a process.
	Rank int    `json:"rank"`
	PID  int    `json:"pid,omitempty"`
	Node string `json:"node,omitempty"`
	GPU  string `json:"gpu,omitempty"`
	Dead bool   `json:"dead"`
}

// RankCount is one rank's count of one collective in a mismatch.
type RankCount struct {
	Rank  int   `json:"rank"`
	Count int64 `json:"count"`
	PID   int   `json:"pid,omitempty"`
}

// Mismatch is a communicator whose ranks disagree: some launched fewer
// operations of a kind than the others (they are behind), or have another
// status.
type Mismatch struct {
	Comm string `json:"comm"`
	// What is the operation ("AllReduce" …) or "status".
	What string `json:"what"`
	// Behind lists the outlier ranks with their counts.
	Behind []RankCount `json:"behind,omitempty"`
	// Majority is the count most ranks reached.
	Majority int64 `json:"majority"`
}

// Reply is a parsed RAS status.
type Reply struct {
	Addr        string `json:"addr"`
	Format      string `json:"format"`
	Protocol    int    `json:"protocol"`
	NCCLVersion string `json:"nccl_version,omitempty"`
	Comms       int    `json:"communicators"`
	// Missing are ranks (or processes) RAS got no data from.
	Missing    []Peer     `json:"missing,omitempty"`
	Dead       []Peer     `json:"dead,omitempty"`
	Mismatches []Mismatch `json:"mismatches,omitempty"`
	Errors     []string   `json:"errors,omitempty"`
	Timeouts   int        `json:"timeouts"`
	Partial    bool       `json:"partial,omitempty"`
	Raw        string     `json:"-"`
}

// Parse reads a status report as NCCL writes it (text, or JSON when it
// starts with '{').
func Parse(raw string) (*Reply, error) {
	r := &Reply{Raw: raw, Format: "text"}
	if strings.HasPrefix(strings.TrimSpace(raw), "{") {
		r.Format = "json"
	}
	return r, r.parse()
}

func (r *Reply) parse() error {
	if strings.TrimSpace(r.Raw) == "" {
		return fmt.Errorf("RAS at %s sent an empty status: %w", r.Addr, ErrNotRAS)
	}
	if r.Format == "json" || strings.HasPrefix(strings.TrimSpace(r.Raw), "{") {
		r.Format = "json"
		return r.parseJSON()
	}
	return r.parseText()
}

type jsonStatus struct {
	NCCLVersion string `json:"nccl_version"`
	CommsCount  int    `json:"communicators_count"`
	Comms       []struct {
		Hash  string `json:"hash"`
		Size  int    `json:"size"`
		Ranks []struct {
			Rank   int              `json:"rank"`
			Host   string           `json:"host"`
			PID    int              `json:"pid"`
			Cuda   int              `json:"cuda_dev"`
			Status map[string]any   `json:"status"`
			Counts map[string]int64 `json:"collective_counts"`
		} `json:"ranks"`
		Missing []struct {
			Rank   int    `json:"rank"`
			Host   string `json:"host"`
			PID    int    `json:"pid"`
			Cuda   int    `json:"cuda_dev"`
			Status struct {
				Unresponsive bool `json:"unresponsive"`
				Dead         bool `json:"considered_dead"`
			} `json:"status"`
		} `json:"missing_ranks"`
	} `json:"communicators"`
	RAS struct {
		Timeouts int `json:"timeouts_count"`
	} `json:"ras"`
}

func (r *Reply) parseJSON() error {
	var s jsonStatus
	if err := json.Unmarshal([]byte(r.Raw), &s); err != nil {
		// NCCL 2.28.7 … 2.28.9 write no comma after a missing rank's
		// "nvml_dev" (client_support.cc, jsonWriteMissingRank); fixed later.
		fixed := reMissingComma.ReplaceAllString(r.Raw, "$1,$2")
		if err2 := json.Unmarshal([]byte(fixed), &s); err2 != nil {
			return fmt.Errorf("RAS JSON status: %w (%w)", err, ErrNotRAS)
		}
	}
	r.NCCLVersion, r.Timeouts = s.NCCLVersion, s.RAS.Timeouts
	r.Comms = max(s.CommsCount, len(s.Comms))
	for _, c := range s.Comms {
		for _, m := range c.Missing {
			p := Peer{Comm: c.Hash, Rank: m.Rank, PID: m.PID, Node: m.Host, GPU: strconv.Itoa(m.Cuda), Dead: m.Status.Dead}
			r.Missing = append(r.Missing, p)
			if p.Dead {
				r.Dead = append(r.Dead, p)
			}
		}
		// Per operation, the ranks whose count is below the most common one.
		ops := map[string]bool{}
		for _, rk := range c.Ranks {
			for op := range rk.Counts {
				ops[op] = true
			}
			if v, ok := rk.Status["async_error"].(float64); ok && v != 0 {
				r.Errors = append(r.Errors, fmt.Sprintf("communicator %s rank %d has an asynchronous error (%d)", c.Hash, rk.Rank, int(v)))
			}
		}
		names := make([]string, 0, len(ops))
		for op := range ops {
			names = append(names, op)
		}
		sort.Strings(names)
		for _, op := range names {
			freq := map[int64]int{}
			for _, rk := range c.Ranks {
				freq[rk.Counts[op]]++
			}
			if len(freq) < 2 {
				continue
			}
			maj, best := int64(0), -1
			for v, n := range freq {
				if n > best || (n == best && v > maj) {
					maj, best = v, n
				}
			}
			m := Mismatch{Comm: c.Hash, What: op, Majority: maj}
			for _, rk := range c.Ranks {
				if rk.Counts[op] < maj {
					m.Behind = append(m.Behind, RankCount{Rank: rk.Rank, Count: rk.Counts[op], PID: rk.PID})
				}
			}
			if len(m.Behind) > 0 {
				r.Mismatches = append(r.Mismatches, m)
			}
		}
	}
	return nil
}

var (
	reMissingComma = regexp.MustCompile(`("nvml_dev": -?\d+)(\s*\n\s*"status")`)
	reVersion      = regexp.MustCompile(`^NCCL version (\S+)`)
	reCommHead     = regexp.MustCompile(`^(#\d+-\d+ \([0-9a-fA-F]+\)) (INCOMPLETE|ERROR|MISMATCH)\s*$`)
	reRankGPU      = regexp.MustCompile(`^\s+Rank (\d+)(?: has (?:launched up to operation (\d+)|not launched any operations|status (\S+)))? -- (?:GPU (\S+) managed by process (\d+) on node (\S+)|\[process information not found\])`)
	reProcess      = regexp.MustCompile(`^\s+Process (\d+) on node (\S+) managing GPUs? (\S+)`)
	reCountLine    = regexp.MustCompile(`^\s+(\d+) ranks? (?:have|has) (?:launched up to operation (\d+)|not launched any operations|status (\S+))\s*$`)
	reDiffOps      = regexp.MustCompile(`^\s+Communicator ranks have different (\S+) operation counts`)
	reMissList     = regexp.MustCompile(`^\s+The missing ranks?: ([\d,]+)\s*$`) // NCCL 2.24
	reDiffState    = regexp.MustCompile(`^\s+Communicator ranks have different status`)
	reErrLine      = regexp.MustCompile(`^\s+(Initialization|Asynchronous) errors? on (\d+) ranks?`)
	reTimeouts     = regexp.MustCompile(`^\s+Encountered (\d+) communication timeouts?`)
	reGroupRow     = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s*$`)
)

func (r *Reply) parseText() error {
	var block, comm string
	inTable := false
	var cur *Mismatch
	var groupCount int64 // count of the last "N ranks have launched up to …" line
	sawRAS := false
	for _, line := range strings.Split(r.Raw, "\n") {
		if m := reVersion.FindStringSubmatch(line); m != nil {
			r.NCCLVersion, sawRAS = m[1], true
			continue
		}
		if strings.HasPrefix(line, "Group     Comms") {
			inTable, sawRAS = true, true
			continue
		}
		if inTable {
			if m := reGroupRow.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[2])
				r.Comms += n
				continue
			}
			if strings.TrimSpace(line) == "" || !strings.HasPrefix(line, " ") {
				inTable = strings.HasPrefix(line, "    #")
			}
			if inTable {
				continue
			}
		}
		switch t := strings.TrimSpace(line); {
		case t == "Errors" || t == "Warnings" || t == "Job summary" || strings.HasPrefix(t, "Communicators"):
			sawRAS = true
			block, comm, cur = "", "", nil
			continue
		case line == "INCOMPLETE" || line == "DEAD" || line == "TIMEOUT":
			block, comm, cur = line, "", nil
			continue
		}
		if m := reCommHead.FindStringSubmatch(line); m != nil {
			block, comm, cur = m[2], m[1], nil
			continue
		}
		if m := reTimeouts.FindStringSubmatch(line); m != nil {
			r.Timeouts, _ = strconv.Atoi(m[1])
			continue
		}
		if m := reErrLine.FindStringSubmatch(line); m != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("communicator %s: %s error on %s rank(s)", comm, strings.ToLower(m[1]), m[2]))
			continue
		}
		if m := reDiffOps.FindStringSubmatch(line); m != nil && block == "MISMATCH" {
			r.Mismatches = append(r.Mismatches, Mismatch{Comm: comm, What: m[1]})
			cur = &r.Mismatches[len(r.Mismatches)-1]
			groupCount = 0
			continue
		}
		if reDiffState.MatchString(line) && block == "MISMATCH" {
			r.Mismatches = append(r.Mismatches, Mismatch{Comm: comm, What: "status"})
			cur = &r.Mismatches[len(r.Mismatches)-1]
			continue
		}
		if m := reCountLine.FindStringSubmatch(line); m != nil && cur != nil {
			groupCount, _ = strconv.ParseInt(m[2], 10, 64)
			if cur.What != "status" && groupCount > cur.Majority {
				cur.Majority = groupCount
			}
			continue
		}
		if m := reMissList.FindStringSubmatch(line); m != nil && block == "INCOMPLETE" && comm != "" {
			for _, f := range strings.Split(m[1], ",") {
				if n, err := strconv.Atoi(f); err == nil {
					r.Missing = append(r.Missing, Peer{Comm: comm, Rank: n})
				}
			}
			continue
		}
		if m := reProcess.FindStringSubmatch(line); m != nil {
			pid, _ := strconv.Atoi(m[1])
			p := Peer{Rank: -1, PID: pid, Node: m[2], GPU: m[3]}
			switch block {
			case "DEAD":
				p.Dead = true
				r.Dead = append(r.Dead, p)
			case "INCOMPLETE":
				r.Missing = append(r.Missing, p)
			}
			continue
		}
		if m := reRankGPU.FindStringSubmatch(line); m != nil {
			rank, _ := strconv.Atoi(m[1])
			pid, _ := strconv.Atoi(m[5])
			switch {
			case block == "INCOMPLETE" && comm != "":
				r.Missing = append(r.Missing, Peer{Comm: comm, Rank: rank, PID: pid, Node: m[6], GPU: m[4]})
			case block == "MISMATCH" && cur != nil && cur.What != "status":
				count := groupCount
				if m[2] != "" {
					count, _ = strconv.ParseInt(m[2], 10, 64)
				} else if strings.Contains(line, "not launched any operations") {
					count = 0
				}
				cur.Behind = append(cur.Behind, RankCount{Rank: rank, Count: count, PID: pid})
			case block == "MISMATCH" && cur != nil:
				cur.Behind = append(cur.Behind, RankCount{Rank: rank, PID: pid})
			}
		}
	}
	if !sawRAS {
		return fmt.Errorf("RAS status from %s has none of the sections NCCL writes: %w", r.Addr, ErrNotRAS)
	}
	// The outliers listed may be ahead of the rest as well as behind.
	for i := range r.Mismatches {
		m := &r.Mismatches[i]
		if m.What == "status" {
			continue
		}
		for _, rc := range m.Behind {
			m.Majority = max(m.Majority, rc.Count) // two-rank communicators print no group line
		}
		var behind []RankCount
		for _, rc := range m.Behind {
			if rc.Count < m.Majority {
				behind = append(behind, rc)
			}
		}
		m.Behind = behind
	}
	return nil
}

// Lagging returns the ranks RAS shows behind or missing, per communicator,
// lowest count first.
func (r *Reply) Lagging() []RankCount {
	seen := map[int]bool{}
	var out []RankCount
	for _, m := range r.Mismatches {
		for _, rc := range m.Behind {
			if !seen[rc.Rank] {
				seen[rc.Rank] = true
				out = append(out, rc)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Count < out[j].Count })
	return out
}
