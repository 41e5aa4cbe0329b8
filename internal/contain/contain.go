// Package contain runs a command (the collective test's launcher) so that
// nothing it starts can outlive ncclwiz, whatever ends ncclwiz.
//
// Between ncclwiz and the launcher sits a keeper: ncclwiz re-executed in a
// hidden mode (see Main). The layers, strongest first, each used when the
// machine allows it:
//
//   - PID namespace (CLONE_NEWPID, with CLONE_NEWUSER when not root, so it
//     works unprivileged where user namespaces are allowed): the keeper is
//     its init. Every orphan is re-parented to it, kill(-1) from it reaches
//     every process of the run, and when it dies the kernel kills all of
//     them. This is the only layer that holds when ncclwiz is SIGKILLed
//     and the keeper with it.
//   - Child subreaper (PR_SET_CHILD_SUBREAPER, always unprivileged) when no
//     namespace can be made (containers without user namespaces): setsid
//     and double forks still land below the keeper, which walks its
//     descendants to end them.
//   - A cgroup v2 child of ncclwiz's own cgroup for the launcher's tree,
//     where it is writable (root, or a delegated subtree): cgroup.kill
//     ends the whole tree in one step, which a forking process cannot
//     race.
//   - The keeper's lifeline: a pipe only ncclwiz holds. EOF without the
//     'end' byte means ncclwiz died (SIGKILL, panic, closed terminal):
//     the keeper ends the run and removes its temporary directory.
//   - Afterwards ncclwiz scans /proc for the process group and the run's
//     environment marker, for anything handed outside the tree.
//
// Signals (SIGINT, SIGTERM, SIGHUP) reach ncclwiz, which ends the run in
// order; the keeper is in its own process group, so a terminal's signals
// do not reach it or the launcher directly.
package contain

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// TmpPrefix starts the name of a run's private temporary directory; the
// keeper removes only directories named so.
const TmpPrefix = "ncclwiz-test-"

// Modes of containment.
const (
	ModeAuto      = ""              // the strongest the machine allows
	ModeNamespace = "pid-namespace" // keeper is init of a new PID namespace
	ModeSubreaper = "subreaper"     // keeper is a child subreaper
)

// Spec is one command to contain.
type Spec struct {
	Path string
	Args []string
	Env  []string
	Dir  string
	// Output receives the command's stdout and stderr.
	Output *os.File
	// Marker is a "KEY=VALUE" in Env; processes carrying it outside the
	// keeper's tree still belong to the run.
	Marker string
	// TmpDir is removed by the keeper if ncclwiz dies during the run.
	TmpDir string
	// Mode forces a containment mode; ModeAuto tries the namespace first.
	Mode string
	// Name names the run's cgroup (unique per run).
	Name string
}

// Proc is a process of the run that had to be ended.
type Proc struct {
	PID     int
	Comm    string
	Command string
	// Why it belongs to the run: "launcher", "process group",
	// "environment marker" or "descendant" (found only through the
	// containment: it left the group and dropped the marker).
	Why   string
	start uint64
}

// Run is a started, contained command.
type Run struct {
	spec      Spec
	cmd       *exec.Cmd
	keeperPID int
	launcher  int // host PID (0 if it exited before it was seen)
	nsLaunch  int // its PID in the keeper's namespace
	mode      string
	cg        *cgroup
	notes     []string
	lifeline  *os.File

	mu      sync.Mutex
	ws      syscall.WaitStatus
	hasWS   bool
	exited  chan struct{} // the launcher exited
	gone    chan struct{} // the status pipe closed: the keeper exited
	keeperW chan struct{} // cmd.Wait returned
	ended   bool
	// cgUnused: the keeper could not start the launcher in the cgroup.
	cgUnused bool
}

// errStart marks a failure to start the launcher itself (not a
// containment problem): no fallback helps.
var errStart = errors.New("start")

// Start starts the command under the strongest containment available.
func Start(spec Spec) (*Run, error) {
	var notes []string
	// Without a cgroup the other layers still hold; Describe says which
	// were used, so a missing cgroup is not worth a note.
	cg, _ := newCgroup(spec.Name)
	modes := []string{ModeNamespace, ModeSubreaper}
	if spec.Mode != ModeAuto {
		modes = []string{spec.Mode}
	}
	var lastErr error
	for _, m := range modes {
		r, err := start(spec, m, cg)
		if err == nil {
			r.notes = append(notes, r.notes...)
			return r, nil
		}
		if errors.Is(err, errStart) {
			if cg != nil {
				_ = cg.remove()
			}
			return nil, err
		}
		lastErr = err
		notes = append(notes, fmt.Sprintf("%s is not available here (%v)", describeMode(m, false), err))
	}
	if cg != nil {
		_ = cg.remove()
	}
	return nil, fmt.Errorf("contain the test's processes: %w", lastErr)
}

func describeMode(mode string, cg bool) string {
	s := "a PID namespace"
	if mode == ModeSubreaper {
		s = "a child subreaper"
	}
	if cg {
		s += " with a cgroup"
	}
	return s
}

func start(spec Spec, mode string, cg *cgroup) (r *Run, err error) {
	var closeLater []*os.File
	defer func() {
		for _, f := range closeLater {
			f.Close()
		}
	}()
	pipe := func() (*os.File, *os.File, error) {
		rd, wr, err := os.Pipe()
		if err == nil {
			closeLater = append(closeLater, rd, wr)
		}
		return rd, wr, err
	}
	statusR, statusW, err := pipe()
	if err != nil {
		return nil, err
	}
	lifeR, lifeW, err := pipe()
	if err != nil {
		return nil, err
	}
	cfgR, cfgW, err := pipe()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe", Args: []string{keeperArg0, keeperArg1},
		Env: []string{keeperEnv + "=1"}, Dir: "/",
		Stdout: spec.Output, Stderr: spec.Output,
		ExtraFiles: []*os.File{statusW, lifeR, cfgR},
	}
	attr := &syscall.SysProcAttr{Setpgid: true}
	if mode == ModeNamespace {
		attr.Cloneflags = unix.CLONE_NEWPID | unix.CLONE_NEWNS
		if os.Geteuid() != 0 {
			// The keeper keeps the caller's UID inside (so files it and
			// the test create are the user's) and CAP_SYS_ADMIN in its
			// own namespace only to mount /proc; it drops it before
			// starting the launcher.
			uid, gid := os.Geteuid(), os.Getegid()
			attr.Cloneflags |= unix.CLONE_NEWUSER
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
			attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
		}
	}
	if cg != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, cg.fd)
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r = &Run{
		spec: spec, cmd: cmd, keeperPID: cmd.Process.Pid, mode: mode, cg: cg,
		exited: make(chan struct{}), gone: make(chan struct{}), keeperW: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(r.keeperW)
	}()
	// The keeper holds its ends now; ncclwiz keeps the lifeline's write end
	// (close-on-exec: no other child inherits it) and the status read end.
	statusW.Close()
	lifeR.Close()
	cfgR.Close()
	closeLater = []*os.File{cfgW}
	r.lifeline = lifeW
	cfg := keeperConfig{Path: spec.Path, Args: spec.Args, Env: spec.Env, Dir: spec.Dir, TmpDir: spec.TmpDir,
		Cgroup: cgPath(cg), MountProc: mode == ModeNamespace, KillBound: 10 * time.Second}
	if err := json.NewEncoder(cfgW).Encode(cfg); err != nil {
		r.abandon()
		statusR.Close()
		return nil, fmt.Errorf("configure the keeper: %w", err)
	}
	cfgW.Close()
	closeLater = nil

	started := make(chan string, 1)
	go r.readStatus(statusR, started)
	line, ok := <-started
	kind, text, _ := strings.Cut(line, " ")
	switch {
	case !ok:
		r.abandon()
		return nil, errors.New("the keeper exited before starting the command (is contain.Main called first in main and TestMain?)")
	case kind == "error":
		r.abandon()
		return nil, fmt.Errorf("%w: %s", errStart, text)
	}
	nspid, _ := strconv.Atoi(text)
	r.nsLaunch = nspid
	r.launcher = r.hostPID(nspid)
	return r, nil
}

// readStatus reads the keeper's lines; the first "started" or "error"
// goes to started.
func (r *Run) readStatus(f *os.File, started chan<- string) {
	defer f.Close()
	defer close(r.gone)
	sent := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kind, text, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "nocgroup":
			r.mu.Lock()
			r.cgUnused = true
			r.notes = append(r.notes, "the run's cgroup could not be used: "+text)
			r.mu.Unlock()
		case "note":
			r.mu.Lock()
			r.notes = append(r.notes, text)
			r.mu.Unlock()
		case "started", "error":
			if !sent {
				started <- sc.Text()
				sent = true
			}
		case "exit":
			if n, err := strconv.ParseUint(text, 10, 32); err == nil && !r.hasWS {
				r.mu.Lock()
				r.ws, r.hasWS = syscall.WaitStatus(n), true
				r.mu.Unlock()
				close(r.exited)
			}
		}
	}
	if !sent {
		close(started)
	}
	// The keeper is gone: if it never said how the launcher ended (it
	// was killed), the launcher is gone too.
	r.mu.Lock()
	if !r.hasWS {
		close(r.exited)
	}
	r.mu.Unlock()
}

// hostPID maps the launcher's PID in the keeper's namespace to the host's
// (they are equal without a namespace).
func (r *Run) hostPID(nspid int) int {
	if r.mode != ModeNamespace {
		return nspid
	}
	t := table()
	if t == nil {
		return 0
	}
	for _, c := range t.Children(r.keeperPID) {
		if n, _, ok := nsLocal(c.PID); ok && n == nspid {
			return c.PID
		}
	}
	return 0
}

// abandon ends a keeper that failed to start the command.
func (r *Run) abandon() {
	r.lifeline.Write([]byte{'k'})
	r.lifeline.Close()
	select {
	case <-r.keeperW:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.keeperW
	}
	if r.cg != nil {
		_ = r.cg.remove()
	}
}

// Mode is the containment in use: ModeNamespace or ModeSubreaper.
func (r *Run) Mode() string { return r.mode }

// Describe says in words how the run is contained.
func (r *Run) Describe() string {
	r.mu.Lock()
	s := describeMode(r.mode, r.cg != nil && !r.cgUnused)
	r.mu.Unlock()
	if r.mode == ModeNamespace && os.Geteuid() != 0 {
		s += " (in a user namespace)"
	}
	return s
}

// Notes are facts about the containment worth reporting (a weaker layer
// used, /proc not remounted).
func (r *Run) Notes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.notes...)
}

// LauncherPID is the launcher's PID as ncclwiz sees it.
func (r *Run) LauncherPID() int { return r.launcher }

// Exited is closed when the launcher has exited (or the keeper is gone).
func (r *Run) Exited() <-chan struct{} { return r.exited }

// Status is the launcher's wait status, once it exited and was reaped.
func (r *Run) Status() (syscall.WaitStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ws, r.hasWS
}

// Terminate asks for a graceful stop: the keeper sends SIGTERM to the
// launcher's process group.
func (r *Run) Terminate() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
}

// Report is what End found and did.
type Report struct {
	// Ended are the processes of the run that were alive when it was
	// ended (the launcher among them if it had not exited).
	Ended []Proc
	// Leftover could not be ended within the bound (stuck in the kernel).
	Leftover []Proc
}

// End lists every process of the run that is still alive, ends them all
// and waits (at most bound for each step) until /proc shows none. It is
// safe to call more than once; later calls return an empty report.
func (r *Run) End(bound time.Duration) Report {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return Report{}
	}
	r.ended = true
	r.mu.Unlock()

	var rep Report
	rep.Ended = r.members(nil)
	_, _ = r.lifeline.Write([]byte{'k'})
	r.lifeline.Close()
	select {
	case <-r.keeperW:
	case <-time.After(bound):
		// The keeper could not finish (a process stuck in the kernel);
		// killing it ends a namespace, or leaves the rest to the sweep.
		_ = r.cmd.Process.Kill()
		select {
		case <-r.keeperW:
		case <-time.After(bound):
		}
	}
	// Anything outside the keeper's tree: by group, marker or cgroup.
	deadline := time.Now().Add(bound)
	for {
		left := r.members(rep.Ended)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			rep.Leftover = left
			break
		}
		if r.cg != nil {
			_ = r.cg.kill()
		}
		for _, p := range left {
			_ = killExact(p.PID, p.start, unix.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-r.gone:
	case <-time.After(bound):
	}
	if r.cg != nil && len(rep.Leftover) == 0 {
		if err := r.cg.remove(); err != nil {
			r.mu.Lock()
			r.notes = append(r.notes, err.Error())
			r.mu.Unlock()
		}
	}
	return rep
}

// members lists the live processes of the run other than the keeper:
// those below the keeper (while it lives: once reaped, its PID may name
// another process), in the run's cgroup, carrying the marker, or seen
// before (same PID and start time). Nothing else is ever a member, so an
// unrelated process is never reported or killed.
func (r *Run) members(seen []Proc) []Proc {
	t := table()
	if t == nil {
		return nil
	}
	tree := map[int]bool{}
	select {
	case <-r.keeperW:
	default:
		for _, d := range t.Descendants(r.keeperPID) {
			tree[d.PID] = true
		}
	}
	var inCg map[int]bool
	if r.cg != nil {
		inCg = r.cg.procs()
	}
	known := map[int]uint64{}
	for _, p := range seen {
		known[p.PID] = p.start
	}
	var out []Proc
	for _, s := range t.All() {
		pid := s.PID
		if pid == r.keeperPID || pid == os.Getpid() || !alive(s) {
			continue
		}
		inTree := tree[pid] || inCg[pid]
		if st, ok := known[pid]; ok && st == s.StartTicks {
			inTree = true
		}
		marked := r.spec.Marker != "" && hasEnv(pid, r.spec.Marker)
		if !inTree && !marked {
			continue
		}
		why := "descendant"
		switch {
		case pid == r.launcher:
			why = "launcher"
		case r.inGroup(pid, s, inTree):
			why = "process group"
		case marked:
			why = "environment marker"
		}
		out = append(out, Proc{PID: pid, Comm: s.Comm, Command: Cmdline(pid), Why: why, start: s.StartTicks})
	}
	return out
}

// inGroup reports whether a member of the run is in the launcher's
// process group. In a namespace the group is matched by its ID there,
// which holds even when the launcher exited before ncclwiz saw its host
// PID.
func (r *Run) inGroup(pid int, s proctab.Process, inTree bool) bool {
	if !inTree {
		return false
	}
	if r.launcher > 0 && s.PGID == r.launcher {
		return true
	}
	if r.mode != ModeNamespace {
		return false
	}
	_, g, ok := nsLocal(pid)
	return ok && g == r.nsLaunch
}

func cgPath(c *cgroup) string {
	if c == nil {
		return ""
	}
	return c.dir
}

// Available reports whether mode can contain a run here, by starting and
// ending /bin/true under it.
func Available(mode string) error {
	r, err := Start(Spec{Path: "/bin/true", Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Mode: mode,
		Name: "ncclwiz-probe-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)})
	if err != nil {
		return err
	}
	<-r.Exited()
	r.End(10 * time.Second)
	return nil
}
