package hang

import (
	"fmt"
	"sort"
	"strings"
)

// Thresholds of the CPU judgement. A rank spinning in NCCL (a busy-wait on
// the host, or the proxy thread polling) uses most of a core; a rank
// blocked in a read, a futex or a stop uses almost none — a few ticks of
// its runtime's and watchdog threads. On a loaded machine the spinning
// ranks get less than a core, so "idle" is also relative to them.
const (
	spinPct = 10.0
	idlePct = 5.0
	// idleShare: a rank below this share of the busiest rank's CPU is idle
	// next to it.
	idleShare = 0.1
	// nearIdlePowerShare: a GPU at full utilisation drawing less than this
	// share of its power limit is spinning, not computing.
	nearIdlePowerShare = 0.35
)

// Evidence is one finding about one rank from one source.
type Evidence struct {
	Rank int `json:"rank"`
	PID  int `json:"pid,omitempty"`
	// Source is "process", "gpu", "ras" or "flight_recorder".
	Source string `json:"source"`
	Text   string `json:"text"`
	// Suspect is true when this evidence points at the rank as the cause.
	Suspect bool `json:"suspect"`
}

// JudgeSamples turns the per-rank samples into evidence. stuck is true when
// every live rank is idle: the whole job waits (on a rank of another
// machine, the rendezvous, or a file system).
func JudgeSamples(ss []RankSample) (ev []Evidence, stuck bool) {
	spinning, idle, live := 0, 0, 0
	busiest := 0.0
	for _, s := range ss {
		if !s.Gone {
			busiest = max(busiest, s.CPUPct)
		}
	}
	// A rank seen runnable (R) in both samples wants CPU: on a loaded
	// machine it may just not get any.
	isIdle := func(s RankSample) bool {
		return s.CPUPct < idlePct && s.CPUPct < idleShare*max(busiest, idlePct/idleShare) && !(s.States[0] == "R" && s.States[1] == "R")
	}
	for _, s := range ss {
		if s.Gone {
			continue
		}
		live++
		if s.CPUPct >= spinPct {
			spinning++
		}
		if isIdle(s) {
			idle++
		}
	}
	for _, s := range ss {
		add := func(suspect bool, format string, args ...any) {
			ev = append(ev, Evidence{Rank: s.Rank, PID: s.PID, Source: "process", Text: fmt.Sprintf(format, args...), Suspect: suspect})
		}
		switch {
		case s.Gone:
			add(true, "exited while the others still run")
			continue
		case s.Stopped():
			add(true, "is stopped (state T: SIGSTOP, Ctrl-Z or a debugger) — a stopped rank blocks every collective")
		case len(s.Blocked) > 0:
			add(true, "%d thread(s) in uninterruptible wait (state D%s): stuck in the kernel, usually I/O or a driver call", len(s.Blocked), wchanNote(s.Wchan))
		case isIdle(s) && spinning > 0:
			add(true, "used almost no CPU (%.0f%%, %s%s) while %d other rank(s) spin: it is not taking part in the collective the others wait in", s.CPUPct, stateWord(s.States[1]), wchanNote(s.Wchan), spinning)
		case s.CPUPct >= spinPct:
			add(false, "spins at %.0f%% CPU in %d of %d threads", s.CPUPct, s.RanThreads, s.Threads)
		default:
			add(false, "%.0f%% CPU (%s%s)", s.CPUPct, stateWord(s.States[1]), wchanNote(s.Wchan))
		}
		for _, o := range s.Outputs {
			if o.Grew {
				add(false, "wrote %d bytes to %s during the sample", o.Bytes, fdName(o.FD))
			} else {
				add(false, "wrote nothing to %s (%s) during the sample", fdName(o.FD), o.Path)
			}
		}
		if g := s.GPU; g != nil {
			if g.UtilPercent >= 90 && g.PowerLimitW > 0 && float64(g.PowerWatts) < nearIdlePowerShare*float64(g.PowerLimitW) {
				add(false, "GPU %d at %d%% utilisation but %d W of %d W: an NCCL kernel spinning while it waits for a peer", g.Index, g.UtilPercent, g.PowerWatts, g.PowerLimitW)
			} else {
				add(false, "GPU %d: %d%% utilisation, %d W, SM clock %d MHz", g.Index, g.UtilPercent, g.PowerWatts, g.SMClockMHz)
			}
		}
	}
	return ev, live > 0 && idle == live
}

func fdName(fd int) string {
	if fd == 2 {
		return "stderr"
	}
	return "stdout"
}

func stateWord(s string) string {
	switch s {
	case "S":
		return "sleeping"
	case "R":
		return "running"
	case "D":
		return "uninterruptible wait"
	case "T", "t":
		return "stopped"
	}
	return "state " + s
}

func wchanNote(w string) string {
	if w == "" {
		return ""
	}
	return ", waiting in " + w
}

// Suspects returns the ranks named by suspect evidence, by rank.
func Suspects(ev []Evidence) []int {
	seen := map[int]bool{}
	var out []int
	for _, e := range ev {
		if e.Suspect && !seen[e.Rank] {
			seen[e.Rank] = true
			out = append(out, e.Rank)
		}
	}
	sort.Ints(out)
	return out
}

func joinRanks(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprint(r)
	}
	return strings.Join(s, ", ")
}
