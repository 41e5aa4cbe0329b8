// Package host is the one seam through which ncclwiz reads the machine: the
// filesystem (/proc, /sys, /etc, /dev/shm), statfs, the environment, the
// user's identity, NVML and external commands. Checks never touch the OS
// directly, so every check runs against fixture trees and simulated GPUs in
// tests and against a named simulated scenario in the wizard.
package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shirou/gopsutil/v4/common"

	"github.com/ncclwiz/ncclwiz/internal/saferead"
)

// DefaultShmDir is where glibc's shm_open and NCCL's mkstemp put segments.
const DefaultShmDir = "/dev/shm"

// StatFS is the subset of statfs(2) the checks need.
type StatFS struct {
	Type   int64  `yaml:"type"` // filesystem magic; TmpfsMagic for tmpfs
	Bsize  int64  `yaml:"bsize"`
	Blocks uint64 `yaml:"blocks"`
	Bfree  uint64 `yaml:"bfree"`
	Bavail uint64 `yaml:"bavail"`
	Files  uint64 `yaml:"files"`
	Ffree  uint64 `yaml:"ffree"`
	Flags  int64  `yaml:"flags"`
}

// TmpfsMagic is TMPFS_MAGIC from linux/magic.h.
const TmpfsMagic = 0x01021994

// Total returns the size of the filesystem in bytes.
func (s StatFS) Total() uint64 { return s.Blocks * uint64(s.Bsize) }

// Free returns the bytes available to unprivileged users.
func (s StatFS) Free() uint64 { return s.Bavail * uint64(s.Bsize) }

// Used returns the bytes in use.
func (s StatFS) Used() uint64 { return (s.Blocks - s.Bfree) * uint64(s.Bsize) }

// CommandResult is what a Runner returns.
type CommandResult struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// ErrCommandNotFound is returned by a Runner when the program is not installed.
var ErrCommandNotFound = errors.New("command not found")

// Runner runs external programs with a timeout. Implementations must never
// use a shell: arguments are passed as they are.
type Runner interface {
	Run(ctx context.Context, timeout time.Duration, name string, args ...string) (CommandResult, error)
}

// Host describes the machine the checks look at.
type Host struct {
	// Kind is "local", "fixture" or "scenario".
	Kind string
	// Name is shown in reports: the hostname, fixture dir or scenario name.
	Name string
	// Root is the filesystem root under which /proc, /sys, /etc and /dev
	// are read. It is "/" on the real machine.
	Root string
	// ShmDir is the shared-memory directory as processes on the host see it
	// (what /proc/PID/maps and fd links show), normally /dev/shm.
	ShmDir string
	// Env is the environment of the user being diagnosed, KEY=VALUE form.
	Env []string
	// UID and EUID of the user running ncclwiz.
	UID, EUID int
	// Home is the user's home directory as seen on the host (for ~/.nccl.conf).
	Home string
	// StatfsFunc answers statfs for a real (already Path-mapped) path.
	StatfsFunc func(path string) (StatFS, error)
	// NVML is the GPU management library (see nvml_cgo.go); nil means none.
	NVML NVML
	// Runner runs external programs; nil means commands are unavailable.
	Runner Runner
	// Clock returns the current time; tests pin it.
	Clock func() time.Time
	// Simulated marks a practice scenario: fixes must not touch the real machine.
	Simulated bool
	// Act changes the machine on behalf of a consented fix.
	Act Actions
	// Net answers what checks cannot read from files: interfaces with
	// addresses, name resolution, bounded TCP connects (net.go).
	Net Net
	// Peer is a HOST:PORT the user asked net.rendezvous to test (--peer).
	Peer string
	// Python is the interpreter the user named with --python (""), for
	// the checks and tests that look at the job's torch (gpu.JobPython).
	Python string
}

// Path maps an absolute path on the host (e.g. /proc/self/mountinfo) to the
// path where ncclwiz can read it.
func (h *Host) Path(p string) string {
	if h.Root == "" || h.Root == "/" {
		return p
	}
	return filepath.Join(h.Root, p)
}

// ShmReal is the directory to list and stat for shared-memory segments.
func (h *Host) ShmReal() string { return h.Path(h.shmDir()) }

func (h *Host) shmDir() string {
	if h.ShmDir == "" {
		return DefaultShmDir
	}
	return h.ShmDir
}

// ShmLogical is the shared-memory directory as processes see it.
func (h *Host) ShmLogical() string { return h.shmDir() }

// ReadFile reads a host file by its absolute host path.
func (h *Host) ReadFile(p string) ([]byte, error) {
	b, err := os.ReadFile(h.Path(p))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return b, nil
}

// ReadRegular reads a host file that someone else may control (a dump in
// /tmp, a config file an environment variable names) through saferead:
// never a FIFO, device or directory, at most limit bytes, cancellable.
// follow says whether a final symlink is followed (a user's own
// ~/.nccl.conf may be one; a file found in a shared directory is not).
func (h *Host) ReadRegular(ctx context.Context, p string, limit int64, follow bool) ([]byte, error) {
	return saferead.At(ctx, unix.AT_FDCWD, h.Path(p), p, saferead.Options{Limit: limit, FollowLinks: follow})
}

// ReadDir lists a host directory by its absolute host path.
func (h *Host) ReadDir(p string) ([]os.DirEntry, error) {
	ents, err := os.ReadDir(h.Path(p))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, err)
	}
	return ents, nil
}

// Readlink reads a symlink by its absolute host path.
func (h *Host) Readlink(p string) (string, error) {
	return os.Readlink(h.Path(p))
}

// Lstat stats a host path without following a final symlink.
func (h *Host) Lstat(p string) (os.FileInfo, error) {
	return os.Lstat(h.Path(p))
}

// Statfs answers statfs(2) for a host path.
func (h *Host) Statfs(p string) (StatFS, error) {
	if h.StatfsFunc == nil {
		return StatFS{}, fmt.Errorf("statfs %s: not available on this host", p)
	}
	s, err := h.StatfsFunc(h.Path(p))
	if err != nil {
		return StatFS{}, fmt.Errorf("statfs %s: %w", p, err)
	}
	return s, nil
}

// Getenv returns the value of key in the diagnosed environment.
func (h *Host) Getenv(key string) string {
	v, _ := h.LookupEnv(key)
	return v
}

// LookupEnv is like os.LookupEnv on the diagnosed environment.
func (h *Host) LookupEnv(key string) (string, bool) {
	prefix := key + "="
	for i := len(h.Env) - 1; i >= 0; i-- {
		if strings.HasPrefix(h.Env[i], prefix) {
			return h.Env[i][len(prefix):], true
		}
	}
	return "", false
}

// Now returns the host's notion of the current time.
func (h *Host) Now() time.Time {
	if h.Clock != nil {
		return h.Clock()
	}
	return time.Now()
}

// IsRoot reports whether ncclwiz runs with an effective uid of 0.
func (h *Host) IsRoot() bool { return h.EUID == 0 }

// Run runs an external command through the host's Runner.
func (h *Host) Run(ctx context.Context, timeout time.Duration, name string, args ...string) (CommandResult, error) {
	if h.Runner == nil {
		return CommandResult{}, fmt.Errorf("%s: %w", name, ErrCommandNotFound)
	}
	return h.Runner.Run(ctx, timeout, name, args...)
}

// GopsutilContext returns ctx carrying gopsutil's path overrides so that
// gopsutil reads /proc, /sys and /etc under Root.
func (h *Host) GopsutilContext(ctx context.Context) context.Context {
	if h.Root == "" || h.Root == "/" {
		return ctx
	}
	return context.WithValue(ctx, common.EnvKey, common.EnvMap{
		common.HostProcEnvKey: h.Path("/proc"),
		common.HostSysEnvKey:  h.Path("/sys"),
		common.HostEtcEnvKey:  h.Path("/etc"),
		common.HostVarEnvKey:  h.Path("/var"),
		common.HostRunEnvKey:  h.Path("/run"),
		common.HostDevEnvKey:  h.Path("/dev"),
		common.HostRootEnvKey: h.Root,
	})
}
