package shm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/host"
)

// Holder is a process that has a segment open (fd) or mapped (map).
type Holder struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	UID  int    `json:"uid"`
	Via  string `json:"via"`
}

// State of a segment.
type State string

// States.
const (
	InUse    State = "in-use"
	Orphaned State = "orphaned"
	// Unknown: no holder seen, but some processes could not be inspected.
	Unknown State = "unknown"
	// Young: too new to judge; NCCL's init window is short but real.
	Young State = "young"
)

// YoungAge is how old a segment must be before it can count as orphaned.
const YoungAge = 2 * time.Minute

// Segment is one entry of the shared-memory directory ncclwiz cares about.
type Segment struct {
	Name string
	// Path is the path as processes see it; RealPath is where ncclwiz reads it.
	Path, RealPath string
	// Kind is nccl (NCCL >= 2.12 nccl-XXXXXX), nccl-legacy (<= 2.11
	// nccl-shm-…), sem (POSIX semaphores) or torch.
	Kind            string
	Size, Allocated int64
	UID             int
	Mode            os.FileMode
	ModTime         time.Time
	Dev, Ino        uint64
	Nlink           uint64
	Symlink         bool
	LinkTarget      string
	// Irregular is set for entries that are neither files nor symlinks.
	Irregular bool
	OtherUser bool
	Holders   []Holder
	State     State
	Reason    string
}

// Inventory is the result of one scan.
type Inventory struct {
	Dir      string
	Segments []Segment
	// UnreadablePIDs could not be inspected (other users' processes).
	UnreadablePIDs []int
	ScannedPIDs    int
	// Private is false when processes outside ncclwiz's view may share the
	// directory (a container with a shared tmpfs); then nothing is orphaned.
	Private bool
	// Note explains a limitation of this scan, if any.
	Note string
}

// Kind classifies a directory entry name; "" means not ours to look at.
func Kind(name string) string {
	switch {
	case strings.HasPrefix(name, "nccl-shm-"):
		return "nccl-legacy"
	case strings.HasPrefix(name, "nccl-"):
		return "nccl"
	case strings.HasPrefix(name, "sem."):
		return "sem"
	case strings.HasPrefix(name, "torch_"):
		return "torch"
	}
	return ""
}

// Scan lists the segments and proves, with one pass over /proc, which are
// held by live processes.
func Scan(ctx context.Context, h *host.Host) (*Inventory, error) {
	inv := &Inventory{Dir: h.ShmLogical(), Private: true}
	ents, err := h.ReadDir(h.ShmLogical())
	if err != nil {
		return nil, fmt.Errorf("list shared memory: %w", err)
	}
	for _, e := range ents {
		k := Kind(e.Name())
		if k == "" {
			continue
		}
		seg, err := statSegment(h, e.Name(), k)
		if err != nil {
			continue // vanished between readdir and lstat
		}
		inv.Segments = append(inv.Segments, seg)
	}
	sort.Slice(inv.Segments, func(i, j int) bool { return inv.Segments[i].Name < inv.Segments[j].Name })
	if len(inv.Segments) == 0 {
		return inv, nil
	}
	shmDev := dirDevice(h)
	idx := newIndex(inv.Segments, h.ShmLogical())
	sc := procScan(ctx, h, idx, shmDev)
	inv.ScannedPIDs, inv.UnreadablePIDs = sc.scanned, sc.unreadable
	if !sharedVisible(h) {
		inv.Private = false
		inv.Note = "ncclwiz runs inside a container whose /dev/shm may be shared with processes it cannot see (other containers of the pod or the host); no segment is reported as orphaned."
	}
	now := h.Now()
	for i := range inv.Segments {
		s := &inv.Segments[i]
		s.Holders = sc.holders[i]
		s.State, s.Reason = judge(h, s, sc, inv.Private, now)
	}
	return inv, nil
}

func statSegment(h *host.Host, name, kind string) (Segment, error) {
	p := path.Join(h.ShmLogical(), name)
	s := Segment{Name: name, Path: p, RealPath: h.Path(p), Kind: kind}
	fi, err := h.Lstat(p)
	if err != nil {
		return s, err
	}
	s.Mode, s.ModTime, s.Size = fi.Mode(), fi.ModTime(), fi.Size()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.UID, s.Dev, s.Ino, s.Nlink = int(st.Uid), uint64(st.Dev), st.Ino, uint64(st.Nlink)
		s.Allocated = st.Blocks * 512
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		s.Symlink = true
		s.LinkTarget, _ = h.Readlink(p)
	case !fi.Mode().IsRegular():
		s.Irregular = true
	}
	s.OtherUser = s.UID != h.EUID
	return s, nil
}

// dirDevice returns the device of the shm directory as "major:minor" in the
// hex form /proc/PID/maps uses, or "" when unknown.
func dirDevice(h *host.Host) string {
	fi, err := os.Stat(h.ShmReal())
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%02x:%02x", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)))
}

// inInitialPIDNamespace reports whether ncclwiz sees the machine's own PID 1
// (a single entry in NSpid).
func inInitialPIDNamespace(h *host.Host) bool {
	b, err := h.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return len(strings.Fields(rest)) == 1
		}
	}
	return false
}

// sharedVisible reports whether every process that could use the shm
// directory is visible: true on a host, or in a container with its own
// private /dev/shm (Docker's per-container "shm" mount).
func sharedVisible(h *host.Host) bool {
	if _, err := h.ReadFile("/proc/self/status"); err != nil || inInitialPIDNamespace(h) {
		return true
	}
	mi, err := h.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	dir := h.ShmLogical()
	src := ""
	for _, e := range parseMountinfo(mi) {
		if within(dir, e.mountPoint) {
			src = e.source
		}
	}
	return src == "shm"
}

type index struct {
	byIno  map[uint64][]int
	byName map[string]int
	prefix string
}

func newIndex(segs []Segment, dir string) *index {
	ix := &index{byIno: map[uint64][]int{}, byName: map[string]int{}, prefix: strings.TrimRight(dir, "/") + "/"}
	for i, s := range segs {
		if s.Symlink || s.Irregular {
			continue
		}
		ix.byIno[s.Ino] = append(ix.byIno[s.Ino], i)
		ix.byName[s.Name] = i
	}
	return ix
}

type scanResult struct {
	holders    map[int][]Holder
	scanned    int
	unreadable []int
	// unreadableUID maps unreadable PIDs to their owner (from status).
	unreadableUID map[int]int
}

// procScan walks /proc once, reading each process's fd links and maps.
func procScan(ctx context.Context, h *host.Host, ix *index, shmDev string) scanResult {
	res := scanResult{holders: map[int][]Holder{}, unreadableUID: map[int]int{}}
	ents, err := h.ReadDir("/proc")
	if err != nil {
		return res
	}
	real := h.Root == "" || h.Root == "/"
	initNS := inInitialPIDNamespace(h)
	buf := make([]byte, 0, 64*1024) // reused for every maps file
	hits := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if ctx.Err() != nil {
			return res
		}
		res.scanned++
		clear(hits)
		okFD := scanFDs(h, pid, ix, real, hits)
		okMaps := scanMaps(h, pid, ix, shmDev, real, hits, buf)
		// The host's init (PID 1 of the initial namespace) never maps a
		// job's segments; some sandboxes deny reading its maps even to
		// root, which must not make every segment unprovable.
		if okFD && !okMaps && pid == 1 && initNS {
			okMaps = true
		}
		if !okFD || !okMaps {
			res.unreadable = append(res.unreadable, pid)
			res.unreadableUID[pid] = procUID(h, pid)
		}
		if len(hits) == 0 {
			continue
		}
		comm := procComm(h, pid)
		uid := procUID(h, pid)
		for i, via := range hits {
			res.holders[i] = append(res.holders[i], Holder{PID: pid, Comm: comm, UID: uid, Via: via})
		}
	}
	return res
}

func scanFDs(h *host.Host, pid int, ix *index, real bool, hits map[int]string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := h.ReadDir(dir)
	if err != nil {
		return os.IsNotExist(unwrapPath(err)) // a process that exited is not unreadable
	}
	for _, fe := range ents {
		fdPath := dir + "/" + fe.Name()
		target, err := h.Readlink(fdPath)
		if err != nil {
			continue
		}
		if strings.HasPrefix(target, ix.prefix) {
			name := strings.TrimSuffix(strings.TrimPrefix(target, ix.prefix), " (deleted)")
			if i, ok := ix.byName[name]; ok && !strings.HasSuffix(target, " (deleted)") {
				hits[i] = "fd"
				continue
			}
		}
		if real && (strings.Contains(target, "/nccl-") || strings.Contains(target, "/sem.") || strings.Contains(target, "/torch_")) {
			// Same file under another path (a bind mount, another mount
			// namespace): match by inode through the link itself.
			if st, err := os.Stat(fdPath); err == nil {
				if sys, ok := st.Sys().(*syscall.Stat_t); ok {
					for _, i := range ix.byIno[sys.Ino] {
						hits[i] = "fd"
					}
				}
			}
		}
	}
	return true
}

var deletedSuffix = []byte(" (deleted)")

func scanMaps(h *host.Host, pid int, ix *index, shmDev string, real bool, hits map[int]string, buf []byte) bool {
	f, err := os.Open(h.Path("/proc/" + strconv.Itoa(pid) + "/maps"))
	if err != nil {
		return os.IsNotExist(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(buf, 1<<20)
	prefix := []byte(ix.prefix)
	dev := []byte(shmDev)
	for sc.Scan() {
		// address perms offset dev inode pathname — parsed in place, since
		// a busy host has hundreds of thousands of lines.
		devF, inoF, pathField, ok := mapsFields(sc.Bytes())
		if !ok {
			continue
		}
		devMatch := len(dev) > 0 && bytes.Equal(devF, dev)
		inShm := bytes.HasPrefix(pathField, prefix)
		if !devMatch && !inShm {
			continue
		}
		ino, err := strconv.ParseUint(string(inoF), 10, 64)
		if err != nil || ino == 0 {
			continue
		}
		if idxs, ok := ix.byIno[ino]; ok && (devMatch || !real) {
			for _, i := range idxs {
				if _, had := hits[i]; !had {
					hits[i] = "map"
				}
			}
			continue
		}
		// Fixture trees cannot reproduce device numbers; fall back to the
		// path, unless the mapping is of a deleted file.
		if !real && inShm && !bytes.HasSuffix(pathField, deletedSuffix) {
			if i, ok := ix.byName[string(pathField[len(prefix):])]; ok {
				if _, had := hits[i]; !had {
					hits[i] = "map"
				}
			}
		}
	}
	return sc.Err() == nil
}

// mapsFields returns the dev, inode and pathname fields of a maps line
// without allocating.
func mapsFields(line []byte) (dev, ino, path []byte, ok bool) {
	field := 0
	i := 0
	for field < 5 {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		start := i
		for i < len(line) && line[i] != ' ' {
			i++
		}
		if start == i {
			return nil, nil, nil, false
		}
		switch field {
		case 3:
			dev = line[start:i]
		case 4:
			ino = line[start:i]
		}
		field++
	}
	for i < len(line) && line[i] == ' ' {
		i++
	}
	return dev, ino, line[i:], true
}

func unwrapPath(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func procComm(h *host.Host, pid int) string {
	b, err := h.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

func procUID(h *host.Host, pid int) int {
	b, err := h.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// judge decides the state of one segment.
func judge(h *host.Host, s *Segment, sc scanResult, private bool, now time.Time) (State, string) {
	switch {
	case s.Symlink:
		return Unknown, "symlink to " + s.LinkTarget + "; not followed, never removed"
	case s.Irregular:
		return Unknown, "not a regular file"
	case len(s.Holders) > 0:
		return InUse, holderText(s.Holders)
	case !private:
		return Unknown, "other containers may hold it"
	}
	// Processes ncclwiz could not inspect only matter if they could have
	// opened the file: its owner, or anyone when the mode allows it. Root
	// can open any file, but NCCL's peers are ranks of one job and run as
	// the user who created the segment (mkstemp makes it 0600), so an
	// uninspectable root process is not counted for a user's 0600 file.
	var blind []int
	for _, pid := range sc.unreadable {
		uid := sc.unreadableUID[pid]
		ownerOnly := s.Mode.Perm()&0o066 == 0
		if uid == s.UID || uid < 0 || !ownerOnly || (uid == 0 && s.UID == 0) {
			blind = append(blind, pid)
		}
	}
	if len(blind) > 0 {
		return Unknown, fmt.Sprintf("%d process(es) could not be inspected (run as root to prove it unused)", len(blind))
	}
	if age := now.Sub(s.ModTime); age < YoungAge {
		return Young, fmt.Sprintf("created %s ago; a job may be starting", age.Round(time.Second))
	}
	return Orphaned, "no live process has it open or mapped"
}

func holderText(hs []Holder) string {
	var parts []string
	for i, hd := range hs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("+%d more", len(hs)-3))
			break
		}
		parts = append(parts, fmt.Sprintf("pid %d (%s) via %s", hd.PID, hd.Comm, hd.Via))
	}
	return "held by " + strings.Join(parts, ", ")
}

// ProveOrphaned re-checks one segment right before it is removed: the path
// must still be the same regular file (same device and inode, not a
// symlink) and no process may have it open or mapped. Any doubt is false.
func ProveOrphaned(ctx context.Context, h *host.Host, seg Segment) (bool, []Holder, error) {
	fi, err := h.Lstat(seg.Path)
	if err != nil {
		return false, nil, fmt.Errorf("%s: %w", seg.Name, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() || st.Ino != seg.Ino || uint64(st.Dev) != seg.Dev {
		return false, nil, fmt.Errorf("%s changed since it was scanned (not the same regular file)", seg.Name)
	}
	cur := seg
	cur.UID, cur.Mode, cur.ModTime = int(st.Uid), fi.Mode(), fi.ModTime()
	ix := newIndex([]Segment{cur}, h.ShmLogical())
	sc := procScan(ctx, h, ix, dirDevice(h))
	if ctx.Err() != nil {
		return false, nil, ctx.Err()
	}
	if hs := sc.holders[0]; len(hs) > 0 {
		return false, hs, nil
	}
	state, why := judge(h, &cur, sc, sharedVisible(h), h.Now())
	if state != Orphaned {
		return false, nil, fmt.Errorf("%s: %s", seg.Name, why)
	}
	return true, nil, nil
}
