package host

import (
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Actions are the few ways fixes change a machine that are not plain file
// operations under Root. A simulated scenario replaces them so that its
// fixes change the simulation only.
type Actions struct {
	// Remount changes the size of the tmpfs at dir, keeping its other
	// per-mount flags (the equivalent of mount -o remount,size=N dir).
	Remount func(dir string, size uint64, mountOpts []string) error
	// Signal sends sig to one process, by PID.
	Signal func(pid int, sig syscall.Signal) error
}

// RealActions act on the running kernel.
func RealActions() Actions {
	return Actions{Remount: realRemount, Signal: func(pid int, sig syscall.Signal) error {
		if pid <= 1 {
			return fmt.Errorf("refusing to signal pid %d", pid)
		}
		return syscall.Kill(pid, sig)
	}}
}

// mountFlags maps per-mount options from mountinfo to MS_* flags, so a
// remount keeps nosuid/nodev/noexec as they were.
var mountFlags = map[string]uintptr{
	"ro": unix.MS_RDONLY, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV, "noexec": unix.MS_NOEXEC,
	"noatime": unix.MS_NOATIME, "nodiratime": unix.MS_NODIRATIME, "relatime": unix.MS_RELATIME,
	"strictatime": unix.MS_STRICTATIME, "sync": unix.MS_SYNCHRONOUS,
}

func realRemount(dir string, size uint64, mountOpts []string) error {
	flags := uintptr(unix.MS_REMOUNT)
	for _, o := range mountOpts {
		flags |= mountFlags[strings.TrimSpace(o)]
	}
	if err := unix.Mount("", dir, "", flags, fmt.Sprintf("size=%d", size)); err != nil {
		return fmt.Errorf("remount %s with size=%d: %w", dir, size, err)
	}
	return nil
}
