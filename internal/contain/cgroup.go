package contain

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/host"
)

// cgroup is a cgroup v2 directory made for one run under ncclwiz's own
// cgroup. It holds the launcher and everything it starts, not the keeper
// (which stays in ncclwiz's cgroup), so that cgroup.kill ends the whole
// run but not the keeper, and the keeper can remove the cgroup when it is
// the one cleaning up (ncclwiz gone).
type cgroup struct {
	dir string
	fd  *os.File // passed to the keeper for clone3(CLONE_INTO_CGROUP)
}

// newCgroup creates the run's cgroup, or says why it cannot: cgroup v1
// only, ncclwiz's cgroup not writable (not delegated to this user), or a
// kernel without cgroup.kill (before 5.14).
func newCgroup(name string) (*cgroup, error) {
	own, err := ownCgroupDir()
	if err != nil {
		return nil, err
	}
	sweepCgroups(own)
	dir := filepath.Join(own, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create a cgroup under %s: %w", own, err)
	}
	cg := &cgroup{dir: dir}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		_ = cg.remove()
		return nil, errors.New("this kernel has no cgroup.kill (Linux 5.14+)")
	}
	if cg.fd, err = os.Open(dir); err != nil {
		_ = cg.remove()
		return nil, err
	}
	return cg, nil
}

// staleAge is how old an empty run cgroup must be before another run
// removes it: a run's cgroup is empty for a moment before its launcher
// starts, and must not be taken from it then.
const staleAge = time.Minute

// sweepCgroups removes empty run cgroups (TmpPrefix*) under own that are
// older than staleAge: left when both ncclwiz and its keeper were killed.
func sweepCgroups(own string) {
	ents, err := os.ReadDir(own)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), TmpPrefix) {
			continue
		}
		dir := filepath.Join(own, e.Name())
		fi, err := os.Stat(dir)
		if err != nil || time.Since(fi.ModTime()) < staleAge {
			continue
		}
		ev, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil || !strings.Contains(string(ev), "populated 0") {
			continue
		}
		// rmdir removes only an empty cgroup: a populated one is refused.
		_ = unix.Rmdir(dir)
	}
}

// ownCgroupDir is the cgroup v2 directory of this process: the "0::" line
// of /proc/self/cgroup under the cgroup2 mount point.
func ownCgroupDir() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	rel := ""
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			rel, found = p, true
		}
	}
	if !found {
		return "", errors.New("no cgroup v2 hierarchy (cgroup v1 only)")
	}
	mnt, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	return filepath.Join(mnt, filepath.Clean("/"+rel)), nil
}

// cgroup2Mount finds where the unified hierarchy is mounted
// (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid systems).
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) >= 5 && f[3] == "/" {
			return host.UnescapeMount(f[4]), nil
		}
	}
	return "", errors.New("cgroup2 is not mounted")
}

// procs lists the PIDs in the cgroup (the launcher's whole tree; cgroups
// its processes made below it are included).
func (c *cgroup) procs() map[int]bool {
	out := map[int]bool{}
	_ = filepath.WalkDir(c.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out[pid] = true
			}
		}
		return nil
	})
	return out
}

// kill ends every process in the cgroup at once (the kernel walks it, so
// a process forking meanwhile cannot escape).
func (c *cgroup) kill() error {
	return os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
}

// remove deletes the run's cgroup once it is empty; a cgroup still
// populated (a process stuck in the kernel) is left and reported.
func (c *cgroup) remove() error {
	if c.fd != nil {
		c.fd.Close()
	}
	return removeCgroup(c.dir)
}

// removeCgroup removes dir; rmdir fails with EBUSY until the last process
// has been reaped, which after cgroup.kill takes a moment.
func removeCgroup(dir string) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
