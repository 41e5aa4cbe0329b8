// Package flightrec reads PyTorch's NCCL flight-recorder dumps (the pickle
// DebugInfoWriter writes to TORCH_NCCL_DEBUG_INFO_TEMP_FILE /
// TORCH_FR_DUMP_TEMP_FILE + rank, and the JSON form of
// dump_nccl_trace_json) and does what PyTorch's tools/flight_recorder
// (fr_trace) does, without Python: per process group, each rank's last
// enqueued and completed collective, the first collective where the ranks
// disagree, and the rank that is behind.
package flightrec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Entry is one recorded collective or point-to-point operation.
type Entry struct {
	RecordID int    `json:"record_id"`
	PGID     int    `json:"pg_id"`
	PG       string `json:"process_group"`
	Seq      int    `json:"collective_seq_id"`
	P2PSeq   int    `json:"p2p_seq_id"`
	IsP2P    bool   `json:"is_p2p"`
	// Op is the profiling name, e.g. "nccl:all_reduce".
	Op        string `json:"op"`
	InSizes   string `json:"input_sizes"`
	OutSizes  string `json:"output_sizes"`
	InDtypes  string `json:"input_dtypes"`
	OutDtypes string `json:"output_dtypes"`
	// State is "scheduled", "started" or "completed".
	State string `json:"state"`
}

// Signature is what every rank of a collective must agree on.
func (e Entry) Signature() string {
	return e.Op + " in " + e.InSizes + " " + e.InDtypes + " out " + e.OutSizes + " " + e.OutDtypes
}

// PG is a process group as pg_config records it.
type PG struct {
	Name  string `json:"name"`
	Desc  string `json:"desc"`
	Ranks []int  `json:"ranks"`
}

// Status is pg_status: the process group's sequence counters.
type Status struct {
	Enqueued  int `json:"last_enqueued_collective"`
	Started   int `json:"last_started_collective"`
	Completed int `json:"last_completed_collective"`
}

// Dump is one rank's dump.
type Dump struct {
	Rank    int               `json:"rank"`
	Path    string            `json:"path"`
	Version string            `json:"version"`
	PGs     map[string]PG     `json:"-"`
	Status  map[string]Status `json:"-"` // by pg_id
	Entries []Entry           `json:"-"`
}

// maxFile bounds a dump's size: 20 000 entries with stacks stay far below.
const maxFile = 256 << 20

// Parse decodes one rank's dump.
func Parse(b []byte, rank int) (*Dump, error) {
	if len(b) > maxFile {
		return nil, fmt.Errorf("dump of %d bytes is larger than %d: %w", len(b), maxFile, ErrFormat)
	}
	m, err := decode(b)
	if err != nil {
		return nil, err
	}
	d := &Dump{Rank: rank, PGs: map[string]PG{}, Status: map[string]Status{}}
	d.Version = asString(m["version"])
	if d.Version == "" {
		return nil, fmt.Errorf("no \"version\" key: %w", ErrFormat)
	}
	if cfg, ok := m["pg_config"].(map[string]any); ok {
		for k, v := range cfg {
			pv, _ := v.(map[string]any)
			pg := PG{Name: k, Desc: asString(pv["desc"])}
			if n := asString(pv["name"]); n != "" {
				pg.Name = n
			}
			pg.Ranks = parseRanks(pv["ranks"])
			d.PGs[pg.Name] = pg
		}
	}
	if st, ok := m["pg_status"].(map[string]any); ok {
		for k, v := range st {
			sv, _ := v.(map[string]any)
			var s Status
			s.Enqueued, _ = asInt(sv["last_enqueued_collective"])
			s.Started, _ = asInt(sv["last_started_collective"])
			s.Completed, _ = asInt(sv["last_completed_collective"])
			d.Status[k] = s
		}
	}
	entries, _ := m["entries"].([]any)
	for _, ev := range entries {
		em, ok := ev.(map[string]any)
		if !ok {
			continue
		}
		e := Entry{Op: asString(em["profiling_name"]), State: asString(em["state"])}
		e.RecordID, _ = asInt(em["record_id"])
		e.PGID, _ = asInt(em["pg_id"])
		e.Seq, _ = asInt(em["collective_seq_id"])
		e.P2PSeq, _ = asInt(em["p2p_seq_id"])
		e.IsP2P, _ = em["is_p2p"].(bool)
		// process_group is a (name, desc) tuple; a list in JSON.
		if pg, ok := em["process_group"].([]any); ok && len(pg) > 0 {
			e.PG = asString(pg[0])
		} else {
			e.PG = asString(em["process_group"])
		}
		e.InSizes, e.OutSizes = render(em["input_sizes"]), render(em["output_sizes"])
		e.InDtypes, e.OutDtypes = render(em["input_dtypes"]), render(em["output_dtypes"])
		d.Entries = append(d.Entries, e)
	}
	return d, nil
}

// parseRanks reads pg_config's ranks: a string "[0, 1, 2]" as PyTorch
// writes it (ranks_str), or a list.
func parseRanks(v any) []int {
	var out []int
	switch x := v.(type) {
	case string:
		for _, f := range strings.FieldsFunc(x, func(r rune) bool { return r == '[' || r == ']' || r == ',' || r == ' ' }) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	case []any:
		for _, e := range x {
			if n, ok := asInt(e); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// render prints sizes and dtypes the way fr_trace does, compactly.
func render(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = render(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// RankState is one rank's position in one process group.
type RankState struct {
	Rank          int    `json:"rank"`
	HasDump       bool   `json:"has_dump"`
	LastEnqueued  int    `json:"last_enqueued"`
	LastCompleted int    `json:"last_completed"`
	LastOp        string `json:"last_op,omitempty"`
}

// Disagreement is the first collective where the ranks of a group differ.
type Disagreement struct {
	Seq int `json:"collective_seq_id"`
	// Kind is "op", "sizes" or "dtypes" when ranks recorded different
	// collectives, "missing" when some ranks never enqueued it.
	Kind string `json:"kind"`
	// ByRank holds what each rank recorded at Seq ("" = nothing).
	ByRank map[int]string `json:"by_rank"`
	// Odd are the ranks that differ from the majority (or lack the entry).
	Odd []int `json:"odd_ranks"`
}

// GroupReport is the analysis of one process group.
type GroupReport struct {
	Name  string      `json:"name"`
	Desc  string      `json:"desc,omitempty"`
	Ranks []RankState `json:"ranks"`
	// NoDump lists member ranks without a dump.
	NoDump   []int         `json:"no_dump,omitempty"`
	First    *Disagreement `json:"first_disagreement,omitempty"`
	Lagging  []int         `json:"lagging,omitempty"`
	Verdict  string        `json:"verdict"`
	Suspects []int         `json:"suspects,omitempty"`
}

// Analyze compares the dumps of a job's ranks group by group.
func Analyze(dumps []*Dump) []GroupReport {
	byRank := map[int]*Dump{}
	groups := map[string]PG{}
	for _, d := range dumps {
		byRank[d.Rank] = d
		for name, pg := range d.PGs {
			if g, ok := groups[name]; !ok || len(g.Ranks) < len(pg.Ranks) {
				groups[name] = pg
			}
		}
		for _, e := range d.Entries {
			if _, ok := groups[e.PG]; !ok && e.PG != "" {
				groups[e.PG] = PG{Name: e.PG}
			}
		}
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []GroupReport
	for _, n := range names {
		out = append(out, analyzeGroup(groups[n], byRank))
	}
	return out
}

func analyzeGroup(pg PG, byRank map[int]*Dump) GroupReport {
	r := GroupReport{Name: pg.Name, Desc: pg.Desc}
	members := pg.Ranks
	if len(members) == 0 {
		for rank, d := range byRank {
			for _, e := range d.Entries {
				if e.PG == pg.Name {
					members = append(members, rank)
					break
				}
			}
		}
		sort.Ints(members)
	}
	seqs := map[int]map[int]Entry{} // rank -> seq -> entry
	lo, hi := 0, 0
	for _, rank := range members {
		d, ok := byRank[rank]
		st := RankState{Rank: rank, HasDump: ok}
		if !ok {
			r.NoDump = append(r.NoDump, rank)
			r.Ranks = append(r.Ranks, st)
			continue
		}
		m := map[int]Entry{}
		minSeq := -1
		pgid := -1
		for _, e := range d.Entries {
			if e.PG != pg.Name || e.IsP2P || e.Seq <= 0 {
				continue
			}
			pgid = e.PGID
			m[e.Seq] = e
			if minSeq < 0 || e.Seq < minSeq {
				minSeq = e.Seq
			}
			if e.Seq > st.LastEnqueued {
				st.LastEnqueued, st.LastOp = e.Seq, e.Op
			}
			if e.State == "completed" && e.Seq > st.LastCompleted {
				st.LastCompleted = e.Seq
			}
		}
		if s, ok := d.Status[strconv.Itoa(pgid)]; ok && pgid >= 0 {
			st.LastEnqueued = max(st.LastEnqueued, s.Enqueued)
			st.LastCompleted = max(st.LastCompleted, s.Completed)
		}
		seqs[rank] = m
		lo = max(lo, minSeq) // the ring buffer may have dropped older entries
		hi = max(hi, st.LastEnqueued)
		r.Ranks = append(r.Ranks, st)
	}
	have := make([]int, 0, len(seqs))
	for rank := range seqs {
		have = append(have, rank)
	}
	sort.Ints(have)
	// The first sequence number where the ranks that have dumps differ.
	for seq := max(lo, 1); seq <= hi && r.First == nil && len(have) > 1; seq++ {
		sigs := map[string][]int{}
		by := map[int]string{}
		var absent []int
		for _, rank := range have {
			e, ok := seqs[rank][seq]
			if !ok {
				absent = append(absent, rank)
				by[rank] = ""
				continue
			}
			by[rank] = e.Signature()
			sigs[e.Signature()] = append(sigs[e.Signature()], rank)
		}
		switch {
		case len(sigs) > 1:
			kind := "sizes"
			ops := map[string]bool{}
			dts := map[string]bool{}
			for _, rank := range have {
				if e, ok := seqs[rank][seq]; ok {
					ops[e.Op] = true
					dts[e.InDtypes+e.OutDtypes] = true
				}
			}
			if len(ops) > 1 {
				kind = "op"
			} else if len(dts) > 1 {
				kind = "dtypes"
			}
			r.First = &Disagreement{Seq: seq, Kind: kind, ByRank: by, Odd: minority(sigs)}
		case len(absent) > 0:
			r.First = &Disagreement{Seq: seq, Kind: "missing", ByRank: by, Odd: absent}
		}
	}
	// Lagging: the ranks that enqueued the fewest collectives.
	minE, maxE := -1, -1
	for _, st := range r.Ranks {
		if !st.HasDump {
			continue
		}
		if minE < 0 || st.LastEnqueued < minE {
			minE = st.LastEnqueued
		}
		maxE = max(maxE, st.LastEnqueued)
	}
	if minE >= 0 && minE < maxE {
		for _, st := range r.Ranks {
			if st.HasDump && st.LastEnqueued == minE {
				r.Lagging = append(r.Lagging, st.Rank)
			}
		}
	}
	r.judge()
	return r
}

// minority returns the ranks outside the largest group of equal signatures.
func minority(sigs map[string][]int) []int {
	best := ""
	for s, rs := range sigs {
		if best == "" || len(rs) > len(sigs[best]) || (len(rs) == len(sigs[best]) && s < best) {
			best = s
		}
	}
	var out []int
	for s, rs := range sigs {
		if s != best {
			out = append(out, rs...)
		}
	}
	sort.Ints(out)
	return out
}

func (r *GroupReport) judge() {
	switch {
	case r.First != nil && r.First.Kind != "missing":
		r.Suspects = r.First.Odd
		r.Verdict = fmt.Sprintf("desync at collective #%d: rank(s) %s recorded a different %s than the others — the ranks run different code paths (a condition on the rank, a skipped step, different shapes)", r.First.Seq, ints(r.First.Odd), kindWord(r.First.Kind))
	case len(r.Lagging) > 0:
		r.Suspects = r.Lagging
		r.Verdict = fmt.Sprintf("rank(s) %s are behind: they never enqueued collective #%d that the others wait in", ints(r.Lagging), r.maxEnqueued())
	case len(r.NoDump) > 0:
		r.Suspects = r.NoDump
		r.Verdict = fmt.Sprintf("no dump from rank(s) %s: they may have died, hung before dumping, or dump elsewhere (another node's /tmp)", ints(r.NoDump))
	case r.allComplete():
		r.Verdict = "every rank completed every collective it enqueued"
	default:
		r.Verdict = fmt.Sprintf("every rank enqueued collective #%d and it has not completed: they all wait in it (a network or NVLink problem, or a rank of this group on another machine)", r.maxEnqueued())
	}
}

func (r *GroupReport) maxEnqueued() int {
	m := 0
	for _, st := range r.Ranks {
		m = max(m, st.LastEnqueued)
	}
	return m
}

func (r *GroupReport) allComplete() bool {
	for _, st := range r.Ranks {
		if st.HasDump && st.LastCompleted < st.LastEnqueued {
			return false
		}
	}
	return true
}

func kindWord(k string) string {
	switch k {
	case "op":
		return "collective"
	case "dtypes":
		return "dtype"
	}
	return "tensor size"
}

func ints(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, ", ")
}
