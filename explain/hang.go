package explain

import (
	"bytes"
	"fmt"
	"github.com/ncclwiz/ncclwiz/explain/internal/phrase"
	"regexp"
	"sort"
	"strings"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// Diagnoses of a log that just stops (issue 15 class 7): no error, no
// watchdog line, and the last thing any rank printed is NCCL setting up or
// starting its first collective. Where it stopped and what the log shows
// about the transports and hosts name the suspects; each comes with the
// command that proves or clears it.
const (
	idInitHang       = "init-hang"
	idCollectiveHang = "collective-hang"
	guideLogStops    = "log-stops"
)

// Init stages a process reaches, in order.
const (
	stageNone = iota
	stageBootstrap
	stageTopology
	stageConnecting
	stageComplete
	stageCollective
)

var stageNames = map[int]string{stageBootstrap: "bootstrap", stageTopology: "topology", stageConnecting: "connecting",
	stageComplete: "after-init", stageCollective: "collective"}

// stageFramework: the framework said it starts its process group and
// nothing (of NCCL) followed.
const stageFramework = "framework"

var (
	// NCCL_DEBUG_SUBSYS=COLL: "AllReduce: opCount 0 sendbuff …"
	// (src/enqueue.cc). Read from the tail only: a COLL log has one per
	// collective, too many for the per-line path.
	reOpCount = regexp.MustCompile(`NCCL INFO (\w+): opCount ([0-9a-f]+) sendbuff`)
)

// procInit is one NCCL process's progress through init.
type procInit struct {
	host      string
	rank      int
	stage     int
	starts    int
	completes int
	file      string
}

// hangAcc tracks init progress per process and how each input ends.
type hangAcc struct {
	// procs by host, then pid: looked up with the line's bytes without
	// allocating (this runs on every transport line).
	procs     map[string]map[int]*procInit
	order     []*procInit
	sawStart  bool // some line was an "Init START" (2.19+)
	nvls      bool
	collnet   bool
	p2pNoRead bool // P2P without the read protocol: typical of PCIe
	ibNoGDR   bool
	ibGDR     bool
	opLine    *Evidence
	ends      []inputEnd
	// intra: per host, whether its GPUs talk peer-to-peer (bit 0) or
	// through shared memory (bit 1); hosts that differ are a hint.
	intra map[string]uint8
	// isInit tells a framework's "starting the process group" line (the
	// catalogue's init messages): a log that stops after one stopped in
	// the process group's set-up, before NCCL printed anything.
	isInit func(msg []byte) bool
	// initRanks and initWorld are what those lines said: the ranks that
	// started and the world size.
	initRanks map[int]bool
	initWorld int
}

func newHangAcc() *hangAcc {
	return &hangAcc{procs: map[string]map[int]*procInit{}, intra: map[string]uint8{}}
}

// proc returns the record of the process a line came from (by host and
// pid, else by file), or nil when the line names neither.
func (h *hangAcc) proc(host string, pid int, file string) *procInit {
	var byPID map[int]*procInit
	if len(host) > 0 && pid != 0 {
		byPID = h.procs[host]
	} else if file != "" {
		byPID, pid = h.procs["\x00"+file], 0
	} else {
		return nil
	}
	if p := byPID[pid]; p != nil {
		return p
	}
	if len(h.order) >= maxRankMap {
		return nil
	}
	key := host
	if len(host) == 0 || pid == 0 {
		key = "\x00" + file
	}
	if byPID == nil {
		byPID = map[int]*procInit{}
		h.procs[key] = byPID
	}
	p := &procInit{host: host, rank: -1, file: file}
	byPID[pid] = p
	h.order = append(h.order, p)
	return p
}

// info sees an NCCL INFO line (other than a channel line).
func (h *hangAcc) info(line []byte, m linetext.Meta, file string, n int64, ip *infoParse) {
	p := h.proc(m.Host, m.PID, file)
	if p == nil {
		return
	}
	raise := func(s int) {
		if s > p.stage {
			p.stage = s
		}
	}
	if ip.initOK {
		il := ip.init
		if p.rank < 0 {
			p.rank = il.rank
		}
		if !il.complete {
			h.sawStart = true
			p.starts++
			raise(stageTopology)
		} else {
			p.completes++
			raise(stageComplete)
		}
		return
	}
	if ip.summaryOK {
		if p.rank < 0 {
			p.rank = ip.summary.rank
		}
		raise(stageTopology)
		return
	}
	if ip.kinds.has(infoNVLSChannels) {
		if i := bytes.Index(line, []byte(" nvls channels")); i >= 0 && bytes.Contains(line, []byte(" coll channels, ")) {
			// The collnet count is printed non-zero without CollNet support
			// (NVIDIA/nccl#1936): only COLLNET transport lines name it.
			j := bytes.LastIndexByte(line[:i], ' ')
			if n := linetext.Atoi(line[j+1 : i]); n > 0 {
				h.nvls = true
			}
			raise(stageConnecting)
			return
		}
	}
	if ip.kinds.has(infoConnectedNVLS) && bytes.Contains(line, []byte("Connected NVLS")) {
		h.nvls = true
	}
	if ip.kinds.has(infoGDR) && bytes.Contains(line, []byte("GPU Direct RDMA Enabled")) {
		h.ibGDR = true
	}
	raise(stageBootstrap)
}

// channel sees a transport line; text is the whole line.
func (h *hangAcc) channel(cl channelLine, text []byte, file string) {
	via := cl.Via
	host, pid := procOfLine(text)
	if len(host) > 0 {
		var bit uint8
		switch {
		case bytes.HasPrefix(via, []byte("P2P")):
			bit = 1
		case bytes.HasPrefix(via, []byte("SHM")), bytes.HasPrefix(via, []byte("direct shared memory")):
			bit = 2
		}
		if old, ok := h.intra[string(host)]; bit != 0 && old&bit == 0 && (ok || len(h.intra) < maxHostsTracked) {
			h.intra[string(host)] = old | bit
		}
	}
	var p *procInit
	if len(host) > 0 && pid != 0 {
		p = h.procs[string(host)][pid] // no allocation for a known process
	}
	if p == nil {
		p = h.proc(string(host), pid, file)
	}
	switch {
	case bytes.HasPrefix(via, []byte("P2P/")) && !bytes.Contains(via, []byte("/read")) && !bytes.HasPrefix(via, []byte("P2P/direct")) && !bytes.HasPrefix(via, []byte("P2P/MNNVL")):
		h.p2pNoRead = true
	case bytes.HasPrefix(via, []byte("NET/IB")):
		if bytes.Contains(via, []byte("GDRDMA")) {
			h.ibGDR = true
		} else {
			h.ibNoGDR = true
		}
	case bytes.HasPrefix(via, []byte("COLLNET")):
		h.collnet = true
	}
	if p == nil {
		return
	}
	if p.rank < 0 {
		if bytes.Contains(text, []byte("[receive]")) {
			p.rank = cl.To
		} else {
			p.rank = cl.From
		}
	}
	if p.stage < stageConnecting {
		p.stage = stageConnecting
	}
	if p.completes > 0 && p.stage < stageComplete {
		p.stage = stageComplete
	}
}

// procOfLine reads host and pid from the NCCL prefix "host:pid:tid [dev]
// NCCL", behind any launcher prefix, without regexps or allocations (it
// runs on every transport line). host aliases text.
func procOfLine(text []byte) ([]byte, int) {
	i := bytes.Index(text, []byte(" NCCL "))
	if i < 0 {
		return nil, 0
	}
	head := bytes.TrimRight(text[:i], " ")
	// Drop the "[dev]" and take the token before it.
	if j := bytes.LastIndexByte(head, ' '); j >= 0 && len(head) > j+1 && head[j+1] == '[' {
		head = bytes.TrimRight(head[:j], " ")
	}
	if j := bytes.LastIndexByte(head, ' '); j >= 0 {
		head = head[j+1:]
	}
	c2 := bytes.LastIndexByte(head, ':')
	if c2 <= 0 {
		return nil, 0
	}
	c1 := bytes.LastIndexByte(head[:c2], ':')
	if c1 <= 0 {
		return nil, 0
	}
	host, pid, tid := head[:c1], head[c1+1:c2], head[c2+1:]
	if !linetext.IsDigits(pid) || !linetext.IsDigits(tid) {
		return nil, 0
	}
	// "[1,5]<stdout>:host" and "node1:host" keep only the host.
	for k := len(host) - 1; k >= 0; k-- {
		if c := host[k]; c == '>' || c == ']' || c == ':' {
			host = host[k+1:]
			break
		}
	}
	if len(host) == 0 {
		return nil, 0
	}
	return host, linetext.Atoi(pid)
}

// endInput judges how one input ends from its kept tail.
func (h *hangAcc) endInput(file string, t *tailKeeper, lines int64) {
	if len(h.ends) >= maxListItems*4 {
		return
	}
	first := lines - int64(len(t.lines)) + 1
	h.ends = append(h.ends, classifyEnd(file, t.lines, first, h.isInit))
}

// hangState is the judgement over all inputs.
type hangState struct {
	stop     *LogStop
	id       string
	medium   bool
	frame    string
	interEv  *Evidence
	lastEvs  []Evidence
	stageMin int
}

// judge decides whether the logs stop during init or the first collective.
// ok is false when some input ends in the program's own output (it went
// on), in an error, or no input ends in NCCL lines.
func (h *hangAcc) judge(nranks, nnodes int) (hangState, bool) {
	var st hangState
	nccl, interrupted, annotated, framework := 0, false, false, false
	for _, e := range h.ends {
		switch e.kind {
		case endProgress, endError:
			return st, false
		case endNCCL:
			nccl++
			st.lastEvs = append(st.lastEvs, *e.lastNCCL)
			framework = framework || e.framework
		}
		annotated = annotated || e.annotated
		if e.opLine != nil && h.opLine == nil {
			h.opLine = e.opLine
		}
		if e.interrupted {
			interrupted = true
			if st.interEv == nil {
				st.interEv = e.interrupt
			}
			if st.frame == "" {
				st.frame = e.frame
			}
		}
	}
	if nccl == 0 {
		return st, false
	}
	if len(h.procs) == 0 {
		// Only a framework's own "starting the process group" lines:
		// NCCL never printed (or NCCL_DEBUG was off).
		if !framework {
			return st, false
		}
		stop := &LogStop{Stage: stageFramework, Interrupted: interrupted, LastLines: st.lastEvs}
		if w := h.initWorld; w > 0 && w <= maxRanksTracked && len(h.initRanks) > 0 && 2*len(h.initRanks) > w {
			for r := 0; r < w; r++ {
				if !h.initRanks[r] {
					stop.MissingRanks = append(stop.MissingRanks, r)
				}
			}
		}
		st.id, st.stop, st.stageMin = idInitHang, stop, stageNone
		st.medium = interrupted || annotated || len(stop.MissingRanks) > 0
		return st, true
	}
	complete, pending := map[int]bool{}, map[int]bool{}
	minStage, maxStage := stageCollective+1, stageNone
	allDone := true
	hosts := map[string]bool{}
	named := false
	for _, p := range h.order {
		named = named || p.host != ""
	}
	for _, p := range h.order {
		if p.stage == stageNone || (named && p.host == "") {
			// Bare lines ("NCCL version …" of old releases) belong to a
			// process that prints its prefixed lines too.
			continue
		}
		if p.host != "" {
			hosts[p.host] = true
		}
		done := p.completes > 0 && (!h.sawStart || p.completes >= p.starts)
		if done {
			if p.rank >= 0 {
				complete[p.rank] = true
			}
		} else {
			allDone = false
			if p.rank >= 0 {
				pending[p.rank] = true
			}
		}
		s := p.stage
		if !done && s >= stageComplete {
			s = stageConnecting // a later communicator's init
		}
		minStage, maxStage = min(minStage, s), max(maxStage, s)
	}
	if maxStage == stageNone {
		return st, false
	}
	for r := range complete {
		delete(pending, r) // the rank's default communicator completed; a later one did not
	}
	stop := &LogStop{Interrupted: interrupted, CompleteRanks: phrase.SortedKeys(complete), PendingRanks: phrase.SortedKeys(pending), LastLines: st.lastEvs}
	if nranks > 0 && nranks <= maxRanksTracked && (nnodes <= 1 || len(hosts) >= nnodes) {
		for r := 0; r < nranks; r++ {
			if !complete[r] && !pending[r] {
				stop.MissingRanks = append(stop.MissingRanks, r)
			}
		}
		if 2*len(stop.MissingRanks) >= nranks {
			// Most ranks absent: an excerpt or ranks without
			// NCCL_DEBUG, not ranks that never started.
			stop.MissingRanks = nil
		}
	}
	if allDone {
		st.id = idCollectiveHang
		stop.Stage = stageNames[stageComplete]
		if h.opLine != nil {
			stop.Stage = stageNames[stageCollective]
		}
	} else {
		st.id = idInitHang
		stop.Stage = stageNames[max(minStage, stageBootstrap)]
		if minStage >= stageComplete {
			stop.Stage = stageNames[stageConnecting]
		}
	}
	st.stop, st.stageMin = stop, minStage
	// Medium: something besides the end of the text says the job stopped.
	st.medium = interrupted || annotated || (len(stop.CompleteRanks) > 0 && len(stop.PendingRanks) > 0) || len(stop.MissingRanks) > 0 || nccl > 1
	return st, true
}

// hangDiagnosis builds init-hang or collective-hang with its suspects, or
// returns nil when the logs do not just stop.
func (s *scan) hangDiagnosis(r *Report, failures bool) *Diagnosis {
	if failures || s.digest.hang == nil {
		return nil
	}
	dg := r.Digest
	if dg == nil {
		dg = &Digest{} // a log with only a framework's own lines
	}
	if fe := r.FirstError; fe != nil && !reInterrupt.MatchString(fe.Text) {
		return nil
	}
	if t := s.root; t != nil && t.Signal != "SIGINT" && t.Signal != "SIGTERM" && t.ExitCode != "-2" && t.ExitCode != "-15" {
		return nil
	}
	h := s.digest.hang
	st, ok := h.judge(dg.NRanks, dg.NNodes)
	if !ok {
		return nil
	}
	d := Diagnosis{ID: st.id, Role: RoleCause, Inferred: true, Confidence: Low, Fields: map[string]string{"stage": st.stop.Stage},
		Checks: []string{}, Fixes: []string{}, Guide: guideLogStops, Stop: st.stop}
	if st.medium {
		d.Confidence = Medium
	}
	if g, ok := s.e.lib.Get(guideLogStops, s.e.opts.Lang); ok {
		d.Explanation = g.Summary
		d.Checks = append(d.Checks, g.Checks...)
	} else {
		d.Guide = ""
	}
	stop := st.stop
	switch {
	case stop.Stage == stageFramework:
		d.Title = "The log stops while the process group starts: a hang in its set-up"
		d.Explanation = "No error and no timeout: the last lines are the framework starting its process group (init_process_group, the rendezvous, NCCL's communicator), and nothing follows. Set-up waits for every rank: one rank that never arrives, a rendezvous that cannot be reached or a connection that does not work holds all of them. Rerun with NCCL_DEBUG=INFO to see how far NCCL got."
		if len(stop.MissingRanks) > 0 {
			d.Explanation += " " + phrase.RankList(stop.MissingRanks) + " never said it started."
			if len(stop.MissingRanks) == 1 {
				c := stop.MissingRanks[0]
				d.Culprit = &c
			}
		}
	case st.id == idInitHang:
		d.Title = "The log stops during NCCL init: a hang"
		d.Explanation = "No error and no timeout: the last lines are NCCL setting up (" + stageWords(stop.Stage) + "), and nothing follows. Init waits for every rank, so one rank or one connection that never arrives holds all of them."
	default:
		d.Title = "The log stops after NCCL init: the first collective hangs"
		d.Explanation = "Every rank printed Init COMPLETE and nothing followed: the job hangs in its first collective (or a step before it on some rank). NCCL 2.22+ connects transports lazily at the first collective, so a broken connection shows up here."
		if stop.Stage == "collective" {
			d.Explanation = "Every rank finished init and issued its first collective (opCount lines), then nothing: the collective never completed."
		}
	}
	if stop.Interrupted {
		d.Explanation += " The job was then stopped by hand or by the launcher."
		d.Fields["interrupted"] = "true"
		if st.frame != "" {
			d.Fields["interrupted_in"] = st.frame
			d.Explanation += " The traceback shows it waiting in " + st.frame + "()."
		}
	}
	if len(stop.PendingRanks) > 0 {
		d.Fields["pending_ranks"] = phrase.IntList(stop.PendingRanks)
	}
	if len(stop.MissingRanks) > 0 {
		d.Fields["missing_ranks"] = phrase.IntList(stop.MissingRanks)
	}
	d.Evidence = append(d.Evidence, stop.LastLines...)
	if st.interEv != nil {
		d.Evidence = append(d.Evidence, *st.interEv)
	}
	if h.opLine != nil && st.id == idCollectiveHang {
		d.Evidence = append(d.Evidence, *h.opLine)
	}
	if len(d.Evidence) > s.e.opts.MaxEvidence {
		d.Evidence = d.Evidence[:s.e.opts.MaxEvidence]
	}
	d.Count = len(stop.LastLines)
	ranks := map[int]bool{}
	hosts := map[string]bool{}
	for _, ev := range d.Evidence {
		if ev.Rank >= 0 {
			ranks[ev.Rank] = true
		}
		if ev.Host != "" {
			hosts[ev.Host] = true
		}
	}
	d.Ranks = phrase.SortedKeys(ranks)
	for k := range hosts {
		d.Hosts = append(d.Hosts, k)
	}
	sort.Strings(d.Hosts)
	d.Suspects = s.hangSuspects(dg, stop)
	for _, sp := range d.Suspects {
		d.Advice = append(d.Advice, sp.Why+" → "+sp.Command)
	}
	d.Advice = append(d.Advice, "While it hangs, `ncclwiz hang` on each node names the rank that holds the others and where it waits (NCCL RAS, flight recorder, py-spy).")
	return &d
}

func stageWords(stage string) string {
	switch stage {
	case "bootstrap":
		return "only version, bootstrap and network lines: the ranks never formed a communicator"
	case "topology":
		return "the communicator was created but no transport was connected"
	case "connecting":
		return "transports were being connected, and Init COMPLETE never came"
	}
	return stage
}

// hangSuspects lists what the log supports, most specific first.
func (s *scan) hangSuspects(d *Digest, stop *LogStop) []Suspect {
	h := s.digest.hang
	var out []Suspect
	add := func(id, why, cmd, guide string) {
		out = append(out, Suspect{ID: id, Why: why, Command: cmd, Guide: guide})
	}
	if len(stop.MissingRanks) > 0 {
		n, who := d.NRanks, "NCCL expects"
		if n == 0 {
			n, who = h.initWorld, "The job has"
		}
		add("rank-missing", fmt.Sprintf("%s %d ranks, but %s never printed an init line", who, n, phrase.RankList(stop.MissingRanks)),
			"find where those ranks run and read their output; `ncclwiz check` on that node (a rank that crashed or never started holds every other rank in init)", "hang")
	}
	if len(stop.PendingRanks) > 0 && len(stop.CompleteRanks) > 0 {
		add("rank-behind", fmt.Sprintf("%s finished init but %s did not", phrase.RankList(stop.CompleteRanks), phrase.RankList(stop.PendingRanks)),
			"read the pending ranks' last lines: the transport they were connecting names the link that does not work", "hang")
	}
	if len(d.Versions) > 1 {
		var vs []string
		for _, v := range d.Versions {
			vs = append(vs, v.Version)
		}
		if distinctBaseVersions(vs) > 1 {
			add("mixed-versions", "the ranks load different NCCL versions ("+strings.Join(vs, ", ")+")", "`ncclwiz check --only nccl.stack` on every node", "nccl-version-mismatch")
		}
	}
	if len(d.RiskyIfs) > 0 {
		add("socket-interface", "NCCL uses "+ifList(d.RiskyIfs)+", which other nodes usually cannot reach",
			"`ncclwiz check --only net.interfaces`, then rerun with NCCL_SOCKET_IFNAME=<the interface that reaches the other nodes>", "socket-interface")
	} else if d.Transports["NET/Socket"] > 0 && d.NNodes > 1 {
		add("socket-network", "ranks on different nodes talk over TCP sockets ("+strings.Join(append(append([]string{}, d.SocketIfs...), d.Bootstrap...), ", ")+")",
			"`ncclwiz check --only net.interfaces` on each node; rerun with NCCL_SOCKET_IFNAME set to the interface every node can reach", "socket-interface")
	}
	if d.Transports["NET/IB"] > 0 || len(d.IBDevices) > 0 {
		why := "inter-node traffic uses InfiniBand/RoCE"
		if h.ibNoGDR && !h.ibGDR {
			why += " without GPU Direct RDMA"
		}
		add("ib", why, "rerun once with NCCL_IB_DISABLE=1 (sockets instead): if it no longer hangs, the RDMA path is at fault; `ncclwiz check --only net.rdma`", "ib-roce")
	}
	p2p := d.Transports["P2P/IPC"] + d.Transports["P2P/CUMEM"] + d.Transports["P2P"]
	if p2p > 0 {
		why := "GPUs on one node talk peer-to-peer (" + strings.Join(presentClasses(d, "P2P/IPC", "P2P/CUMEM", "P2P"), ", ") + ")"
		if h.p2pNoRead {
			why += " without the NVLink read protocol, i.e. over PCIe, where ACS or the IOMMU can block it"
		}
		add("p2p-acs-iommu", why, "rerun once with NCCL_P2P_DISABLE=1: if it no longer hangs, run `ncclwiz check --only host.pcie` (ACS, IOMMU)", "p2p-acs-iommu")
	}
	if d.Transports["SHM"] > 0 {
		add("shm", "some GPU pairs use host shared memory (SHM)", "rerun once with NCCL_SHM_DISABLE=1; `ncclwiz check --only shm.mount`", "container-shm")
	}
	if h.nvls {
		add("nvls", "NCCL picked NVLink SHARP (NVLS)", "rerun once with NCCL_NVLS_ENABLE=0; `ncclwiz check --only gpu.fabric`", "nvls")
	}
	if h.collnet || d.Transports["COLLNET"] > 0 {
		add("collnet", "NCCL picked CollNet (in-network reduction, SHARP)", "`ncclwiz check --only net.rdma`; rerun without the CollNet/SHARP plugin", "ib-roce")
	}
	if d.NNodes == 1 && d.Transports["NET/Socket"]+d.Transports["NET/IB"]+d.Transports["NET"] > 0 {
		add("one-host-over-network", "all ranks are on one node yet some connect over the network: NCCL does not see them as one host",
			"`ncclwiz check --only host.container,host.ipc` (separate containers or IPC namespaces)", "reading-nccl-debug")
	}
	return out
}

func presentClasses(d *Digest, classes ...string) []string {
	var out []string
	for _, c := range classes {
		if d.Transports[c] > 0 {
			out = append(out, c)
		}
	}
	return out
}
