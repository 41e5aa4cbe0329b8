package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LocalOptions tune the real host.
type LocalOptions struct {
	// ShmDir overrides /dev/shm (the --shm-path flag).
	ShmDir string
	// NoNVML leaves NVML out, for commands that never look at GPUs.
	NoNVML bool
}

// Local returns the real machine ncclwiz runs on.
func Local(opts LocalOptions) *Host {
	name, err := os.Hostname()
	if err != nil {
		name = "localhost"
	}
	home, _ := os.UserHomeDir()
	h := &Host{
		Kind:       "local",
		Name:       name,
		Root:       "/",
		ShmDir:     opts.ShmDir,
		Env:        os.Environ(),
		UID:        os.Getuid(),
		EUID:       os.Geteuid(),
		Home:       home,
		StatfsFunc: RealStatfs,
		Runner:     ExecRunner{},
		Act:        RealActions(),
		Net:        RealNet(),
	}
	if !opts.NoNVML {
		h.NVML = RealNVML()
	}
	return h
}

// RealStatfs calls statfs(2).
func RealStatfs(path string) (StatFS, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return StatFS{}, err
	}
	return StatFS{
		Type: st.Type, Bsize: st.Bsize, Blocks: st.Blocks, Bfree: st.Bfree,
		Bavail: st.Bavail, Files: st.Files, Ffree: st.Ffree, Flags: st.Flags,
	}, nil
}

// ExecRunner runs real programs with a timeout, in their own process group
// so that a timeout ends every child they started.
type ExecRunner struct{}

// Run implements Runner.
func (ExecRunner) Run(ctx context.Context, timeout time.Duration, name string, args ...string) (CommandResult, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return CommandResult{ExitCode: -1}, fmt.Errorf("%s: %w", name, ErrCommandNotFound)
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	res := CommandResult{Stdout: out.Bytes(), Stderr: errb.Bytes(), ExitCode: cmd.ProcessState.ExitCode()}
	if ctx.Err() == context.DeadlineExceeded {
		return res, fmt.Errorf("%s: timed out after %s", name, timeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return res, nil // a non-zero exit is a result, not a failure to run
	}
	if err != nil {
		return res, fmt.Errorf("run %s: %w", name, err)
	}
	return res, nil
}
