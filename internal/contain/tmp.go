package contain

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ownerFile records who made a run's temporary directory. The keeper
// removes the directory if ncclwiz dies during a launch; between launches
// (judging a rung, explaining its log) no keeper runs, and a SIGKILL there
// leaves it behind: the next run's SweepTmp removes it.
const ownerFile = ".ncclwiz-owner"

// owner identifies this process across PID reuse (start time), PID
// namespaces and reboots.
func owner() (string, error) {
	self, ok := readStat(os.Getpid())
	if !ok {
		return "", fmt.Errorf("read /proc/%d/stat", os.Getpid())
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d %s %s", self.PID, self.StartTicks, ns, bootID()), nil
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// ClaimTmp records this process as the owner of dir.
func ClaimTmp(dir string) error {
	o, err := owner()
	if err != nil {
		return fmt.Errorf("claim %s: %w", dir, err)
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(o+"\n"), 0o600)
}

// SweepTmp removes the run directories (TmpPrefix*) in parent that this
// user owns and whose owner process is provably gone: same PID namespace
// and boot, and no process with that PID and start time. A directory
// without an owner record, of another user, in another PID namespace, or a
// symlink, is left alone. It returns the directories removed.
func SweepTmp(parent string) []string {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	myNS, _ := os.Readlink("/proc/self/ns/pid")
	boot := bootID()
	var removed []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), TmpPrefix) {
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
			if s, ok := readStat(pid); ok && s.StartTicks == start {
				continue // alive
			}
		}
		if os.RemoveAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}
