package linetext

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Meta is what the prefixes of one line say about where it came from.
type Meta struct {
	Rank      int // global rank, -1 unknown
	LocalRank int // torchrun --tee role prefix ([default3]:), -1 unknown
	Host      string
	PID       int
	Dev       int // NCCL [cudaDev], -1 unknown
	Level     string
	TS        Stamp
	// Launcher is the launcher prefix text ("[rank3]:") that groups the
	// lines of one process in a merged log.
	Launcher string
	// Msg is the text after launcher, timestamp, glog and NCCL prefixes.
	Msg []byte
}

// Stamp is a log timestamp. Many logs omit the year (glog: E1218
// 20:27:21.4), so the comparison falls back to the time within the year.
type Stamp struct {
	Year int     // 0 when the log did not say
	Sec  float64 // seconds since 1 January 00:00 of that year
	OK   bool
}

// Before reports whether s is earlier than t; both must be OK.
func (s Stamp) Before(t Stamp) bool {
	if s.Year != 0 && t.Year != 0 && s.Year != t.Year {
		return s.Year < t.Year
	}
	return s.Sec < t.Sec
}

// String renders the stamp for evidence.
func (s Stamp) String() string {
	if !s.OK {
		return ""
	}
	y := s.Year
	if y == 0 {
		y = 2001 // a non-leap year; only month/day/time are shown
	}
	t := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(s.Sec * float64(time.Second)))
	if s.Year == 0 {
		return t.Format("01-02 15:04:05.000")
	}
	return t.Format("2006-01-02 15:04:05.000")
}

func mkStamp(year, month, day, hh, mm int, sec float64) Stamp {
	if month < 1 || month > 12 || day < 1 || day > 31 || hh > 23 || mm > 59 || sec >= 61 {
		return Stamp{}
	}
	y := year
	if y == 0 {
		y = 2001
	}
	days := time.Date(y, time.Month(month), day, 0, 0, 0, 0, time.UTC).YearDay() - 1
	return Stamp{Year: year, Sec: float64(days*86400+hh*3600+mm*60) + sec, OK: true}
}

// A Python traceback's frame and exception lines. A "host: " label before
// one is a launcher's (labelOK); the analyses read tracebacks with the same
// patterns, so they are exported from here rather than kept twice.
var (
	PyException = regexp.MustCompile(`^\s*((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt))(?::(?:\s(.*))?)?\s*$`)
	PyFrame     = regexp.MustCompile(`^\s*File "([^"]+)", line (\d+), in (\S+)`)
)

var (
	// ISO / Python logging / kubectl --timestamps / NCCL 2.26+ WARN stamps.
	reLeadTS = MustFastRe(`^\[?(\d{4})-(\d{2})-(\d{2})[T _](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(?:Z|[+-]\d{2}:?\d{2})?\]?(?: - | |:|$)`)
	// glog (PyTorch C++ and newer Python loggers): "[E1218 20:27:21.426415540 File.cpp:629] ",
	// "[E ProcessGroupNCCL.cpp:1537] ", "I0527 15:16:52.212738 58631 File.cpp:878] ".
	reGlog = MustFastRe(`^\[?([IWEF])(?:(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?)? ?(?:\d+ )?[\w./\-]+\.(?:cpp|hpp|cc|h|py):\d+\] ?`)
	// Message-level rank: "[Rank 3]", "[PG 0 Rank 2]", "[PG ID 0 PG GUID 0(default_pg) Rank 1]",
	// Lightning's rank_prefixed_message "[rank: 1] ".
	reMsgRank = MustFastRe(`\[(?:(?:PG [^\]]{0,80}? )?Rank |rank: )(\d+)\]`)
	// Ray / vLLM workers: "(Worker_TP0 pid=1234)", "(RayWorkerWrapper pid=2345, ip=10.0.0.2)",
	// a task's "(pid=45601)", an actor with its own __repr__ ("(MyActor(index=2) pid=482120)",
	// Ray's logging docs) and fields after the ip ("(RayTrainWorker pid=7, ip=10.0.0.3, rank=1)").
	reRay = MustFastRe(`^\((?:[\w.\-]+(?:\([^()]{0,80}\))? )?pid=(\d+)(?:, ip=([\w.:\-]+))?(?:, \w+=[^,()\s]{1,40})*\) ?`)
	// mpirun --tag-output: "[1,0]<stdout>:"; torchrun: "[rank3]:", --tee role prefix "[default0]:".
	// A launcher's "[host|N]:" (TorchX and others: host name and rank).
	reBracket = MustFastRe(`^\[(?:rank(\d+)|(\d+),(\d+)|([A-Za-z_][\w\-]*?)(\d+)|([A-Za-z0-9][\w.\-]*)\|(\d+))\](?:<(?:stdout|stderr|stddiag)>)?: ?`)
	// NCCL 2.0-2.2 (closed source) printed the level without "NCCL":
	// "host:pid:tid [0] INFO NET : Using interface ib0:10.0.0.1<0>"
	// (https://github.com/horovod/horovod/issues/134) and
	// "host:pid:tid [0] misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed"
	// (https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/43).
	reOldNCCL = MustFastRe(`^([^\s:]+:\d+:\d+ \[\d+\] )((?:[\w.\-]+/)*[\w.\-]+\.(?:cu|cc|h):\d+ )?(INFO|WARN) `)
	// NCCL 1.x: printf("WARN %s:%d ", __FILE__, __LINE__) (v1.3.4-1
	// src/core.h); its INFO had no location and is too plain to claim.
	reNCCL1 = MustFastRe(`^WARN ((?:[\w.\-]+/)*[\w.\-]+\.(?:cu|cc|h|cpp):\d+) `)
	// Runners that tag each line with its node and stream (milabench):
	// "cn-d004 [stderr] ".
	reStream = MustFastRe(`^([A-Za-z0-9][\w.\-]*) \[(?:stdout|stderr)\] `)
	// srun --label "3: " and pdsh/deepspeed "host: ".
	reLabel = MustFastRe(`^(\d{1,6}|[A-Za-z0-9][A-Za-z0-9.\-]*[0-9.\-][A-Za-z0-9.\-]*): `)
)

// Parse strips the prefixes a line may carry and reads what they say.
func Parse(line []byte) Meta { return ParseIn(line, nil) }

// StrCache interns the host and launcher strings of parsed lines: a log
// repeats a few of them on every line, and converting each would cost an
// allocation per line. A nil cache converts.
type StrCache struct {
	m map[string]string
	// recent strings, checked before hashing: a log's lines come from a
	// few hosts in runs.
	recent [4]string
	next   int
}

// maxCachedStrings bounds the cache whatever the log.
const maxCachedStrings = 4096

func (c *StrCache) str(b []byte) string {
	if c == nil {
		return string(b)
	}
	for _, s := range c.recent {
		if s == string(b) {
			return s
		}
	}
	s, ok := c.m[string(b)]
	if !ok {
		s = c.add(b)
	}
	c.recent[c.next] = s
	c.next = (c.next + 1) % len(c.recent)
	return s
}

func (c *StrCache) add(b []byte) string {
	s := string(b)
	if c.m == nil {
		c.m = map[string]string{}
	}
	if len(c.m) < maxCachedStrings {
		c.m[s] = s
	}
	return s
}

// ParseIn is Parse with the strings interned in c.
func ParseIn(line []byte, c *StrCache) Meta {
	r := ParseRaw(line)
	return r.meta(c)
}

// Raw is a parsed line's meta with its host and launcher still bytes
// of the line: pipeline workers parse lines this way, with no allocation
// and no shared state, and the consumer makes the strings.
type Raw struct {
	m              Meta   // Host and Launcher empty
	host, launcher []byte // nil: none
}

// Msg is the text after the prefixes: explain's line joiner compares the
// messages of neighbouring lines without making any strings.
func (r Raw) Msg() []byte { return r.m.Msg }

func (r *Raw) meta(c *StrCache) Meta {
	m := r.m
	if r.host != nil {
		m.Host = c.str(r.host)
	}
	if r.launcher != nil {
		m.Launcher = c.str(r.launcher)
	}
	return m
}

// Packed is a Raw as offsets into its line: the pipeline keeps
// one per candidate line, and a pointer-free array is cheap to keep.
type Packed struct {
	rank, localRank, pid, dev int
	ts                        Stamp
	level                     uint8
	// host and launcher: offset and length, length -1 for none.
	hostOff, hostLen, launchOff, launchLen, msgOff, msgLen int32
}

// metaLevels are the levels ParseRaw sets.
var metaLevels = [...]string{"", "WARN", "INFO", "TRACE", "CALL", "ABORT", "I", "W", "E", "F"}

// pack turns r, parsed from line, into offsets; false when it cannot.
func (r *Raw) Pack(line []byte) (Packed, bool) {
	p := Packed{rank: r.m.Rank, localRank: r.m.LocalRank, pid: r.m.PID, dev: r.m.Dev, ts: r.m.TS}
	lv := -1
	for i, l := range metaLevels {
		if l == r.m.Level {
			lv = i
		}
	}
	if lv < 0 || len(line) > 1<<30 {
		return p, false
	}
	p.level = uint8(lv)
	var ok bool
	if p.hostOff, p.hostLen, ok = subOffset(line, r.host); !ok {
		return p, false
	}
	if p.launchOff, p.launchLen, ok = subOffset(line, r.launcher); !ok {
		return p, false
	}
	if r.m.Msg == nil {
		return p, false
	}
	p.msgOff, p.msgLen, ok = subOffset(line, r.m.Msg)
	return p, ok
}

// subOffset is where sub lies in line (length -1 for nil).
func subOffset(line, sub []byte) (off, n int32, ok bool) {
	if sub == nil {
		return 0, -1, true
	}
	o := cap(line) - cap(sub)
	if o < 0 || o+len(sub) > len(line) || len(sub) > 0 && &line[o] != &sub[0] {
		return 0, 0, false
	}
	return int32(o), int32(len(sub)), true
}

// meta is the Meta of line, the text p was packed from.
func (p *Packed) Meta(line []byte, c *StrCache) Meta {
	m := Meta{Rank: p.rank, LocalRank: p.localRank, PID: p.pid, Dev: p.dev, TS: p.ts, Level: metaLevels[p.level],
		Msg: line[p.msgOff : p.msgOff+p.msgLen]}
	if p.hostLen >= 0 {
		m.Host = c.str(line[p.hostOff : p.hostOff+p.hostLen])
	}
	if p.launchLen >= 0 {
		m.Launcher = c.str(line[p.launchOff : p.launchOff+p.launchLen])
	}
	return m
}

// ParseRaw is Parse's work.
func ParseRaw(line []byte) Raw {
	var host, launcher []byte
	m := Meta{Rank: -1, LocalRank: -1, Dev: -1}
	rest := line
	launchStart, launchEnd := -1, 0
	for guard := 0; guard < 6 && len(rest) > 0; guard++ {
		// A quoted or indented paste ("> ", "    "): the markers are no
		// part of any prefix or message.
		if rest[0] == ' ' || rest[0] == '\t' || rest[0] == '>' {
			rest = TrimQuote(rest)
		}
		consumed := len(line) - len(rest)
		// torchrun's "[rank3]:", the commonest prefix, read by hand.
		if n, r, ok := rankPrefix(rest); ok {
			m.Rank = r
			if launchStart < 0 {
				launchStart = consumed
			}
			launchEnd = consumed + n
			rest = rest[n:]
			continue
		}
		if sm := reBracket.FindSubmatchIndex(rest); sm != nil {
			switch {
			case sm[2] >= 0:
				m.Rank = Atoi(rest[sm[2]:sm[3]])
			case sm[6] >= 0:
				m.Rank = Atoi(rest[sm[6]:sm[7]])
			case sm[8] >= 0:
				m.LocalRank = Atoi(rest[sm[10]:sm[11]])
			case sm[12] >= 0:
				host = rest[sm[12]:sm[13]]
				m.Rank = Atoi(rest[sm[14]:sm[15]])
			}
			if launchStart < 0 {
				launchStart = consumed
			}
			launchEnd = consumed + sm[1]
			rest = rest[sm[1]:]
			continue
		}
		if sm := reRay.FindSubmatchIndex(rest); sm != nil {
			m.PID = Atoi(rest[sm[2]:sm[3]])
			if sm[4] >= 0 {
				host = rest[sm[4]:sm[5]]
			}
			if r, ok := rayRank(rest[:sm[1]]); ok {
				m.Rank = r
			}
			if launchStart < 0 {
				launchStart = consumed
			}
			launchEnd = consumed + sm[1]
			rest = rest[sm[1]:]
			continue
		}
		if sm := reLeadTS.FindSubmatchIndex(rest); sm != nil {
			frac := 0.0
			if sm[14] >= 0 {
				frac, _ = strconv.ParseFloat("0."+string(rest[sm[14]:sm[15]]), 64)
			}
			m.TS = mkStamp(Atoi(rest[sm[2]:sm[3]]), Atoi(rest[sm[4]:sm[5]]), Atoi(rest[sm[6]:sm[7]]),
				Atoi(rest[sm[8]:sm[9]]), Atoi(rest[sm[10]:sm[11]]), float64(Atoi(rest[sm[12]:sm[13]]))+frac)
			rest = rest[sm[1]:]
			continue
		}
		if sm := reStreamIndex(rest); sm != nil {
			host = rest[sm[2]:sm[3]]
			if launchStart < 0 {
				launchStart = consumed
			}
			launchEnd = consumed + sm[1]
			rest = rest[sm[1]:]
			continue
		}
		if n, ok := composePrefix(rest); ok {
			if launchStart < 0 {
				launchStart = consumed
			}
			launchEnd = consumed + n
			rest = rest[n:]
			continue
		}
		if !labelShape(rest) {
			break
		}
		if sm := reLabel.FindSubmatchIndex(rest); sm != nil && labelOK(rest[sm[2]:sm[3]], rest[sm[1]:]) {
			tok := rest[sm[2]:sm[3]]
			if IsDigits(tok) {
				m.Rank = Atoi(tok)
			} else {
				host = tok
			}
			if launchStart < 0 {
				launchStart = consumed
			}
			launchEnd = consumed + sm[1]
			rest = rest[sm[1]:]
			continue
		}
		break
	}
	if launchStart >= 0 {
		launcher = line[launchStart:launchEnd]
	}
	// glog prefix from PyTorch.
	if sm := reGlog.FindSubmatchIndex(rest); sm != nil {
		m.Level = string(rest[sm[2]:sm[3]])
		if sm[4] >= 0 && !m.TS.OK {
			frac := 0.0
			if sm[14] >= 0 {
				frac, _ = strconv.ParseFloat("0."+string(rest[sm[14]:sm[15]]), 64)
			}
			m.TS = mkStamp(0, Atoi(rest[sm[4]:sm[5]]), Atoi(rest[sm[6]:sm[7]]), Atoi(rest[sm[8]:sm[9]]),
				Atoi(rest[sm[10]:sm[11]]), float64(Atoi(rest[sm[12]:sm[13]]))+frac)
		}
		rest = rest[sm[1]:]
	}
	// NCCL prefix: "[stamp] host:pid:tid [dev] file:line NCCL WARN msg".
	// A pasted or cut line may have lost the head: "NCCL WARN msg".
	i, off := bytes.Index(rest, []byte(" NCCL ")), 6
	if i < 0 && bytes.HasPrefix(rest, []byte("NCCL ")) {
		i, off = 0, 5
	}
	if i >= 0 {
		if lv, msg, ok := ncclLevel(rest[i+off:]); ok {
			m.Level = lv
			parseNCCLHead(rest[:i], &m, &host)
			rest = msg
		}
	} else if sm := reOldNCCL.FindSubmatchIndex(rest); sm != nil {
		// Releases before "NCCL" joined the level word.
		m.Level = string(rest[sm[6]:sm[7]])
		parseNCCLHead(rest[:sm[6]], &m, &host)
		rest = rest[sm[1]:]
	} else if sm := reNCCL1.FindSubmatchIndex(rest); sm != nil {
		m.Level = "WARN"
		rest = rest[sm[1]:]
	}
	if m.Rank < 0 {
		if sm := reMsgRank.FindSubmatchIndex(rest); sm != nil && sm[0] < 120 {
			m.Rank = Atoi(rest[sm[2]:sm[3]])
		}
	}
	m.Msg = rest
	return Raw{m: m, host: host, launcher: launcher}
}

// ncclLevel reads "WARN msg" / "INFO msg" after " NCCL ".
func ncclLevel(b []byte) (string, []byte, bool) {
	for _, lv := range []string{"WARN", "INFO", "TRACE", "CALL", "ABORT"} {
		if bytes.HasPrefix(b, []byte(lv)) && (len(b) == len(lv) || b[len(lv)] == ' ') {
			msg := b[len(lv):]
			if len(msg) > 0 {
				msg = msg[1:]
			}
			return lv, msg, true
		}
	}
	return "", nil, false
}

// parseNCCLHead reads "[2025-05-10 23:09:41] host:pid:tid [dev] file:line"
// (every part optional) into m; the host goes to *hostp unless one is known.
func parseNCCLHead(h []byte, m *Meta, hostp *[]byte) {
	h = bytes.TrimLeft(h, " ")
	if sm := reLeadTS.FindSubmatchIndex(h); sm != nil {
		if !m.TS.OK {
			m.TS = mkStamp(Atoi(h[sm[2]:sm[3]]), Atoi(h[sm[4]:sm[5]]), Atoi(h[sm[6]:sm[7]]),
				Atoi(h[sm[8]:sm[9]]), Atoi(h[sm[10]:sm[11]]), float64(Atoi(h[sm[12]:sm[13]])))
		}
		h = h[sm[1]:]
	}
	// host:pid:tid
	sp := bytes.IndexByte(h, ' ')
	tok := h
	if sp >= 0 {
		tok = h[:sp]
	}
	if host, pid, tid, ok := cut3(tok); ok && IsDigits(pid) && IsDigits(tid) && len(host) > 0 {
		if len(*hostp) == 0 {
			*hostp = host
		}
		m.PID = Atoi(pid)
	}
	if sp < 0 {
		return
	}
	h = h[sp+1:]
	if len(h) > 2 && h[0] == '[' {
		if e := bytes.IndexByte(h, ']'); e > 1 && IsDigits(h[1:e]) {
			m.Dev = Atoi(h[1:e])
		}
	}
}

// rankPrefix reads "[rank3]:" or "[rank3]: " at the start of b, as
// reBracket's first branch does; ok is false for anything else (reBracket
// then decides).
func rankPrefix(b []byte) (n, rank int, ok bool) {
	if !bytes.HasPrefix(b, []byte("[rank")) {
		return 0, 0, false
	}
	d := 5
	for d < len(b) && b[d] >= '0' && b[d] <= '9' {
		d++
	}
	if d == 5 || d+1 >= len(b) || b[d] != ']' || b[d+1] != ':' {
		return 0, 0, false
	}
	n = d + 2
	if n < len(b) && b[n] == ' ' {
		n++
	}
	return n, Atoi(b[5:d]), true
}

// rayRank reads the rank a Ray prefix names ("rank=3" in the actor's
// repr or a field after the pid); false when it names none.
func rayRank(prefix []byte) (int, bool) {
	for off := 0; ; {
		i := bytes.Index(prefix[off:], []byte("rank="))
		if i < 0 {
			return 0, false
		}
		at := off + i
		// "rank=", not "local_rank=" or "world_rank=".
		if at == 0 || !IsWordByte(prefix[at-1]) {
			if _, ok := SkipDigits(prefix[at+5:]); ok {
				return Atoi(prefix[at+5:]), true
			}
		}
		off = at + 5
	}
}

// composePrefix reads docker compose's service column, "trainer-1  | "
// (the name padded to the longest service's): a name, blanks, "| ". It
// returns the prefix length.
func composePrefix(b []byte) (int, bool) {
	if len(b) == 0 || !isAlnum(b[0]) {
		return 0, false
	}
	i := 1
	for i < len(b) && i < 64 && (IsWordByte(b[i]) || b[i] == '.' || b[i] == '-') {
		i++
	}
	j := i
	for j < len(b) && b[j] == ' ' {
		j++
	}
	if j == i || j+1 >= len(b) || b[j] != '|' || b[j+1] != ' ' {
		return 0, false
	}
	return j + 2, true
}

// labelShape is a necessary condition for reLabel: a run of
// [A-Za-z0-9.-] followed by ": " (the label is that whole run, since ':'
// cannot be part of it).
func labelShape(b []byte) bool {
	i := 0
	for i < len(b) {
		c := b[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' {
			i++
			continue
		}
		break
	}
	return i > 0 && i+1 < len(b) && b[i] == ':' && b[i+1] == ' '
}

// reStreamIndex is reStream.FindSubmatchIndex behind an exact necessary
// condition: its tag is the line's first run of [\w.-] followed by " [".
// A NCCL head ("host:pid:tid [0] NCCL …") fails at the colon at once.
func reStreamIndex(b []byte) []int {
	if len(b) == 0 || !isAlnum(b[0]) {
		return nil
	}
	i := 1
	for i < len(b) && (IsWordByte(b[i]) || b[i] == '.' || b[i] == '-') {
		i++
	}
	if i+1 >= len(b) || b[i] != ' ' || b[i+1] != '[' {
		return nil
	}
	return reStream.FindSubmatchIndex(b)
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// cut3 splits "a:b:c" into its three parts; ok is false for any other
// number of colons.
func cut3(b []byte) (x, y, z []byte, ok bool) {
	i := bytes.IndexByte(b, ':')
	if i < 0 {
		return nil, nil, nil, false
	}
	j := bytes.IndexByte(b[i+1:], ':')
	if j < 0 {
		return nil, nil, nil, false
	}
	j += i + 1
	if bytes.IndexByte(b[j+1:], ':') >= 0 {
		return nil, nil, nil, false
	}
	return b[:i], b[i+1 : j], b[j+1:], true
}

// labelOK accepts a "label: " prefix only when it is plausibly a launcher's
// (srun --label digits, or a host name followed by more log structure), so
// "RuntimeError: …" or "ERROR: …" are never taken for host names.
func labelOK(tok, after []byte) bool {
	if IsDigits(tok) {
		return true
	}
	hasDigit := false
	for _, c := range tok {
		if c >= '0' && c <= '9' {
			hasDigit = true
		}
	}
	if !hasDigit && !bytes.ContainsAny(tok, ".-") {
		return false
	}
	if bytes.Contains(tok, []byte("Error")) || bytes.Contains(tok, []byte("Exception")) || bytes.Contains(tok, []byte("Warning")) {
		return false
	}
	// pdsh output is followed by the worker's own line; require something
	// recognisable after it.
	if len(after) == 0 {
		return false
	}
	if after[0] == '[' || after[0] == '(' {
		return true
	}
	// A Python traceback relayed by pdsh or DeepSpeed's launcher.
	if bytes.HasPrefix(after, []byte("Traceback (most recent call last)")) || PyFrame.Match(after) || PyException.Match(after) {
		return true
	}
	sp := bytes.IndexByte(after, ' ')
	if sp < 0 {
		sp = len(after)
	}
	return bytes.Count(after[:sp], []byte(":")) == 2 && bytes.Contains(after, []byte(" NCCL "))
}

// IsDigits reports whether b is a non-empty run of decimal digits; explain
// checks pid and tid fields with it.
func IsDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// IsWordByte is RE2's \w: [0-9A-Za-z_]. The prefix parsers and explain's
// hand-written digest parsers share it.
func IsWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// SkipDigits returns p after its leading decimal digits; false when there
// are none. Shared with explain's digest and pipeline parsers.
func SkipDigits(p []byte) ([]byte, bool) {
	i := 0
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	return p[i:], i > 0
}

// Atoi parses decimal digits, saturating instead of overflowing.
func Atoi(b []byte) int {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		if n > (1<<31)/10 {
			return 1 << 31
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// Message returns a log line without its launcher, timestamp, glog and NCCL
// prefixes: the words a person reads first when space is short.
func Message(line string) string {
	if msg := string(Parse([]byte(line)).Msg); strings.TrimSpace(msg) != "" {
		return msg
	}
	return line
}

// TrimQuote removes leading blanks and e-mail/markdown quote markers
// ("> > ").
func TrimQuote(b []byte) []byte {
	for len(b) > 0 {
		switch {
		case b[0] == ' ' || b[0] == '\t':
			b = b[1:]
		case b[0] == '>' && (len(b) == 1 || b[1] == ' ' || b[1] == '>'):
			b = b[1:]
		default:
			return b
		}
	}
	return b
}
