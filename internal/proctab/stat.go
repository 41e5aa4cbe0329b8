package proctab

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/host"
)

// The thin direct reads of this package. gopsutil's stat accessors are not
// used for these fields: they expose neither the raw start ticks (the only
// exact identity of a process) nor the process group and session, each call
// re-reads stat, calls getpriority(2) on the real PID (a fixture's PID is
// not the machine's) and reads the boot time through a process-wide cache;
// BenchmarkTable* measures the difference. gopsutil parses no NSpid either.

// stat holds the fields of /proc/PID/stat (or task/TID/stat) ncclwiz uses.
type stat struct {
	pid, ppid, pgid, sid int
	state, comm          string
	cpuTicks, start      uint64
}

// parseStat reads a stat line; comm may contain spaces and parentheses, so
// the fields after it are counted from the last ')'.
func parseStat(b []byte) (stat, error) {
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return stat{}, errMalformed
	}
	var st stat
	var err error
	if st.pid, err = strconv.Atoi(strings.TrimSpace(s[:open])); err != nil {
		return stat{}, fmt.Errorf("%w: pid %q", errMalformed, strings.TrimSpace(s[:open]))
	}
	st.comm = s[open+1 : close]
	f := strings.Fields(s[close+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return stat{}, fmt.Errorf("%w: %d fields", errMalformed, len(f)+2)
	}
	st.state = f[0]
	ints := []*int{&st.ppid, &st.pgid, &st.sid}
	for i, p := range ints {
		if *p, err = strconv.Atoi(f[1+i]); err != nil {
			return stat{}, fmt.Errorf("%w: field %d: %v", errMalformed, 4+i, err)
		}
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	st.start, err = strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err != nil {
		return stat{}, fmt.Errorf("%w: times", errMalformed)
	}
	st.cpuTicks = utime + stime
	return st, nil
}

func readStat(h *host.Host, dir string) (Process, error) {
	b, err := h.ReadFile(dir + "/stat")
	if err != nil {
		return Process{}, err
	}
	st, err := parseStat(b)
	if err != nil {
		return Process{}, fmt.Errorf("%s/stat: %w", dir, err)
	}
	return Process{PID: st.pid, PPID: st.ppid, PGID: st.pgid, SID: st.sid, State: st.state, Comm: st.comm,
		StartTicks: st.start, CPUTicks: st.cpuTicks}, nil
}

// readStatus fills the fields status holds: uids, gids, groups, thread
// count, NSpid, NSpgid and the effective capabilities; and, where stat was
// not read (a status-only read, /proc/self), the PID, parent, name and
// state. A short status leaves the missing ones empty.
func readStatus(h *host.Host, dir string, p *Process) error {
	b, err := h.ReadFile(dir + "/status")
	if err != nil {
		return err
	}
	statRead := p.PID != 0
	for rest := string(b); rest != ""; {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch key {
		case "Uid":
			p.UIDs = atois(val)
		case "Gid":
			p.GIDs = atois(val)
		case "Groups":
			p.Groups = atois(val)
		case "NSpid":
			p.NSpid = atois(val)
		case "NSpgid":
			p.NSpgid = atois(val)
		case "Threads":
			p.Threads, _ = strconv.Atoi(strings.TrimSpace(val))
		case "CapEff":
			p.CapEff, _ = strconv.ParseUint(strings.TrimSpace(val), 16, 64)
		case "Umask":
			if m, err := strconv.ParseUint(strings.TrimSpace(val), 8, 32); err == nil {
				p.Umask, p.UmaskKnown = fs.FileMode(m), true
			}
		}
		if statRead {
			continue
		}
		switch key {
		case "Name":
			p.Comm = unescapeName(strings.TrimPrefix(val, "\t"))
		case "State":
			if f := strings.Fields(val); len(f) > 0 {
				p.State = f[0]
			}
		case "PPid":
			p.PPID, _ = strconv.Atoi(strings.TrimSpace(val))
		case "Pid":
			p.PID, _ = strconv.Atoi(strings.TrimSpace(val))
		}
	}
	return nil
}

// unescapeName undoes the one escaping status applies to the name (the
// kernel's proc_task_name escapes only newline and backslash), so it
// equals stat's comm.
func unescapeName(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ReadStat reads /proc/PID/stat alone: PID, parent, process group,
// session, state, name, start time and CPU time. It is the cheapest exact
// identity of a process (PID and start time), for polls and kill checks.
func ReadStat(h *host.Host, pid int) (Process, error) {
	if pid <= 0 {
		return Process{}, fmt.Errorf("invalid pid %d", pid)
	}
	dir := "/proc/" + strconv.Itoa(pid)
	p, err := readStat(h, dir)
	if err != nil {
		return Process{}, err
	}
	if p.PID != pid {
		return Process{}, fmt.Errorf("%s/stat names pid %d", dir, p.PID)
	}
	return p, nil
}

// ReadStatus reads /proc/PID/status alone: PID, parent, name, state, uids,
// gids, groups, threads, NSpid, NSpgid and capabilities, in one read (the
// shm scanner's holders need the name and the uid only).
func ReadStatus(h *host.Host, pid int) (Process, error) {
	if pid <= 0 {
		return Process{}, fmt.Errorf("invalid pid %d", pid)
	}
	var p Process
	if err := readStatus(h, "/proc/"+strconv.Itoa(pid), &p); err != nil {
		return Process{}, err
	}
	if p.PID == 0 {
		p.PID = pid // a short status (fixture) without a Pid line
	}
	return p, nil
}

func atois(s string) []int {
	var out []int
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return out
		}
		out = append(out, n)
	}
	return out
}
