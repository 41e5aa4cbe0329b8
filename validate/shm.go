package validate

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/ncclwiz/ncclwiz/host"
)

// shmState is the set of NCCL segments in the shared-memory directory,
// keyed by name, with device and inode so that a name reused by a new file
// counts as new.
type shmState map[string]shmFile

type shmFile struct {
	dev, ino uint64
	size     int64
}

// listShm reads the nccl-* entries of h.ShmReal() without following
// symlinks. A missing or unreadable directory gives an empty state and the
// error (the caller notes that the leftover check could not run).
func listShm(h *host.Host) (shmState, error) {
	dir := h.ShmReal()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return shmState{}, err
	}
	st := shmState{}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "nccl-") {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // removed meanwhile: NCCL unlinks segments once attached
		}
		f := shmFile{size: fi.Size()}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			f.dev, f.ino = sys.Dev, sys.Ino
		}
		st[e.Name()] = f
	}
	return st, nil
}

// newSince returns the entries of after that were not in before.
func newSince(before, after shmState) []ShmEntry {
	var out []ShmEntry
	for name, f := range after {
		if b, ok := before[name]; ok && b.dev == f.dev && b.ino == f.ino {
			continue
		}
		out = append(out, ShmEntry{Name: name, Size: f.size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
