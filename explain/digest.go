package explain

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// Limits that keep the digest's memory constant whatever the log size.
const (
	maxPeerPairs  = 4096
	maxListItems  = 32
	maxWhere      = 16
	maxRankMap    = 8192
	maxEnvEntries = 64
)

var (
	reVersionLine = linetext.MustFastRe(`NCCL version (\d+\.\d+\.\d+)((?:a|b|rc|dev|post)\d+|-\d+)?(?:\+cuda(\d+\.\d+))?`)
	reCommSummary = linetext.MustFastRe(`comm 0x[0-9a-f]+ rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) localRank (\d+)`)
	reBootstrap   = linetext.MustFastRe(`Bootstrap ?: Using(?: \[\d+\])? ?([^:\s]+):(\S+?)<\d+>`)
	reSockIfs     = linetext.MustFastRe(`NET/Socket : Using((?: \[\d+\][^:\s]+:\S+<\d+>)+)`)
	reSockIf      = linetext.MustFastRe(`\[\d+\]([^:\s]+):(\S+?)<\d+>`)
	reIBUsing     = linetext.MustFastRe(`NET/IB ?: Using((?: \[\d+\]\S+)+)`)
	reIBDev       = linetext.MustFastRe(`\[\d+\](\S+)`)
	reUsingNet    = linetext.MustFastRe(`NCCL INFO Using network (\S+)`)
	reEnvSet      = linetext.MustFastRe(`NCCL INFO (NCCL_\w+) set by environment to ([^\r\n]*?)\.?\s*$`)
	reDriver      = linetext.MustFastRe(`NCCL INFO cudaDriverVersion (\d+)`)
	reBacktrace   = linetext.MustFastRe(`NCCL INFO ([\w./\-]+\.(?:cc|h|cu|c|cpp)):(\d+) -> (\d+)`)
)

// ncclResult names for backtrace codes (src/nccl.h.in).
var ncclResultNames = map[string]string{
	"1": "ncclUnhandledCudaError", "2": "ncclSystemError", "3": "ncclInternalError",
	"4": "ncclInvalidArgument", "5": "ncclInvalidUsage", "6": "ncclRemoteError",
	"7": "ncclInProgress", "8": "ncclTimeout",
}

// TransportClasses are the digest's transport classes, in display order.
var TransportClasses = []string{"P2P/CUMEM", "P2P/IPC", "P2P/direct", "P2P/indirect", "P2P/MNNVL", "P2P",
	"SHM", "NET/IB", "NET/Socket", "NET", "COLLNET"}

// TransportClass maps the text after "via" in an NCCL channel line to its
// transport (P2P/CUMEM, P2P/IPC, SHM, NET/IB, NET/Socket, …).
func TransportClass(via string) string {
	switch {
	case strings.HasPrefix(via, "P2P/CUMEM"):
		return "P2P/CUMEM"
	case strings.HasPrefix(via, "P2P/IPC"):
		return "P2P/IPC"
	case strings.HasPrefix(via, "P2P/direct"):
		return "P2P/direct"
	case strings.HasPrefix(via, "P2P/indirect"):
		return "P2P/indirect"
	case strings.HasPrefix(via, "P2P/MNNVL"):
		return "P2P/MNNVL"
	case strings.HasPrefix(via, "P2P"):
		return "P2P"
	case strings.HasPrefix(via, "SHM"), strings.HasPrefix(via, "direct shared memory"):
		return "SHM"
	case strings.HasPrefix(via, "NET/IB"):
		return "NET/IB"
	case strings.HasPrefix(via, "NET/Socket"):
		return "NET/Socket"
	case strings.HasPrefix(via, "NET/"):
		return "NET"
	case strings.HasPrefix(via, "COLLNET"):
		return "COLLNET"
	}
	return "other"
}

// channelLine is one parsed "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC".
type channelLine struct {
	From, To int
	Via      []byte
}

// parseChannel reads a transport line by hand: it runs on every channel
// line of an INFO log, where a regexp would dominate the run time. It
// accepts exactly what the reference transport regex (reference §5, the
// p2p-hang-acs-iommu signature) accepts; a test checks the two agree.
func parseChannel(line []byte) (channelLine, bool) {
	for off := 0; off < len(line); {
		i := indexChannelWord(line[off:])
		if i < 0 {
			return channelLine{}, false
		}
		start := off + i
		if cl, ok := parseChannelAt(line, start); ok {
			return cl, true
		}
		off = start + 1
	}
	return channelLine{}, false
}

// indexChannelWord finds the next "Channel " or "Ring ". A "Ring " that
// comes first starts before the "Channel ", so only that stretch is
// searched for it.
func indexChannelWord(b []byte) int {
	c := bytes.Index(b, []byte("Channel "))
	limit := len(b)
	if c >= 0 {
		limit = min(c+len("Ring ")-1, len(b))
	}
	if r := bytes.Index(b[:limit], []byte("Ring ")); r >= 0 && (c < 0 || r < c) {
		return r
	}
	return c
}

func parseChannelAt(line []byte, i int) (channelLine, bool) {
	var cl channelLine
	p := line[i:]
	if bytes.HasPrefix(p, []byte("Channel ")) {
		p = p[8:]
	} else {
		p = p[5:]
	}
	var ok bool
	if p, ok = linetext.SkipDigits(p); !ok {
		return cl, false
	}
	if len(p) > 0 && p[0] == '/' {
		if p, ok = linetext.SkipDigits(p[1:]); !ok {
			return cl, false
		}
	}
	if !bytes.HasPrefix(p, []byte(" : ")) {
		return cl, false
	}
	p = p[3:]
	var n int
	if n, p, ok = rankDev(p); !ok {
		return cl, false
	}
	cl.From = n
	if !bytes.HasPrefix(p, []byte(" -> ")) {
		return cl, false
	}
	if n, p, ok = rankDev(p[4:]); !ok {
		return cl, false
	}
	cl.To = n
	if !bytes.HasPrefix(p, []byte(" ")) {
		return cl, false
	}
	p = p[1:]
	if bytes.HasPrefix(p, []byte("[send] ")) {
		p = p[7:]
	} else if bytes.HasPrefix(p, []byte("[receive] ")) {
		p = p[10:]
	}
	if !bytes.HasPrefix(p, []byte("via ")) {
		return cl, false
	}
	p = p[4:]
	// The regex takes one or more characters other than \r \n, then only
	// whitespace (\s) up to the end of the text.
	f := bytes.IndexAny(p, "\r\n")
	if f < 0 {
		f = len(p)
	}
	if f == 0 {
		return cl, false
	}
	for _, c := range p[f:] {
		if !isRESpace(c) {
			return cl, false
		}
	}
	end := f
	for end > 0 && isRESpace(p[end-1]) {
		end--
	}
	cl.Via = p[:end]
	return cl, true
}

// isRESpace is RE2's \s: [\t\n\f\r ].
func isRESpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// rankDev reads "12[1a000]" and returns the rank.
func rankDev(p []byte) (int, []byte, bool) {
	q, ok := linetext.SkipDigits(p)
	if !ok || len(q) == 0 || q[0] != '[' {
		return 0, p, false
	}
	n := linetext.Atoi(p[:len(p)-len(q)])
	q = q[1:]
	j := 0
	for j < len(q) && isHex(q[j]) {
		j++
	}
	if j == 0 || j >= len(q) || q[j] != ']' {
		return 0, p, false
	}
	return n, q[j+1:], true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// INFO digest line kinds. Each is a parser of digest.info (or a test of
// hang.info) and the prefilter literals every line it can accept holds:
// the prefilter has found them already, so a line runs only the parsers
// whose literal it carries instead of trying each in turn.
const (
	infoVersion       = iota // reVersionLine: "NCCL version"
	infoLocalRanks           // parseCommSummary: "localRanks"
	infoInit                 // parseInitLine: "Init START", "Init COMPLETE"
	infoBootstrap            // reBootstrap: "Bootstrap"
	infoSocket               // reSockIfs: "NET/Socket : Using"
	infoIB                   // reIBUsing: "NET/IB : Using", "NET/IB: Using"
	infoUsingNet             // parseUsingNet: "Using network"
	infoEnv                  // parseEnvSet: "set by environment"
	infoDriver               // parseDriver: "cudaDriverVersion"
	infoNVLSChannels         // hang.info: " nvls channels"
	infoConnectedNVLS        // hang.info: "Connected NVLS"
	infoGDR                  // hang.info: "GPU Direct RDMA Enabled"
	numInfoKinds
)

// infoLiterals are the prefilter literals (lower case) of each kind.
var infoLiterals = [numInfoKinds][]string{
	infoVersion: {"nccl version"}, infoLocalRanks: {"localranks"}, infoInit: {"init complete", "init start"},
	infoBootstrap: {"bootstrap"}, infoSocket: {"net/socket : using"}, infoIB: {"net/ib : using", "net/ib: using"},
	infoUsingNet: {"using network"}, infoEnv: {"set by environment"}, infoDriver: {"cudadriverversion"},
	infoNVLSChannels: {"nvls channels"}, infoConnectedNVLS: {"connected nvls"}, infoGDR: {"gpu direct rdma"},
}

// infoKinds is a set of INFO digest line kinds.
type infoKinds uint16

func (k infoKinds) has(kind int) bool { return k&(1<<kind) != 0 }

// infoKinds returns the digest line kinds whose literal the prefilter
// found on a line (cand).
func (e *Explainer) infoKinds(cand []uint64) infoKinds {
	var k infoKinds
	for i, t := range e.tagInfo {
		if linetext.SetHas(cand, t) {
			k |= 1 << i
		}
	}
	return k
}

// infoParse is an INFO line parsed once for the digest, the hang tracker
// and the host facts: only the parsers of its kinds ran; a nil or !ok
// field did not match.
type infoParse struct {
	kinds     infoKinds
	init      initLine
	initOK    bool
	summary   commSummary
	summaryOK bool
	version   [][]byte // reVersionLine's submatches
	boot      [][]byte // reBootstrap's submatches
	network   []byte
	envName   []byte
	envValue  []byte
	envOK     bool
	driver    []byte
}

// commSummary is "comm 0x… rank R nRanks N nNodes M localRanks L
// localRank l" (src/init.cc).
type commSummary struct {
	rank, nranks, nnodes, localRanks int
}

// initLine is "… comm 0x… rank R nranks N cudaDev D … - Init START|COMPLETE"
// (src/init.cc; before 2.19 without the function name and START).
type initLine struct {
	rank, nranks int
	complete     bool
}

// parseInitLine reads an Init START/COMPLETE line by hand: a COLL or
// multi-communicator log has one per rank and communicator.
func parseInitLine(line []byte) (initLine, bool) {
	var il initLine
	i := bytes.LastIndex(line, []byte("Init "))
	if i < 1 || (line[i-1] != '-' && line[i-1] != ' ') {
		return il, false
	}
	switch rest := line[i+5:]; {
	case bytes.HasPrefix(rest, []byte("COMPLETE")):
		il.complete = true
	case bytes.HasPrefix(rest, []byte("START")):
	default:
		return il, false
	}
	if !bytes.Contains(line[:i], []byte("- ")) && line[i-1] != '-' {
		return il, false
	}
	c := bytes.Index(line, []byte("comm "))
	if c < 0 {
		return il, false
	}
	p := line[c+5:]
	switch {
	case bytes.HasPrefix(p, []byte("0x")):
		q, ok := skipHex(p[2:])
		if !ok {
			return il, false
		}
		p = q
	case bytes.HasPrefix(p, []byte("(nil)")):
		p = p[5:]
	default:
		return il, false
	}
	num := func(word string) (int, bool) {
		if !bytes.HasPrefix(p, []byte(word)) {
			return 0, false
		}
		q, ok := linetext.SkipDigits(p[len(word):])
		if !ok {
			return 0, false
		}
		n := linetext.Atoi(p[len(word):])
		p = q
		return n, true
	}
	var ok bool
	if il.rank, ok = num(" rank "); !ok {
		return il, false
	}
	if il.nranks, ok = num(" nranks "); !ok {
		return il, false
	}
	if _, ok = num(" cudaDev "); !ok {
		return il, false
	}
	return il, true
}

func skipHex(p []byte) ([]byte, bool) {
	i := 0
	for i < len(p) && isHex(p[i]) {
		i++
	}
	return p[i:], i > 0
}

// digestAcc accumulates the digest while scanning.
type digestAcc struct {
	versions    map[string]map[string]bool // version → where
	versionList []string                   // first-seen order
	driver      string
	nranks      int
	nnodes      int
	localRanks  int
	comms       int
	network     string
	bootstrap   []string
	sockIfs     []string
	ibDevs      []string
	peers       map[[2]int]uint16
	peersCapped bool
	transports  map[string]int
	env         map[string]string
	cumem       []string
	cumemSet    map[string]bool
	origin      string
	pidRank     map[hostPID]int
	seenINFO    bool
	// hang and hosts feed the cross-line diagnoses (hang.go, hosts.go).
	hang  *hangAcc
	hosts *hostsAcc
}

func newDigestAcc() *digestAcc {
	return &digestAcc{
		versions: map[string]map[string]bool{}, peers: map[[2]int]uint16{},
		transports: map[string]int{}, env: map[string]string{}, cumemSet: map[string]bool{},
		pidRank: map[hostPID]int{}, hang: newHangAcc(), hosts: newHostsAcc(),
	}
}

func classBit(c string) uint16 {
	i := slices.Index(TransportClasses, c)
	if i < 0 {
		return 1 << 15
	}
	return 1 << uint(i)
}

func (d *digestAcc) channel(cl channelLine) {
	d.seenINFO = true
	c := TransportClass(string(cl.Via))
	bit := classBit(c)
	key := [2]int{cl.From, cl.To}
	old, ok := d.peers[key]
	if !ok && len(d.peers) >= maxPeerPairs {
		d.peersCapped = true
		return
	}
	if old&bit == 0 {
		d.peers[key] = old | bit
		d.transports[c]++
	}
}

func where(m linetext.Meta, file string) string {
	switch {
	case m.Rank >= 0 && m.Host != "":
		return fmt.Sprintf("rank %d (%s)", m.Rank, m.Host)
	case m.Rank >= 0:
		return fmt.Sprintf("rank %d", m.Rank)
	case m.Host != "" && m.PID != 0:
		return fmt.Sprintf("%s pid %d", m.Host, m.PID)
	case m.Host != "":
		return m.Host
	}
	return file
}

func (d *digestAcc) version(v string, m linetext.Meta, file string) {
	w, ok := d.versions[v]
	if !ok {
		if len(d.versions) >= maxListItems {
			return
		}
		w = map[string]bool{}
		d.versions[v] = w
		d.versionList = append(d.versionList, v)
	}
	if len(w) < maxWhere {
		w[where(m, file)] = true
	}
}

// info handles an NCCL INFO line other than a channel line whose
// prefilter found the literals of kinds.
func (d *digestAcc) info(line []byte, m linetext.Meta, file string, n int64, kinds infoKinds) {
	p := infoParse{kinds: kinds}
	if kinds.has(infoInit) {
		p.init, p.initOK = parseInitLine(line)
	}
	if !p.initOK && kinds.has(infoLocalRanks) && bytes.Contains(line, []byte(" nRanks ")) {
		p.summary, p.summaryOK = parseCommSummary(line)
	}
	// The parsers the host facts share with the digest run once.
	if kinds.has(infoVersion) {
		p.version = reVersionLine.FindSubmatch(line)
	}
	if kinds.has(infoDriver) {
		p.driver = parseDriver(line)
	}
	if kinds.has(infoUsingNet) {
		p.network = parseUsingNet(line)
	}
	if kinds.has(infoEnv) {
		p.envName, p.envValue, p.envOK = parseEnvSet(line)
	}
	if kinds.has(infoBootstrap) {
		p.boot = reBootstrap.FindSubmatch(line)
	}
	d.hang.info(line, m, file, n, &p)
	d.hosts.info(line, m, file, n, &p)
	if p.initOK {
		il := p.init
		if !il.complete {
			return
		}
		d.seenINFO = true
		d.comms++
		if il.nranks > d.nranks {
			d.nranks = il.nranks
		}
		d.mapRank(m, il.rank, il.nranks)
		return
	}
	if p.summaryOK {
		sm := p.summary
		d.seenINFO = true
		if sm.nranks >= d.nranks {
			d.nranks, d.nnodes, d.localRanks = sm.nranks, sm.nnodes, sm.localRanks
		}
		d.mapRank(m, sm.rank, sm.nranks)
		return
	}
	const digestKinds = 1<<infoVersion | 1<<infoSocket | 1<<infoBootstrap | 1<<infoIB | 1<<infoUsingNet | 1<<infoEnv | 1<<infoDriver
	if kinds&digestKinds == 0 {
		return // only the hang tracker reads it
	}
	if bytes.Contains(line, []byte(" coll channels, ")) {
		return // only the hang tracker reads it
	}
	if sm := p.version; sm != nil {
		v := string(sm[1]) + string(sm[2])
		if len(sm[3]) > 0 {
			v += "+cuda" + string(sm[3])
		}
		d.version(v, m, file)
		return
	}
	if kinds.has(infoSocket) {
		if sm := reSockIfs.FindSubmatch(line); sm != nil {
			d.seenINFO = true
			for _, f := range reSockIf.FindAllSubmatch(sm[1], -1) {
				d.sockIfs = addUnique(d.sockIfs, string(f[1])+":"+string(f[2]))
			}
			return
		}
	}
	if sm := p.boot; sm != nil {
		d.seenINFO = true
		d.bootstrap = addUnique(d.bootstrap, string(sm[1])+":"+string(sm[2]))
		return
	}
	if kinds.has(infoIB) {
		if sm := reIBUsing.FindSubmatch(line); sm != nil {
			d.seenINFO = true
			for _, f := range reIBDev.FindAllSubmatch(sm[1], -1) {
				dev := string(f[1])
				if k := strings.IndexByte(dev, ';'); k >= 0 {
					dev = dev[:k]
				}
				d.ibDevs = addUnique(d.ibDevs, dev)
			}
			return
		}
	}
	if p.network != nil {
		d.seenINFO = true
		if d.network != string(p.network) {
			d.network = string(p.network)
		}
		return
	}
	if p.envOK {
		d.seenINFO = true
		if len(d.env) < maxEnvEntries {
			if old, ok := d.env[string(p.envName)]; !ok || old != string(p.envValue) {
				d.env[string(p.envName)] = string(p.envValue)
			}
		}
		return
	}
	if p.driver != nil {
		if d.driver != string(p.driver) {
			d.driver = string(p.driver)
		}
		return
	}
}

// The hand parsers below accept exactly what the regexps in their comments
// accept, with the same submatches (leftmost match; a test compares them
// on generated and corpus lines): they run on every ENV, network and comm
// line of an INFO log.

// parseCommSummary is reCommSummary: `comm 0x[0-9a-f]+ rank (\d+) nRanks
// (\d+) nNodes (\d+) localRanks (\d+) localRank (\d+)`.
func parseCommSummary(line []byte) (commSummary, bool) {
	for off := 0; ; {
		i := bytes.Index(line[off:], []byte("comm 0x"))
		if i < 0 {
			return commSummary{}, false
		}
		start := off + i
		off = start + 1
		p, ok := skipLowerHex(line[start+7:])
		if !ok {
			continue
		}
		var v [5]int
		for k, w := range [5]string{" rank ", " nRanks ", " nNodes ", " localRanks ", " localRank "} {
			if !bytes.HasPrefix(p, []byte(w)) {
				ok = false
				break
			}
			var q []byte
			if q, ok = linetext.SkipDigits(p[len(w):]); !ok {
				break
			}
			v[k] = linetext.Atoi(p[len(w) : len(p)-len(q)])
			p = q
		}
		if ok {
			return commSummary{rank: v[0], nranks: v[1], nnodes: v[2], localRanks: v[3]}, true
		}
	}
}

func skipLowerHex(p []byte) ([]byte, bool) {
	i := 0
	for i < len(p) && (p[i] >= '0' && p[i] <= '9' || p[i] >= 'a' && p[i] <= 'f') {
		i++
	}
	return p[i:], i > 0
}

// parseEnvSet is reEnvSet: `NCCL INFO (NCCL_\w+) set by environment to
// ([^\r\n]*?)\.?\s*$`.
func parseEnvSet(line []byte) (name, value []byte, ok bool) {
	for off := 0; ; {
		i := bytes.Index(line[off:], []byte("NCCL INFO NCCL_"))
		if i < 0 {
			return nil, nil, false
		}
		start := off + i + len("NCCL INFO ")
		off = start
		j := start + len("NCCL_")
		for j < len(line) && linetext.IsWordByte(line[j]) {
			j++
		}
		if j == start+len("NCCL_") || !bytes.HasPrefix(line[j:], []byte(" set by environment to ")) {
			continue
		}
		tail := line[j+len(" set by environment to "):]
		// The lazy value ends where only "." and then \s remain.
		w := len(tail)
		for w > 0 && isRESpace(tail[w-1]) {
			w--
		}
		k := w
		if w > 0 && tail[w-1] == '.' {
			k = w - 1
		}
		if bytes.IndexByte(tail[:k], '\r') >= 0 || bytes.IndexByte(tail[:k], '\n') >= 0 {
			continue
		}
		return line[start:j], tail[:k], true
	}
}

// parseDriver is reDriver's submatch: `NCCL INFO cudaDriverVersion (\d+)`.
func parseDriver(line []byte) []byte {
	const w = "NCCL INFO cudaDriverVersion "
	for off := 0; ; {
		i := bytes.Index(line[off:], []byte(w))
		if i < 0 {
			return nil
		}
		at := off + i + len(w)
		off = off + i + 1
		if q, ok := linetext.SkipDigits(line[at:]); ok {
			return line[at : len(line)-len(q)]
		}
	}
}

// parseUsingNet is reUsingNet's submatch: `NCCL INFO Using network (\S+)`.
func parseUsingNet(line []byte) []byte {
	const w = "NCCL INFO Using network "
	for off := 0; ; {
		i := bytes.Index(line[off:], []byte(w))
		if i < 0 {
			return nil
		}
		at := off + i + len(w)
		off = off + i + 1
		j := at
		for j < len(line) && !isRESpace(line[j]) {
			j++
		}
		if j > at {
			return line[at:j]
		}
	}
}

// backtrace records the first NCCL INFO backtrace line ("transport/shm.cc:169
// -> 2"): where the error started and its ncclResult_t.
func (d *digestAcc) backtrace(line []byte) {
	if d.origin != "" || !mayBeBacktrace(line) {
		return
	}
	if sm := reBacktrace.FindSubmatch(line); sm != nil {
		code := string(sm[3])
		name := ncclResultNames[code]
		if name == "" {
			name = "code " + code
		}
		d.origin = fmt.Sprintf("%s:%s (%s)", sm[1], sm[2], name)
	}
}

// hostPID names a NCCL process.
type hostPID struct {
	host string
	pid  int
}

// mayBeBacktrace is a necessary condition for reBacktrace: some " -> " is
// preceded by ":" and digits ("shm.cc:169 -> 2"). GRAPH lines ("Ring 00 :
// 15 -> 0 -> 1", "Tree 0 : -1 -> 0 -> 1/-1/-1") carry the arrow too.
func mayBeBacktrace(line []byte) bool {
	for off := 0; ; {
		i := bytes.Index(line[off:], []byte(" -> "))
		if i < 0 {
			return false
		}
		at := off + i
		j := at
		for j > 0 && line[j-1] >= '0' && line[j-1] <= '9' {
			j--
		}
		if j < at && j > 0 && line[j-1] == ':' {
			return true
		}
		off = at + 1
	}
}

func (d *digestAcc) mapRank(m linetext.Meta, rank, nranks int) {
	if m.Host == "" || m.PID == 0 {
		return
	}
	key := hostPID{m.Host, m.PID}
	if _, ok := d.pidRank[key]; ok || len(d.pidRank) >= maxRankMap {
		return
	}
	// The first communicator a process creates is the default (global)
	// process group in PyTorch.
	d.pidRank[key] = rank
}

// rankOf returns the rank a NCCL process was mapped to, or -1.
func (d *digestAcc) rankOf(m linetext.Meta) int {
	if m.Host == "" || m.PID == 0 {
		return -1
	}
	if r, ok := d.pidRank[hostPID{m.Host, m.PID}]; ok {
		return r
	}
	return -1
}

func (d *digestAcc) cumemFallback(m linetext.Meta, file string) {
	w := where(m, file)
	if !d.cumemSet[w] && len(d.cumem) < maxListItems {
		d.cumemSet[w] = true
		d.cumem = append(d.cumem, w)
	}
}

func addUnique(list []string, s string) []string {
	if slices.Contains(list, s) || len(list) >= maxListItems {
		return list
	}
	return append(list, s)
}

// riskyIfacePrefixes are interfaces NCCL's auto-selection may pick that
// other nodes usually cannot reach (reference §2 socket-connect-failed:
// only docker* and lo are skipped before 2.28.3, virbr also since).
var riskyIfacePrefixes = []string{"virbr", "docker", "veth", "br-", "lo", "tun", "tap", "wg", "vpn", "cni", "flannel", "cali", "zt", "tailscale"}

func riskyIface(name string) bool {
	for _, p := range riskyIfacePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// build turns the accumulator into the report's digest (nil when the logs
// carried no digest lines).
func (d *digestAcc) build() *Digest {
	out := &Digest{
		CUDADriver: d.driver, NRanks: d.nranks, NNodes: d.nnodes, LocalRanks: d.localRanks,
		Comms: d.comms, Network: d.network, Bootstrap: d.bootstrap, SocketIfs: d.sockIfs,
		IBDevices: d.ibDevs, PeersCapped: d.peersCapped, CuMemFallback: d.cumem, ErrorOrigin: d.origin,
	}
	// "2.21.5" (PyTorch's error suffix) is the same build as
	// "2.21.5+cuda12.4" (NCCL's own line) when only one full form exists.
	full := map[string][]string{}
	for _, v := range d.versionList {
		if b := baseVersion(v); b != v {
			full[b] = append(full[b], v)
		}
	}
	for _, v := range d.versionList {
		if f := full[v]; len(f) == 1 {
			for k := range d.versions[v] {
				if len(d.versions[f[0]]) < maxWhere {
					d.versions[f[0]][k] = true
				}
			}
		}
	}
	for _, v := range d.versionList {
		if f := full[v]; len(f) == 1 {
			continue
		}
		var w []string
		for k := range d.versions[v] {
			w = append(w, k)
		}
		sort.Strings(w)
		out.Versions = append(out.Versions, VersionSeen{Version: v, Where: w})
	}
	if len(d.transports) > 0 {
		out.Transports = map[string]int{}
		for k, v := range d.transports {
			out.Transports[k] = v
		}
	}
	if len(d.env) > 0 {
		out.Env = map[string]string{}
		for k, v := range d.env {
			out.Env[k] = v
		}
	}
	keys := make([][2]int, 0, len(d.peers))
	for k := range d.peers {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for i, k := range keys {
		if i >= 64 {
			out.PeersCapped = true
			break
		}
		var via []string
		for b, c := range TransportClasses {
			if d.peers[k]&(1<<uint(b)) != 0 {
				via = append(via, c)
			}
		}
		if d.peers[k]&(1<<15) != 0 {
			via = append(via, "other")
		}
		out.Peers = append(out.Peers, PeerLink{From: k[0], To: k[1], Via: via})
	}
	for _, s := range append(append([]string{}, d.bootstrap...), d.sockIfs...) {
		name, _, _ := strings.Cut(s, ":")
		if riskyIface(name) {
			out.RiskyIfs = addUnique(out.RiskyIfs, s)
		}
	}
	out.Readings = d.readings(out)
	if len(out.Versions) == 0 && out.NRanks == 0 && out.Comms == 0 && len(out.Transports) == 0 &&
		len(out.SocketIfs) == 0 && len(out.Bootstrap) == 0 && len(out.IBDevices) == 0 && out.Network == "" &&
		len(out.Env) == 0 && len(out.CuMemFallback) == 0 && out.ErrorOrigin == "" && out.CUDADriver == "" {
		return nil
	}
	return out
}

// readings are the diagnostic readings of reference §5.
func (d *digestAcc) readings(out *Digest) []string {
	var r []string
	net := out.Transports["NET/Socket"] + out.Transports["NET/IB"] + out.Transports["NET"]
	if out.NNodes == 1 && net > 0 {
		r = append(r, "All ranks are on one node, yet some connections go over the network: NCCL does not see the ranks as one host (separate containers, different hostname or boot_id) or both P2P and SHM are disabled.")
	}
	if out.Transports["SHM"] > 0 {
		var set []string
		for _, k := range []string{"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"} {
			if v, ok := out.Env[k]; ok {
				set = append(set, k+"="+v)
			}
		}
		if len(set) > 0 {
			r = append(r, fmt.Sprintf("GPUs talk through host shared memory (SHM) because %s is set: GPU peer-to-peer is disabled on purpose.", strings.Join(set, ", ")))
		} else {
			r = append(r, "Some GPU pairs talk through host shared memory (SHM) instead of peer-to-peer: P2P is unsupported or disabled between them (consumer GPUs, ACS/IOMMU, VMs, containers isolating GPUs).")
		}
	}
	if len(out.RiskyIfs) > 0 {
		r = append(r, fmt.Sprintf("NCCL picked %s, which other nodes usually cannot reach; pin the right one with NCCL_SOCKET_IFNAME.", ifList(out.RiskyIfs)))
	}
	if len(out.Versions) > 1 {
		var vs []string
		for _, v := range out.Versions {
			vs = append(vs, v.Version)
		}
		if distinctBaseVersions(vs) > 1 {
			r = append(r, "Several NCCL versions appear: "+strings.Join(vs, ", ")+". Every rank of one job must load the same NCCL.")
		}
	}
	if len(out.CuMemFallback) > 0 {
		r = append(r, "cuMem host allocations fell back to /dev/shm on "+strings.Join(out.CuMemFallback, ", ")+"; harmless when every rank falls back, a problem when only some do.")
	}
	return r
}

// baseVersion is "2.21.5" from "2.21.5+cuda12.4".
func baseVersion(v string) string {
	if i := strings.IndexAny(v, "+-"); i >= 0 {
		return v[:i]
	}
	return v
}

func distinctBaseVersions(vs []string) int {
	seen := map[string]bool{}
	for _, v := range vs {
		seen[baseVersion(v)] = true
	}
	return len(seen)
}

// ifList names one interface or several: "interface docker0", "interfaces docker0, lo".
func ifList(ifs []string) string {
	if len(ifs) == 1 {
		return "interface " + ifs[0]
	}
	return "interfaces " + strings.Join(ifs, ", ")
}
