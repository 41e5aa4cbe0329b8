package hang

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// KernelEvent is a kernel-log line that matters to a hang.
type KernelEvent struct {
	Time time.Time `json:"time"`
	// Kind is "xid" (an NVIDIA GPU error), "oom" (the OOM killer) or
	// "hung_task" (a task blocked in D state for minutes).
	Kind string `json:"kind"`
	// PID is the process named (oom, hung_task), as the initial PID
	// namespace sees it.
	PID  int    `json:"pid,omitempty"`
	Text string `json:"text"`
}

var (
	reXid  = regexp.MustCompile(`NVRM: Xid \(([^)]*)\): (\d+),`)
	reOOM  = regexp.MustCompile(`Out of memory: Killed process (\d+) \(([^)]*)\)|oom-kill:.*\bpid=(\d+)`)
	reHung = regexp.MustCompile(`INFO: task (.+):(\d+) blocked for more than (\d+) seconds`)
)

// KernelEvents reads the kernel log (`dmesg`, else `journalctl -k`) and
// returns the Xid, OOM-killer and hung-task lines since since. note says
// why nothing could be read (no permission, no dmesg).
func KernelEvents(ctx context.Context, h *host.Host, since time.Time) (ev []KernelEvent, note string) {
	text, err := kernelLog(ctx, h, since)
	if err != nil {
		return nil, err.Error()
	}
	for _, line := range strings.Split(text, "\n") {
		ts, msg, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		t, err := parseKernelTime(ts)
		if err != nil || t.Before(since) {
			continue
		}
		if _, rest, ok := strings.Cut(msg, " kernel: "); ok {
			msg = rest // journalctl's "host kernel: " prefix
		}
		e := KernelEvent{Time: t, Text: textsafe.Clean(strings.TrimSpace(msg))}
		switch {
		case reXid.MatchString(msg):
			e.Kind = "xid"
		case reOOM.MatchString(msg):
			m := reOOM.FindStringSubmatch(msg)
			e.Kind = "oom"
			e.PID, _ = strconv.Atoi(m[1] + m[3])
		case reHung.MatchString(msg):
			m := reHung.FindStringSubmatch(msg)
			e.Kind = "hung_task"
			e.PID, _ = strconv.Atoi(m[2])
		default:
			continue
		}
		ev = append(ev, e)
	}
	return ev, ""
}

func parseKernelTime(s string) (time.Time, error) {
	// dmesg --time-format=iso: 2026-11-24T05:00:00,123456+00:00
	return time.Parse("2006-01-02T15:04:05.999999999Z07:00", strings.Replace(s, ",", ".", 1))
}

func kernelLog(ctx context.Context, h *host.Host, since time.Time) (string, error) {
	if h.Simulated {
		// A practice server has no kernel; the real machine's log (or why
		// it is unreadable) is not the simulation's.
		return "", errors.New("a practice server has no kernel log (on a real machine Xid, OOM-killer and hung-task lines show here)")
	}
	res, err := h.Run(ctx, 10*time.Second, "dmesg", "--time-format=iso")
	if err == nil && res.ExitCode == 0 {
		return string(res.Stdout), nil
	}
	why := "dmesg is not installed"
	if err == nil {
		why = "dmesg: " + textsafe.Clean(strings.TrimSpace(string(res.Stderr)))
	}
	res, err = h.Run(ctx, 10*time.Second, "journalctl", "-k", "--no-pager", "-o", "short-iso-precise", "--since", fmt.Sprintf("@%d", since.Unix()))
	if err == nil && res.ExitCode == 0 {
		return string(res.Stdout), nil
	}
	return "", fmt.Errorf("the kernel log is not readable here (%s; journalctl -k failed too): run as root to see Xid, OOM-killer and hung-task lines", why)
}

// kernelEvidence turns kernel events into evidence: an OOM kill or a hung
// task of a rank names it; an Xid concerns the whole job.
func kernelEvidence(evs []KernelEvent, ss []RankSample) []Evidence {
	byPID := map[int]RankSample{}
	for _, s := range ss {
		byPID[s.PID] = s
	}
	var out []Evidence
	for _, e := range evs {
		when := e.Time.Format(time.RFC3339)
		s, isRank := byPID[e.PID]
		switch {
		case e.Kind == "xid":
			out = append(out, Evidence{Rank: -1, Source: "kernel", Text: fmt.Sprintf("%s: GPU error since the job started: %s (see the gpu-xid guide)", when, e.Text)})
		case isRank && e.PID > 0:
			out = append(out, Evidence{Rank: s.Rank, PID: e.PID, Source: "kernel", Suspect: true, Text: fmt.Sprintf("%s: %s", when, e.Text)})
		case e.Kind == "oom":
			out = append(out, Evidence{Rank: -1, Source: "kernel", Text: fmt.Sprintf("%s: the OOM killer ended a process of this machine since the job started: %s", when, e.Text)})
		}
	}
	return out
}
