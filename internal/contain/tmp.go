package contain

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/ownedtmp"
)

// A run's temporary directory records its owner (internal/ownedtmp) and is
// named TmpPrefix+RUNID-…, the run ID its processes carry in their
// environment marker and its cgroup in its name. The keeper removes the
// directory if ncclwiz dies during a launch; between launches (judging a
// rung, explaining its log) no keeper runs, and a SIGKILL there leaves it
// behind. If ncclwiz and its keeper are both SIGKILLed under a child
// subreaper (a PID namespace ends its processes itself), the run's
// processes outlive them: the next run's SweepRuns ends them.

// ClaimTmp records this process as the owner of dir.
func ClaimTmp(dir string) error { return ownedtmp.Claim(dir) }

// SweepTmp removes the run directories (TmpPrefix*) in parent that this
// user owns and whose owner process is provably gone (ownedtmp.Sweep).
func SweepTmp(parent string) []string { return ownedtmp.Sweep(parent, TmpPrefix) }

// SweepRuns is SweepTmp that also ends what is left of each such run:
// every process in the run's cgroup (cgroup.kill, which reaches those that
// left the process group and dropped the marker) and every process whose
// environment carries markerKey=RUNID (SIGTERM, then SIGKILL after a
// second), each by PID with its start time checked. It returns notes for
// the user: what was removed and ended, and what could not be looked for.
func SweepRuns(parent, markerKey string) []string {
	var notes []string
	own, cgErr := ownCgroupDir()
	for _, dir := range ownedtmp.SweepWith(parent, TmpPrefix, func(dir string) {
		if id := runIDOf(dir); id != "" {
			notes = append(notes, endLeftRun(id, markerKey, own, cgErr)...)
		}
	}) {
		notes = append(notes, "removed "+dir+", left by an earlier `ncclwiz test` that was killed")
	}
	return notes
}

// runIDOf reads RUNID from TmpPrefix+RUNID-SUFFIX ("" for a directory an
// older ncclwiz named without one).
func runIDOf(dir string) string {
	rest := strings.TrimPrefix(filepath.Base(dir), TmpPrefix)
	id, _, ok := strings.Cut(rest, "-")
	if !ok || len(id) < 8 {
		return ""
	}
	for _, c := range id {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return ""
		}
	}
	return id
}

// endLeftRun ends the processes of the run id whose ncclwiz and keeper are
// gone.
func endLeftRun(id, markerKey, own string, cgErr error) []string {
	var ended []string
	cgFound := false
	if cgErr == nil {
		dirs, _ := filepath.Glob(filepath.Join(own, TmpPrefix+id+"-*"))
		for _, d := range dirs {
			cgFound = true
			ended = append(ended, killCgroup(d)...)
		}
	}
	self := os.Getpid()
	var marked []Proc
	if t := table(); t != nil {
		for _, p := range t.All() {
			if p.PID != self && alive(p) && hasEnv(p.PID, markerKey+"="+id) {
				marked = append(marked, Proc{PID: p.PID, Comm: p.Comm, Command: Cmdline(p.PID), start: p.StartTicks})
			}
		}
	}
	for _, p := range marked {
		if s, ok := readStat(p.PID); ok && s.StartTicks == p.start {
			_ = syscall.Kill(p.PID, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(time.Second)
	for _, p := range marked {
		for time.Now().Before(deadline) {
			if s, ok := readStat(p.PID); !ok || s.StartTicks != p.start || !alive(s) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if s, ok := readStat(p.PID); ok && s.StartTicks == p.start && alive(s) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		ended = append(ended, fmt.Sprintf("%d %s", p.PID, p.Command))
	}
	var notes []string
	if len(ended) > 0 {
		notes = append(notes, fmt.Sprintf("ended %d process(es) left by the earlier `ncclwiz test` run %s, which was killed together with its keeper: %s",
			len(ended), id, strings.Join(ended, "; ")))
	}
	if !cgFound {
		notes = append(notes, fmt.Sprintf("the earlier `ncclwiz test` run %s was killed together with its keeper and had no cgroup here: "+
			"a process of it that left its process group and dropped %s cannot be found any more (`ps -eo pid,sess,args` shows what still runs)", id, markerKey))
	}
	return notes
}

// killCgroup ends every process of a left-over run cgroup and removes it;
// it returns the processes it held.
func killCgroup(dir string) []string {
	var held []string
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				held = append(held, fmt.Sprintf("%d %s", pid, Cmdline(pid)))
			}
		}
	}
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	for range 100 {
		if ev, err := os.ReadFile(filepath.Join(dir, "cgroup.events")); err != nil || strings.Contains(string(ev), "populated 0") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Rmdir(dir)
	return held
}
