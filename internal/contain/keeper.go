package contain

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The keeper is ncclwiz itself, re-executed (/proc/self/exe) between
// ncclwiz and the launcher. It is the launcher's parent and the reaper of
// everything the launcher leaves: init of a new PID namespace, or a child
// subreaper. It reports the launcher's exit on a pipe and, when told to or
// when ncclwiz is gone (its lifeline pipe reads EOF, which also happens when
// ncclwiz is SIGKILLed or panics), ends every process of the run, and in the
// latter case removes the run's temporary directory.

// keeperEnv and keeperArg0 mark a keeper process. The argument
// "-test.run=^$" makes a test binary that lacks the TestMain hook run no
// tests and exit, so Start notices instead of recursing.
const (
	keeperEnv  = "NCCLWIZ_CONTAIN_KEEPER"
	keeperArg0 = "ncclwiz-keeper"
	keeperArg1 = "-test.run=^$"
)

// File descriptors of the keeper.
const (
	fdStatus   = 3 // keeper -> ncclwiz: note/started/error/exit lines
	fdLifeline = 4 // ncclwiz -> keeper: 'k' = end the run; EOF = ncclwiz is gone
	fdConfig   = 5 // ncclwiz -> keeper: keeperConfig as JSON
	fdCgroup   = 6 // the run's cgroup directory, when there is one
)

type keeperConfig struct {
	Path      string        `json:"path"`
	Args      []string      `json:"args"`
	Env       []string      `json:"env"`
	Dir       string        `json:"dir"`
	TmpDir    string        `json:"tmp_dir"`
	Cgroup    string        `json:"cgroup"` // its directory; fd 6 when set
	MountProc bool          `json:"mount_proc"`
	KillBound time.Duration `json:"kill_bound"`
}

// Main runs the keeper and exits when this process was started as one; it
// returns at once otherwise. Call it first in main (and in TestMain of test
// binaries that start runs).
func Main() {
	if os.Getenv(keeperEnv) != "1" || len(os.Args) == 0 || os.Args[0] != keeperArg0 {
		return
	}
	os.Exit(keeper())
}

func keeper() int {
	// Every credential change below (dropping ambient capabilities) is
	// per thread; the launcher is forked from this one.
	runtime.LockOSThread()
	for _, fd := range []int{fdStatus, fdLifeline, fdConfig, fdCgroup} {
		syscall.CloseOnExec(fd)
	}
	status := os.NewFile(fdStatus, "status")
	say := func(kind, text string) {
		// One write per line: ncclwiz reads lines.
		_, _ = status.Write([]byte(kind + " " + strings.ReplaceAll(text, "\n", " ") + "\n"))
	}
	var cfg keeperConfig
	cf := os.NewFile(fdConfig, "config")
	err := json.NewDecoder(cf).Decode(&cfg)
	cf.Close()
	if err != nil {
		say("error", "keeper configuration: "+err.Error())
		return 1
	}
	if cfg.KillBound <= 0 {
		cfg.KillBound = 10 * time.Second
	}
	if os.Getpid() == 1 {
		if cfg.MountProc {
			if err := mountProc(); err != nil {
				say("note", "/proc could not be remounted for the new PID namespace ("+err.Error()+"); processes of the test see the host's PIDs there")
			}
		}
	} else if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		say("note", "could not become a child subreaper: "+err.Error())
	}
	// Ambient capabilities were only for mounting /proc; the launcher gets none.
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	var cgFD *os.File
	if cfg.Cgroup != "" {
		cgFD = os.NewFile(fdCgroup, "cgroup")
	}
	pid, err := startLauncher(cfg, cgFD, say)
	if err != nil {
		say("error", err.Error())
		return 1
	}
	say("started", fmt.Sprint(pid))

	empty := make(chan struct{})
	go reap(pid, say, empty)
	life := make(chan bool, 1)
	go func() {
		b := make([]byte, 1)
		n, _ := os.NewFile(fdLifeline, "lifeline").Read(b)
		life <- n == 1 && b[0] == 'k'
	}()
	for {
		select {
		case <-sigs:
			// ncclwiz asks for a graceful stop: torchrun forwards SIGTERM
			// to its workers and says what it was doing.
			_ = unix.Kill(-pid, unix.SIGTERM)
		case asked := <-life:
			if !endTree(cgFD, empty, cfg.KillBound) {
				say("note", "some processes of the run did not die within "+cfg.KillBound.String())
			}
			if !asked {
				// ncclwiz is gone: what it would have removed, the keeper does.
				removeTmp(cfg.TmpDir)
				if cgFD != nil {
					cgFD.Close()
					_ = removeCgroup(cfg.Cgroup)
				}
			}
			return 0
		}
	}
}

// startLauncher forks the launcher in its own process group, into the
// run's cgroup when there is one.
func startLauncher(cfg keeperConfig, cg *os.File, say func(string, string)) (int, error) {
	attr := &syscall.ProcAttr{
		Dir:   cfg.Dir,
		Env:   cfg.Env,
		Files: []uintptr{uintptr(unix.Stdin), uintptr(unix.Stdout), uintptr(unix.Stderr)},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	if cg != nil {
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, int(cg.Fd())
	}
	argv := append([]string{cfg.Path}, cfg.Args...)
	pid, err := syscall.ForkExec(cfg.Path, argv, attr)
	if err != nil && cg != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EACCES) {
		// Moving into the cgroup was refused (not delegated to a user
		// namespace, say): the other layers still hold.
		say("nocgroup", err.Error())
		attr.Sys.UseCgroupFD = false
		pid, err = syscall.ForkExec(cfg.Path, argv, attr)
	}
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", cfg.Path, err)
	}
	return pid, nil
}

// reap waits for every child (the launcher and the orphans adopted), says
// how the launcher ended, and closes empty when no child is left: the
// keeper is init or a subreaper, so no child means no process of the run.
func reap(launcher int, say func(string, string), empty chan<- struct{}) {
	defer close(empty)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil:
			return
		case pid == launcher:
			say("exit", fmt.Sprint(uint32(ws)))
		}
	}
}

// endTree kills every process below the keeper and waits (bounded) until
// none is left.
func endTree(cg *os.File, empty <-chan struct{}, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	self := os.Getpid()
	for {
		if cg != nil {
			if f, err := openat(cg, "cgroup.kill"); err == nil {
				_, _ = f.Write([]byte("1"))
				f.Close()
			}
		}
		if self == 1 {
			// From init, -1 is every other process of the namespace.
			_ = unix.Kill(-1, unix.SIGKILL)
		} else {
			if t := table(); t != nil {
				for _, d := range t.Descendants(self) {
					_ = killExact(d.PID, d.StartTicks, unix.SIGKILL)
				}
			}
		}
		select {
		case <-empty:
			return true
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func openat(dir *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// mountProc gives the new PID namespace its own /proc (so that getpid()
// and /proc/self agree), in a private mount namespace.
func mountProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	return nil
}

// removeTmp removes the run's private directory after ncclwiz died: only
// a real directory named ncclwiz-test-*, never through a symlink.
func removeTmp(dir string) {
	if dir == "" || !strings.HasPrefix(filepath.Base(dir), TmpPrefix) {
		return
	}
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		_ = os.RemoveAll(dir)
	}
}
