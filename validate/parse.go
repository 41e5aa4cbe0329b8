package validate

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/explain"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
)

// ResultPrefix starts every machine-readable line of collective.py.
const ResultPrefix = "NCCLWIZ_RESULT "

// The patterns below are those of reference nccl-failures.md §2.2 and §5
// (tested there against real lines); none is anchored where launchers add
// prefixes such as "[rank3]:".
var (
	reChannel     = regexp.MustCompile(`(?:Channel|Ring) (\d+)(?:/(\d+))? : (\d+)\[([0-9a-fA-F]+)\] -> (\d+)\[([0-9a-fA-F]+)\] (?:\[(send|receive)\] )?via ([^\r\n]+?)\s*$`)
	reNCCLVersion = regexp.MustCompile(`NCCL version (\d+\.\d+\.\d+)`)
	reRow         = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.eE+\-]+)\s+([\d.eE+\-]+)\s+([\d.eE+\-]+)\s+(\S+)\s+([\d.eE+\-]+)\s+([\d.eE+\-]+)\s+([\d.eE+\-]+)\s+(\S+)`)
	reAvgBW       = regexp.MustCompile(`^# Avg bus bandwidth\s*: ([\d.eE+\-]+|nan|inf|-nan)\s*(OK|FAILED)?`)
	reOOB         = regexp.MustCompile(`^# Out of bounds values\s*: (\d+) (OK|FAILED)`)
	reTestFailure = regexp.MustCompile(`(\S+): Test (NCCL|CUDA) failure (\S+):(\d+) '([^']*)'`)
	reTestTimeout = regexp.MustCompile(`(\S+): Test timeout \((\d+)s\)`)
	rePyException = regexp.MustCompile(`^(?:\[(?:rank|default)\d+\]:\s?)?((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt)):\s?(.*)$`)
	reRootExit    = regexp.MustCompile(`^\s*exitcode\s*:\s*(-?\d+) \(pid: (\d+)\)`)
	reRootRank    = regexp.MustCompile(`^\s*rank\s*:\s*(\d+)`)
	reHostPrefix  = regexp.MustCompile(`^(?:\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\] )?(?:\[(?:rank|default)\d+\]:)?[A-Za-z0-9_.\-]+:\d+:\d+ (?:\[\d+\] )?`)
)

// TransportClass maps the text after "via" to a transport class, with all
// P2P flavours as one (the ladder only asks whether P2P was used).
func TransportClass(via string) string {
	c := explain.TransportClass(via)
	if strings.HasPrefix(c, "P2P") {
		return "P2P"
	}
	return c
}

// scriptLine is one JSON object printed by collective.py.
type scriptLine struct {
	V         int      `json:"v"`
	Kind      string   `json:"kind"`
	Rank      int      `json:"rank"`
	World     int      `json:"world"`
	LocalRank int      `json:"local_rank"`
	Torch     string   `json:"torch"`
	CUDA      string   `json:"cuda"`
	NCCL      string   `json:"nccl"`
	Device    string   `json:"device"`
	CC        string   `json:"cc"`
	Op        string   `json:"op"`
	Bytes     int64    `json:"bytes"`
	Count     int64    `json:"count"`
	Dtype     string   `json:"dtype"`
	OK        *bool    `json:"ok"`
	Wrong     int64    `json:"wrong"`
	Iters     int      `json:"iters"`
	TimeUS    float64  `json:"time_us"`
	AlgBW     float64  `json:"algbw"`
	BusBW     float64  `json:"busbw"`
	Stage     string   `json:"stage"`
	Type      string   `json:"type"`
	Error     string   `json:"error"`
	Traceback []string `json:"traceback"`
}

// ParseScriptLine extracts the JSON object of a collective.py line, which
// a launcher may have prefixed (e.g. "[rank0]:"). ok is false for other lines.
func ParseScriptLine(line string) (scriptLine, bool, error) {
	i := strings.Index(line, ResultPrefix+"{")
	if i < 0 {
		return scriptLine{}, false, nil
	}
	var s scriptLine
	if err := json.Unmarshal([]byte(strings.TrimSpace(line[i+len(ResultPrefix):])), &s); err != nil {
		return scriptLine{}, true, fmt.Errorf("malformed result line: %w", err)
	}
	if s.V != 1 {
		return s, true, fmt.Errorf("result line schema %d, want 1", s.V)
	}
	return s, true, nil
}

type sizeKey struct {
	op    string
	bytes int64
}

type transportAgg struct {
	n   int
	via map[string]int
}

// parser reads one rung's output, line by line.
type parser struct {
	ranks int

	transports map[string]*transportAgg
	tOrder     []string

	sizes   map[sizeKey]*SizeResult
	sOrder  []sizeKey
	reports map[sizeKey]map[int]bool

	starts  map[int]bool
	dones   map[int]bool
	doneBad map[int]bool

	errors    []string
	errSeen   map[string]bool
	malformed int

	ncclVersion, torch, cuda, device string

	oob      *int64
	avgBW    float64
	hasAvg   bool
	rowsSeen int

	rootRank   int
	addrInUse  bool
	testFailed bool
}

func newParser(ranks int) *parser {
	return &parser{
		ranks: ranks, transports: map[string]*transportAgg{}, sizes: map[sizeKey]*SizeResult{},
		reports: map[sizeKey]map[int]bool{}, starts: map[int]bool{}, dones: map[int]bool{},
		doneBad: map[int]bool{}, errSeen: map[string]bool{}, rootRank: -1,
	}
}

// maxErrors bounds the error lines kept per rung.
const maxErrors = 12

func (p *parser) addError(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" {
		return false
	}
	key := reHostPrefix.ReplaceAllString(s, "")
	if p.errSeen[key] {
		return false
	}
	p.errSeen[key] = true
	if len(p.errors) >= maxErrors {
		return false
	}
	if len(s) > 400 {
		s = textwrap.Clip(s, 400) // cells, never half a rune
	}
	p.errors = append(p.errors, s)
	return true
}

// line consumes one output line and returns the events it produces. Cheap
// literal tests guard each pattern: most lines of an NCCL_DEBUG=INFO log
// match none of them.
func (p *parser) line(s string) []Event {
	var evs []Event
	if strings.Contains(s, ResultPrefix) {
		sl, ok, err := ParseScriptLine(s)
		if ok {
			if err != nil {
				p.malformed++
				return nil
			}
			return p.script(sl)
		}
	}
	if strings.Contains(s, " via ") {
		if m := reChannel.FindStringSubmatch(s); m != nil {
			via := m[8]
			class := TransportClass(via)
			t := p.transports[class]
			if t == nil {
				t = &transportAgg{via: map[string]int{}}
				p.transports[class] = t
				p.tOrder = append(p.tOrder, class)
				evs = append(evs, Event{Kind: EventTransport, Text: "NCCL connects via " + via})
			}
			t.n++
			t.via[via]++
			return evs
		}
	}
	if p.ncclVersion == "" && strings.Contains(s, "NCCL version ") {
		if m := reNCCLVersion.FindStringSubmatch(s); m != nil {
			p.ncclVersion = m[1]
		}
	}
	if i := strings.Index(s, "NCCL WARN "); i >= 0 {
		if p.addError(s[i:]) {
			evs = append(evs, Event{Kind: EventLog, Text: s[i:]})
		}
		return evs
	}
	if strings.Contains(s, " NCCL INFO ") {
		return nil // the rest of NCCL's chatter says nothing the verdicts use
	}
	if strings.Contains(s, "Address already in use") {
		p.addrInUse = true
	}
	trimmed := strings.TrimLeft(s, " ")
	if trimmed != "" && trimmed[0] >= '0' && trimmed[0] <= '9' {
		if m := reRow.FindStringSubmatch(s); m != nil {
			if sr, ok := rowResult(m); ok {
				p.rowsSeen++
				p.putSize(sr)
				evs = append(evs, Event{Kind: EventMeasure, Size: &sr})
			}
			return evs
		}
	}
	if strings.HasPrefix(s, "# ") {
		if m := reOOB.FindStringSubmatch(s); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			p.oob = &n
			return nil
		}
		if m := reAvgBW.FindStringSubmatch(s); m != nil {
			if f, err := strconv.ParseFloat(m[1], 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				p.avgBW, p.hasAvg = f, true
			}
			return nil
		}
	}
	if strings.Contains(s, ": Test ") {
		if m := reTestFailure.FindStringSubmatch(s); m != nil {
			p.testFailed = true
			if p.addError(fmt.Sprintf("The nccl-tests backend failed at %s:%s (%s error: %s).", m[3], m[4], m[2], strings.TrimSuffix(m[5], "."))) {
				evs = append(evs, Event{Kind: EventLog, Text: s})
			}
			return evs
		}
		if m := reTestTimeout.FindStringSubmatch(s); m != nil {
			p.testFailed = true
			p.addError("The nccl-tests backend stopped: its own timeout of " + m[2] + " s expired.")
			return nil
		}
	}
	if strings.HasPrefix(trimmed, "rank ") {
		if m := reRootRank.FindStringSubmatch(s); m != nil {
			p.rootRank, _ = strconv.Atoi(m[1])
			return nil
		}
	}
	if strings.HasPrefix(trimmed, "exitcode") {
		if m := reRootExit.FindStringSubmatch(s); m != nil {
			who := "a rank"
			if p.rootRank >= 0 {
				who = "rank " + strconv.Itoa(p.rootRank)
			}
			msg := fmt.Sprintf("Under the torchrun backend, %s exited with code %s%s, the first observed failure.", who, m[1], signalSuffix(m[1]))
			if p.addError(msg) {
				evs = append(evs, Event{Kind: EventLog, Text: msg})
			}
			return evs
		}
	}
	// torchrun's ChildFailedError only wraps the root-cause block above.
	if strings.Contains(s, "Error") || strings.Contains(s, "Exception") || strings.Contains(s, "Interrupt") {
		if m := rePyException.FindStringSubmatch(s); m != nil && !strings.HasSuffix(m[1], "ChildFailedError") {
			if p.addError(m[1] + ": " + m[2]) {
				evs = append(evs, Event{Kind: EventLog, Text: s})
			}
		}
	}
	return evs
}

func (p *parser) script(sl scriptLine) []Event {
	switch sl.Kind {
	case "start":
		p.starts[sl.Rank] = true
		if p.torch == "" {
			p.torch, p.cuda, p.device = sl.Torch, sl.CUDA, sl.Device
		}
		if p.ncclVersion == "" && sl.NCCL != "" {
			p.ncclVersion = sl.NCCL
		}
	case "result":
		k := sizeKey{sl.Op, sl.Bytes}
		r := p.sizes[k]
		if r == nil {
			r = &SizeResult{Op: sl.Op, Bytes: sl.Bytes, OK: true, Checked: true, BusBW: math.Inf(1), AlgBW: math.Inf(1), HasBW: true}
			p.sizes[k] = r
			p.sOrder = append(p.sOrder, k)
			p.reports[k] = map[int]bool{}
		}
		if p.reports[k][sl.Rank] {
			return nil // a duplicate line (e.g. torchrun --tee) counts once
		}
		p.reports[k][sl.Rank] = true
		r.Ranks++
		r.Wrong += sl.Wrong
		if sl.OK == nil || !*sl.OK || sl.Wrong > 0 {
			r.OK = false
		}
		r.BusBW = math.Min(r.BusBW, sl.BusBW)
		r.AlgBW = math.Min(r.AlgBW, sl.AlgBW)
		r.TimeUS = math.Max(r.TimeUS, sl.TimeUS)
		var evs []Event
		if sl.OK == nil || !*sl.OK || sl.Wrong > 0 {
			// Said at once: the other ranks may never report this size.
			evs = append(evs, Event{Kind: EventLog, Text: fmt.Sprintf("rank %d: %d WRONG values in %s at %s", sl.Rank, sl.Wrong, sl.Op, FormatBytes(sl.Bytes))})
		}
		if r.Ranks == p.ranks {
			c := *r
			evs = append(evs, Event{Kind: EventMeasure, Size: &c})
		}
		return evs
	case "done":
		p.dones[sl.Rank] = true
		if sl.OK == nil || !*sl.OK {
			p.doneBad[sl.Rank] = true
		}
	case "error":
		msg := fmt.Sprintf("rank %d failed in %s: %s: %s", sl.Rank, sl.Stage, sl.Type, firstLine(sl.Error))
		if p.addError(msg) {
			return []Event{{Kind: EventLog, Text: msg}}
		}
	}
	return nil
}

func (p *parser) putSize(sr SizeResult) {
	k := sizeKey{sr.Op, sr.Bytes}
	if _, ok := p.sizes[k]; !ok {
		p.sOrder = append(p.sOrder, k)
	}
	c := sr
	p.sizes[k] = &c
}

// rowResult reads one nccl-tests table row (reference §6.1): size count
// type redop root, then time algbw busbw #wrong for out-of-place and in-place.
func rowResult(m []string) (SizeResult, bool) {
	size, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return SizeResult{}, false
	}
	oop, ok1 := parseFloats(m[6], m[7], m[8])
	ip, ok2 := parseFloats(m[10], m[11], m[12])
	if !ok1 || !ok2 {
		return SizeResult{}, false
	}
	sr := SizeResult{Op: "all_reduce", Bytes: size, Checked: true, OK: true, HasBW: true}
	for _, w := range []string{m[9], m[13]} {
		n, err := strconv.ParseFloat(w, 64)
		if err != nil || math.IsNaN(n) {
			sr.Checked, sr.OK = false, false // "N/A": validation off
			continue
		}
		sr.Wrong += int64(n)
		if n != 0 {
			sr.OK = false
		}
	}
	sr.TimeUS = math.Max(oop[0], ip[0])
	sr.AlgBW = math.Max(oop[1], ip[1])
	sr.BusBW = math.Max(oop[2], ip[2])
	return sr, true
}

func parseFloats(ss ...string) ([]float64, bool) {
	out := make([]float64, len(ss))
	for i, s := range ss {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, false
		}
		out[i] = f
	}
	return out, true
}

// flexFloat accepts nccl-tests' JSON numbers, which may be the strings
// "nan", "true"/"false" or null (src/util.cu jsonDouble/jsonBool).
type flexFloat struct {
	V     float64
	Valid bool
}

func (f *flexFloat) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	switch s {
	case "null", "nan", "-nan", "":
		f.Valid = false
		return nil
	case "true":
		f.V, f.Valid = 1, true
		return nil
	case "false":
		f.V, f.Valid = 0, true
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("not a number: %q", s)
	}
	f.V, f.Valid = v, !math.IsNaN(v)
	return nil
}

type ntPerf struct {
	Time    flexFloat `json:"time"`
	CPUTime flexFloat `json:"cpu_time"`
	AlgBW   flexFloat `json:"alg_bw"`
	BusBW   flexFloat `json:"bus_bw"`
	NWrong  flexFloat `json:"nwrong"`
}

type ntJSON struct {
	Version     int `json:"version"`
	NCCLVersion int `json:"nccl_version"`
	Results     []struct {
		Size       int64   `json:"size"`
		Redop      string  `json:"redop"`
		OutOfPlace *ntPerf `json:"out_of_place"`
		InPlace    *ntPerf `json:"in_place"`
	} `json:"results"`
	OutOfBounds *struct {
		Count int64 `json:"count"`
	} `json:"out_of_bounds"`
	AverageBusBandwidth *struct {
		Bandwidth flexFloat `json:"bandwidth"`
	} `json:"average_bus_bandwidth"`
}

// parseNCCLTestsJSON reads the file written by all_reduce_perf -J (v2.18.5+,
// src/util.cu). It returns the rows, the out-of-bounds count and the
// average busbw when present.
func parseNCCLTestsJSON(path string) ([]SizeResult, *int64, *float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	var doc ntJSON
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, nil, nil, fmt.Errorf("nccl-tests JSON %s: %w", path, err)
	}
	var rows []SizeResult
	for _, r := range doc.Results {
		sr := SizeResult{Op: "all_reduce", Bytes: r.Size, OK: true, Checked: true}
		parts := 0
		for _, p := range []*ntPerf{r.OutOfPlace, r.InPlace} {
			if p == nil {
				continue
			}
			parts++
			if !p.NWrong.Valid {
				sr.Checked, sr.OK = false, false
			} else {
				sr.Wrong += int64(p.NWrong.V)
				if p.NWrong.V != 0 {
					sr.OK = false
				}
			}
			if p.BusBW.Valid && (!sr.HasBW || p.BusBW.V > sr.BusBW) {
				sr.BusBW, sr.HasBW = p.BusBW.V, true
			}
			if p.AlgBW.Valid && p.AlgBW.V > sr.AlgBW {
				sr.AlgBW = p.AlgBW.V
			}
			t := p.Time
			if !t.Valid {
				t = p.CPUTime
			}
			if t.Valid && t.V > sr.TimeUS {
				sr.TimeUS = t.V
			}
		}
		if parts == 0 {
			sr.Checked, sr.OK = false, false
		}
		rows = append(rows, sr)
	}
	var oob *int64
	if doc.OutOfBounds != nil {
		n := doc.OutOfBounds.Count
		oob = &n
	}
	var avg *float64
	if doc.AverageBusBandwidth != nil && doc.AverageBusBandwidth.Bandwidth.Valid {
		v := doc.AverageBusBandwidth.Bandwidth.V
		avg = &v
	}
	return rows, oob, avg, nil
}

// transportsOut returns the transports seen, most connections first.
func (p *parser) transportsOut() []Transport {
	var out []Transport
	for _, c := range p.tOrder {
		t := p.transports[c]
		best, bestN := "", -1
		for via, n := range t.via {
			if n > bestN || (n == bestN && via < best) {
				best, bestN = via, n
			}
		}
		out = append(out, Transport{Class: c, Via: best, Connections: t.n})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Connections > out[j].Connections })
	return out
}

// sizesOut returns the sizes in the order measured.
func (p *parser) sizesOut() []SizeResult {
	out := make([]SizeResult, 0, len(p.sOrder))
	for _, k := range p.sOrder {
		r := *p.sizes[k]
		if math.IsInf(r.BusBW, 1) {
			r.BusBW, r.HasBW = 0, false
		}
		if math.IsInf(r.AlgBW, 1) {
			r.AlgBW = 0
		}
		out = append(out, r)
	}
	return out
}

// signalSuffix names the signal of torchrun's negative exit codes.
func signalSuffix(code string) string {
	n, err := strconv.Atoi(code)
	if err != nil || n >= 0 || n < -64 {
		return ""
	}
	return " (" + unix.SignalName(syscall.Signal(-n)) + ")"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
