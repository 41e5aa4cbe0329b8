// Package ownedtmp makes private temporary directories that record the
// process that made them, and sweeps those whose maker is provably gone.
// A directory is removed by its maker when it ends normally; a SIGKILL (or
// a signal nobody handled) leaves it, and the next run's Sweep removes it.
// The collective test's run directories and the practice scenarios' private
// copies both use it.
package ownedtmp

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// ownerFile records who made a directory.
const ownerFile = ".ncclwiz-owner"

// owner identifies this process across PID reuse (start time), PID
// namespaces and reboots.
func owner() (string, error) {
	self, err := proctab.ReadStat(procHost(), os.Getpid())
	if err != nil {
		return "", fmt.Errorf("read /proc/%d/stat: %w", os.Getpid(), err)
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d %s %s", self.PID, self.StartTicks, ns, bootID()), nil
}

func procHost() *host.Host { return &host.Host{Root: "/"} }

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// Claim records this process as the owner of dir.
func Claim(dir string) error {
	o, err := owner()
	if err != nil {
		return fmt.Errorf("claim %s: %w", dir, err)
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(o+"\n"), 0o600)
}

// Make creates a 0700 directory prefix* in parent ("" is the system's
// temporary directory) owned by this process.
func Make(parent, prefix string) (string, error) {
	d, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", err
	}
	if err := Claim(d); err != nil {
		_ = os.RemoveAll(d)
		return "", err
	}
	return d, nil
}

// Sweep removes the directories prefix* in parent that this user owns and
// whose owner process is provably gone: same PID namespace and boot, and
// no process with that PID and start time (or an earlier boot). A
// directory without an owner record, of another user, of an owner in
// another PID namespace, or a symlink, is left alone. It returns the
// directories removed.
func Sweep(parent, prefix string) []string { return SweepWith(parent, prefix, nil) }

// SweepWith is Sweep; before (if not nil) is called with each directory
// about to be removed, while it is still there.
func SweepWith(parent, prefix string, before func(dir string)) []string {
	if parent == "" {
		parent = os.TempDir()
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	myNS, _ := os.Readlink("/proc/self/ns/pid")
	boot := bootID()
	var removed []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) != 4 {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		start, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if f[3] == boot {
			if f[2] != myNS {
				continue // its owner may live in another PID namespace
			}
			if p, err := proctab.ReadStat(procHost(), pid); err == nil && p.StartTicks == start {
				continue // alive
			}
		}
		if before != nil {
			before(dir)
		}
		if os.RemoveAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}
