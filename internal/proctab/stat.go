package proctab

import (
	"fmt"
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

// readStatus fills the uids, thread count and NSpid from status; a short
// status leaves them empty.
func readStatus(h *host.Host, dir string, p *Process) error {
	b, err := h.ReadFile(dir + "/status")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch key {
		case "Uid":
			p.UIDs = atois(val)
		case "NSpid":
			p.NSpid = atois(val)
		case "Threads":
			p.Threads, _ = strconv.Atoi(strings.TrimSpace(val))
		case "PPid":
			if p.PID == 0 { // /proc/self: stat was not read
				p.PPID, _ = strconv.Atoi(strings.TrimSpace(val))
			}
		case "Pid":
			if p.PID == 0 {
				p.PID, _ = strconv.Atoi(strings.TrimSpace(val))
			}
		}
	}
	return nil
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
