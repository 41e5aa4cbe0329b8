package shm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/checks/sysinfo"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/units"
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
	// Unknown: no holder seen, but a holder could be invisible (processes
	// that could not be inspected, other PID namespaces, not a regular file).
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
	Kind string
	// Size is st_size; Allocated is st_blocks*512, what the file really
	// takes (NCCL 2.12-2.18 files are sparse).
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
	// OtherUser: owned by someone other than the user running ncclwiz.
	OtherUser bool
	Holders   []Holder
	State     State
	Reason    string
}

// IsNCCL reports whether NCCL created the segment (either naming scheme).
func (s Segment) IsNCCL() bool { return s.Kind == "nccl" || s.Kind == "nccl-legacy" }

// Inventory is the result of one scan.
type Inventory struct {
	Dir      string
	Segments []Segment
	// UnreadablePIDs could not be inspected (other users' processes without
	// root, non-dumpable processes).
	UnreadablePIDs []int
	// IgnoredPIDs were unreadable but cannot hold a segment: PID 1 of the
	// initial PID namespace (the machine's init), which some sandboxes hide
	// even from root.
	IgnoredPIDs []int
	ScannedPIDs int
	// Private is false when processes outside ncclwiz's view may share the
	// directory (a container whose /dev/shm is the host's or the pod's);
	// then nothing is reported as orphaned.
	Private bool
	// PIDNamespace is "host", "nested" or "unknown".
	PIDNamespace string
	// Visibility lists what decided Private.
	Visibility []string
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

// Scan lists the segments and proves, with one pass over /proc for all of
// them, which are held by live processes. A cancelled scan is an error, never
// a list of "orphaned" segments.
func Scan(ctx context.Context, h *host.Host) (*Inventory, error) {
	dir := shmDir(h)
	inv := &Inventory{Dir: dir}
	ents, err := h.ReadDir(dir)
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
		inv.Private = true
		return inv, nil
	}
	vis := visibility(ctx, h)
	inv.Private, inv.PIDNamespace, inv.Visibility, inv.Note = vis.all, vis.pidNS, vis.evidence, vis.note
	ix := newIndex(inv.Segments, shmPrefixes(h))
	sc, err := procScan(ctx, h, ix, vis.pidNS == "host")
	if err != nil {
		return nil, err
	}
	inv.ScannedPIDs, inv.UnreadablePIDs, inv.IgnoredPIDs = sc.scanned, sc.unreadable, sc.ignored
	now := h.Now()
	for i := range inv.Segments {
		s := &inv.Segments[i]
		s.Holders = sc.holders[i]
		s.State, s.Reason = judge(s, sc, inv.Private, now)
	}
	return inv, nil
}

func statSegment(h *host.Host, name, kind string) (Segment, error) {
	p := path.Join(shmDir(h), name)
	s := Segment{Name: name, Path: p, RealPath: h.Path(p), Kind: kind, UID: -1}
	fi, err := h.Lstat(p) // never follow: a symlink here is reported, not used
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

// shmPrefixes are the paths under which processes name files of the shm
// directory: the directory itself and, if it is a symlink, its target.
func shmPrefixes(h *host.Host) []string {
	dir := shmDir(h)
	out := []string{strings.TrimRight(dir, "/") + "/"}
	if r, err := resolveDir(h, dir); err == nil && r != dir {
		out = append(out, strings.TrimRight(r, "/")+"/")
	}
	return out
}

// The inode numbers of the initial namespaces (PROC_PID_INIT_INO and
// PROC_IPC_INIT_INO in linux/proc_ns.h): fixed since Linux 3.8.
const (
	initPIDNamespace = "pid:[4026531836]"
	initIPCNamespace = "ipc:[4026531839]"
)

type vis struct {
	all      bool
	pidNS    string
	evidence []string
	note     string
}

// pidNamespace decides whether ncclwiz sees every process of the machine.
func pidNamespace(h *host.Host) (string, string) {
	self, errSelf := h.Readlink("/proc/self/ns/pid")
	one, errOne := h.Readlink("/proc/1/ns/pid")
	switch {
	case errSelf == nil && self == initPIDNamespace:
		return "host", "ncclwiz is in the initial PID namespace (/proc/self/ns/pid is " + self + ")"
	case errOne == nil && one == initPIDNamespace:
		return "host", "/proc shows the initial PID namespace (/proc/1/ns/pid is " + one + ")"
	case errSelf == nil && errOne == nil && self != one:
		return "nested", fmt.Sprintf("/proc/self/ns/pid (%s) differs from /proc/1/ns/pid (%s)", self, one)
	case errSelf == nil && strings.HasPrefix(self, "pid:["):
		return "nested", "ncclwiz is in a nested PID namespace (/proc/self/ns/pid is " + self + ", the host's is " + initPIDNamespace + ")"
	}
	// No namespace links (fixture trees): NSpid has one entry per level
	// when /proc was mounted in an outer namespace.
	if b, err := h.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "NSpid:"); ok && len(strings.Fields(rest)) > 1 {
				return "nested", "NSpid in /proc/self/status lists several PID namespaces"
			}
		}
	}
	return "unknown", "the PID namespace could not be read"
}

// visibility decides whether every process that could hold a segment in
// the shm directory is visible in /proc (reference §4 item 6).
func visibility(ctx context.Context, h *host.Host) vis {
	ns, why := pidNamespace(h)
	v := vis{pidNS: ns, evidence: []string{why}}
	if ns == "host" {
		v.all = true
		return v
	}
	c := sysinfo.DetectContainer(ctx, h)
	v.evidence = append(v.evidence, c.Evidence...)
	if ns == "unknown" && !c.InContainer() {
		v.all = true
		v.evidence = append(v.evidence, "no container detected")
		return v
	}
	src := ""
	if b, err := h.ReadFile("/proc/self/mountinfo"); err == nil {
		if r, err := resolveDir(h, shmDir(h)); err == nil {
			if e, ok := findMount(parseMountinfo(b), r); ok {
				src = e.source
			}
		}
	}
	ipc, ipcErr := h.Readlink("/proc/self/ns/ipc")
	ipcHost := ipcErr == nil && ipc == initIPCNamespace
	where := "a container"
	if c.InContainer() {
		where = "a " + c.Runtime + " container"
	}
	const prove = " Holders there are invisible from here, so no segment is called orphaned; run ncclwiz on the host " +
		"(or in a container started with --pid=host) to prove which are unused."
	switch {
	case ipcHost:
		v.evidence = append(v.evidence, "the IPC namespace is the host's ("+ipc+")")
		v.note = "ncclwiz runs in " + where + " with its own PID namespace but the host's IPC namespace (--ipc=host), " +
			"so this /dev/shm is shared with the host and other containers." + prove
	case c.Runtime == sysinfo.RuntimeKubernetes:
		v.note = "ncclwiz runs in a Kubernetes pod: its /dev/shm is shared by every container of the pod, whose processes are in other PID namespaces." + prove
	case src == "shm":
		// Docker, Podman and containerd give each container its own tmpfs
		// named "shm": everything that uses it runs in this container.
		v.all = true
		v.evidence = append(v.evidence, "the shm directory is the container's private tmpfs (mount source \"shm\")")
		return v
	default:
		v.note = fmt.Sprintf("ncclwiz runs in %s with its own PID namespace, and %s is not the container's private tmpfs (mount source %q), "+
			"so it may be shared with processes outside this namespace.", where, shmDir(h), src) + prove
	}
	return v
}

type index struct {
	segs        []Segment
	byIno       map[uint64][]int
	byName      map[string]int
	prefixes    []string
	prefixBytes [][]byte
	// devs are the maps-style "major:minor" strings of the segments'
	// filesystems, to skip other mappings before parsing them.
	devs map[string]bool
}

func newIndex(segs []Segment, prefixes []string) *index {
	ix := &index{segs: segs, byIno: map[uint64][]int{}, byName: map[string]int{}, prefixes: prefixes, devs: map[string]bool{}}
	for i, s := range segs {
		if s.Symlink || s.Irregular {
			continue // never "held": only regular files are judged by holders
		}
		ix.byIno[s.Ino] = append(ix.byIno[s.Ino], i)
		ix.byName[s.Name] = i
		ix.devs[mapsDev(s.Dev)] = true
	}
	for _, p := range prefixes {
		ix.prefixBytes = append(ix.prefixBytes, []byte(p))
	}
	return ix
}

// mapsDev formats a device number as /proc/PID/maps prints it ("%02x:%02x").
func mapsDev(dev uint64) string {
	return fmt.Sprintf("%02x:%02x", unix.Major(dev), unix.Minor(dev))
}

// splitTarget returns the segment name a path refers to if it lies in the
// shm directory, and whether the kernel marked it deleted.
func (ix *index) splitTarget(p string) (name string, inDir, deleted bool) {
	p, deleted = strings.CutSuffix(p, " (deleted)")
	for _, pre := range ix.prefixes {
		if rest, ok := strings.CutPrefix(p, pre); ok && !strings.Contains(rest, "/") {
			return rest, true, deleted
		}
	}
	return path.Base(p), false, deleted
}

type scanResult struct {
	holders    map[int][]Holder
	scanned    int
	unreadable []int
	ignored    []int
	// unreadableUIDs maps unreadable PIDs to their real, effective, saved
	// and filesystem uids (from status, which anyone may read); nil if unknown.
	unreadableUIDs map[int][]int
	// hidden is set when /proc is mounted with hidepid=2 (or invisible,
	// ptraceable) and ncclwiz is not root: other users' processes are not
	// listed at all.
	hidden string
}

// access is what reading one /proc/PID file came to.
type access int

const (
	readOK access = iota
	gone          // the process exited meanwhile
	denied        // permission (another user's process without root)
)

func classify(err error) access {
	switch {
	case err == nil:
		return readOK
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
		return gone
	default:
		return denied
	}
}

// procScan walks /proc once for all segments, reading each process's fd
// links and maps. /proc reads are syscall-bound, so a few workers share the
// PIDs on machines with several cores; the index is read-only and each
// worker has its own buffers.
func procScan(ctx context.Context, h *host.Host, ix *index, hostPIDNS bool) (scanResult, error) {
	res := scanResult{holders: map[int][]Holder{}, unreadableUIDs: map[int][]int{}}
	pd, err := os.Open(h.Path("/proc"))
	if err != nil {
		return res, fmt.Errorf("read /proc: %w", err)
	}
	names, err := pd.Readdirnames(-1)
	pd.Close()
	if err != nil {
		return res, fmt.Errorf("read /proc: %w", err)
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	if !h.IsRoot() {
		res.hidden = procHidepid(h)
	}
	real := h.Root == "" || h.Root == "/"
	workers := min(runtime.GOMAXPROCS(0), maxScanWorkers, len(pids)/pidsPerWorker+1)
	outs := make([]procOutcome, len(pids))
	var wg sync.WaitGroup
	next := make(chan int, len(pids))
	for i := range pids {
		next <- i
	}
	close(next)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newScanWorker()
			for i := range next {
				if ctx.Err() != nil {
					return
				}
				outs[i] = w.scanPID(h, pids[i], ix, real)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("scan of /proc interrupted: %w", err)
	}
	for i, o := range outs { // in PID order, so holders are listed stably
		pid := pids[i]
		if o.gone {
			continue // exited: it holds nothing any more
		}
		res.scanned++
		if o.denied {
			// The machine's init never runs a job; some sandboxes hide it
			// even from root, which must not make every segment unprovable.
			if pid == 1 && hostPIDNS {
				res.ignored = append(res.ignored, pid)
			} else {
				res.unreadable = append(res.unreadable, pid)
				res.unreadableUIDs[pid] = o.uids
			}
		}
		for _, hit := range o.hits {
			res.holders[hit.seg] = append(res.holders[hit.seg], Holder{PID: pid, Comm: o.comm, UID: o.uid(), Via: hit.via})
		}
	}
	return res, nil
}

const (
	maxScanWorkers = 8
	pidsPerWorker  = 64 // below this a worker is not worth its start
)

type segHit struct {
	seg int
	via string
}

// procOutcome is what scanning one PID found.
type procOutcome struct {
	gone, denied bool
	hits         []segHit
	comm         string
	uids         []int // read for holders and unreadable processes only
}

func (o procOutcome) uid() int {
	if len(o.uids) > 0 {
		return o.uids[0]
	}
	return -1
}

// scanWorker holds one goroutine's reusable buffers.
type scanWorker struct {
	rd   *bufio.Reader
	link []byte
	hits map[int]string
}

func newScanWorker() *scanWorker {
	return &scanWorker{rd: bufio.NewReaderSize(nil, 64<<10), link: make([]byte, unix.PathMax+64), hits: map[int]string{}}
}

func (w *scanWorker) scanPID(h *host.Host, pid int, ix *index, real bool) procOutcome {
	clear(w.hits)
	fdState := scanFDs(h, pid, ix, real, w.hits, w.link)
	mapState := scanMaps(h, pid, ix, real, w.hits, w.rd)
	var o procOutcome
	if fdState == gone || mapState == gone {
		o.gone = true
		return o
	}
	o.denied = fdState == denied || mapState == denied
	if len(w.hits) > 0 {
		o.comm = procComm(h, pid)
		for i, via := range w.hits {
			o.hits = append(o.hits, segHit{i, via})
		}
		sort.Slice(o.hits, func(a, b int) bool { return o.hits[a].seg < o.hits[b].seg })
	}
	if len(w.hits) > 0 || o.denied {
		o.uids = procUIDs(h, pid)
	}
	return o
}

// scanFDs matches a process's open files. On the real host a candidate link
// is stat'ed through /proc (which reaches the open file itself) and matched
// by device and inode, so a path from another mount namespace or a deleted
// file of the same name is told apart; fixture trees match by name. Links
// are read into one reused buffer and only candidates become strings.
func scanFDs(h *host.Host, pid int, ix *index, real bool, hits map[int]string, buf []byte) access {
	dir := h.Path("/proc/" + strconv.Itoa(pid) + "/fd")
	d, err := os.Open(dir)
	if err != nil {
		return classify(err)
	}
	defer d.Close()
	fds, err := d.Readdirnames(-1)
	if err != nil {
		return classify(err)
	}
	dfd := int(d.Fd())
	state := readOK
	for _, fd := range fds {
		n, err := unix.Readlinkat(dfd, fd, buf)
		if err != nil {
			if classify(err) == denied {
				state = denied
			}
			continue
		}
		if !ix.mayBeSegment(buf[:n]) {
			continue // sockets, pipes, /dev/null, libraries …
		}
		name, inDir, deleted := ix.splitTarget(string(buf[:n]))
		if !inDir && Kind(name) == "" {
			continue
		}
		if real {
			var st unix.Stat_t
			err := unix.Fstatat(dfd, fd, &st, 0)
			if err == nil {
				for _, i := range ix.byIno[st.Ino] {
					if ix.segs[i].Dev == uint64(st.Dev) {
						hits[i] = "fd"
					}
				}
				continue
			}
			if classify(err) == gone {
				continue
			}
			// Cannot stat it: fall back to the name, which errs on the
			// side of "in use".
		}
		if inDir && !deleted {
			if i, ok := ix.byName[name]; ok {
				hits[i] = "fd"
			}
		}
	}
	return state
}

// mayBeSegment is a cheap test on a link target or maps path: in the shm
// directory, or named like a segment anywhere (another mount namespace).
func (ix *index) mayBeSegment(p []byte) bool {
	for _, pre := range ix.prefixBytes {
		if bytes.HasPrefix(p, pre) {
			return true
		}
	}
	i := bytes.LastIndexByte(p, '/')
	if i < 0 {
		return false
	}
	base := p[i+1:]
	return bytes.HasPrefix(base, []byte("nccl-")) || bytes.HasPrefix(base, []byte("sem.")) || bytes.HasPrefix(base, []byte("torch_"))
}

var deletedSuffix = []byte(" (deleted)")

// scanMaps matches a process's memory mappings by inode and the device of
// the shm filesystem, which is robust to " (deleted)" and to paths from
// other mount namespaces. Lines are read through one bounded buffer.
func scanMaps(h *host.Host, pid int, ix *index, real bool, hits map[int]string, rd *bufio.Reader) access {
	f, err := os.Open(h.Path("/proc/" + strconv.Itoa(pid) + "/maps"))
	if err != nil {
		return classify(err)
	}
	defer f.Close()
	rd.Reset(f)
	for {
		line, err := rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Longer than any path the kernel prints: skip the rest of it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = rd.ReadSlice('\n')
			}
			line = nil
		}
		if len(line) > 0 {
			matchMapsLine(line, ix, real, hits)
		}
		if err == io.EOF {
			return readOK
		}
		if err != nil {
			return classify(err)
		}
	}
}

func matchMapsLine(line []byte, ix *index, real bool, hits map[int]string) {
	dev, inoF, p, ok := mapsFields(line)
	if !ok {
		return
	}
	if real && !ix.devs[string(dev)] {
		return // not on the shm filesystem: most lines stop here
	}
	if ino, ok := parseUint(inoF); ok && ino != 0 {
		for _, i := range ix.byIno[ino] {
			if real {
				if string(dev) == mapsDev(ix.segs[i].Dev) {
					setMap(hits, i)
				}
				continue
			}
			// Fixture trees cannot reproduce device numbers: the inode must
			// come with the segment's name (possibly " (deleted)").
			if name, _, _ := ix.splitTarget(string(p)); name == ix.segs[i].Name {
				setMap(hits, i)
			}
		}
	}
	if !real && !bytes.HasSuffix(p, deletedSuffix) && ix.mayBeSegment(p) {
		// Hand-written fixtures may not know the inode: fall back to the
		// path of a live (not deleted) file.
		if name, inDir, _ := ix.splitTarget(string(p)); inDir {
			if i, ok := ix.byName[name]; ok {
				setMap(hits, i)
			}
		}
	}
}

func setMap(hits map[int]string, i int) {
	if _, had := hits[i]; !had {
		hits[i] = "map"
	}
}

// parseUint parses a decimal inode number without allocating.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// mapsFields returns the dev, inode and pathname fields of a maps line
// ("address perms offset dev inode pathname") without allocating.
func mapsFields(line []byte) (dev, ino, p []byte, ok bool) {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	field, i := 0, 0
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

func procComm(h *host.Host, pid int) string {
	b, err := h.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// procUIDs returns the real, effective, saved and filesystem uids of a
// process (status is readable for every process), or nil.
func procUIDs(h *host.Host, pid int) []int {
	b, err := h.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			var out []int
			for _, f := range strings.Fields(rest) {
				if n, err := strconv.Atoi(f); err == nil {
					out = append(out, n)
				}
			}
			return out
		}
	}
	return nil
}

// judge decides the state of one segment.
func judge(s *Segment, sc scanResult, private bool, now time.Time) (State, string) {
	switch {
	case s.Symlink:
		return Unknown, "symlink to " + s.LinkTarget + "; not followed, never removed"
	case s.Irregular:
		return Unknown, "not a regular file; never removed"
	case len(s.Holders) > 0:
		return InUse, holderText(s.Holders)
	case !private:
		return Unknown, "processes in other containers may hold it"
	}
	if blind := blindTo(s, sc); len(blind) > 0 {
		if blind[len(blind)-1] == -1 {
			return Unknown, "/proc is mounted with hidepid=" + sc.hidden + ", which hides other users' processes; run ncclwiz as root to prove it unused"
		}
		return Unknown, fmt.Sprintf("%s that could hold it could not be inspected (pid %s); run ncclwiz as root to prove it unused",
			units.Count(len(blind), "process", "processes"), pidList(blind, 5))
	}
	if age := now.Sub(s.ModTime); age < YoungAge {
		return Young, fmt.Sprintf("modified %s ago; a job may be starting", age.Round(time.Second))
	}
	return Orphaned, "no live process has it open or mapped"
}

// blindTo returns the uninspectable processes that could hold s. A process
// can only have opened the file if one of its uids owns it, or the mode lets
// others open it. Root could open anything, but NCCL's peers are ranks of
// one job running as the user who created the segment (mkstemp makes it
// 0600), so an uninspectable root daemon does not block a user's own 0600
// segment. Unknown uids always block. With hidepid, the hidden processes are
// other users': they block other users' segments and shared-mode ones (-1
// stands for them).
func blindTo(s *Segment, sc scanResult) []int {
	ownerOnly := s.Mode.Perm()&0o066 == 0
	var blind []int
	for _, pid := range sc.unreadable {
		uids := sc.unreadableUIDs[pid]
		could := len(uids) == 0 || !ownerOnly
		for _, u := range uids {
			if u == s.UID {
				could = true
			}
		}
		if could {
			blind = append(blind, pid)
		}
	}
	if sc.hidden != "" && (s.OtherUser || !ownerOnly) {
		blind = append(blind, -1)
	}
	return blind
}

// procHidepid returns the hidepid option of /proc if it hides other users'
// processes from the listing ("2", "invisible", "4", "ptraceable"), else "".
// hidepid=1 (noaccess) lists them but denies reading, which the scan sees.
func procHidepid(h *host.Host) string {
	b, err := h.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	e, ok := findMount(parseMountinfo(b), "/proc")
	if !ok || e.fsType != "proc" || e.mountPoint != "/proc" {
		return ""
	}
	for _, o := range append(append([]string{}, e.opts...), e.superOpts...) {
		if v, ok := strings.CutPrefix(o, "hidepid="); ok {
			switch v {
			case "2", "invisible", "4", "ptraceable":
				return v
			}
		}
	}
	return ""
}

func pidList(pids []int, max int) string {
	var parts []string
	for i, p := range pids {
		if i == max {
			parts = append(parts, fmt.Sprintf("+%d more", len(pids)-max))
			break
		}
		parts = append(parts, strconv.Itoa(p))
	}
	return strings.Join(parts, ", ")
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
// symlink), no process may have it open or mapped (a fresh pass over every
// /proc/PID/fd and maps), every process that could hold it must be
// inspectable, and it must not have been modified within YoungAge. Any doubt
// is false; err says why when no holder was found.
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
	cur.UID, cur.Mode, cur.ModTime, cur.Nlink = int(st.Uid), fi.Mode(), fi.ModTime(), uint64(st.Nlink)
	cur.Symlink, cur.Irregular, cur.Holders = false, false, nil
	v := visibility(ctx, h)
	ix := newIndex([]Segment{cur}, shmPrefixes(h))
	sc, err := procScan(ctx, h, ix, v.pidNS == "host")
	if err != nil {
		return false, nil, err
	}
	if hs := sc.holders[0]; len(hs) > 0 {
		return false, hs, nil
	}
	if state, why := judge(&cur, sc, v.all, h.Now()); state != Orphaned {
		if v.note != "" && !v.all {
			why += ": " + v.note
		}
		return false, nil, fmt.Errorf("%s: %s", seg.Name, why)
	}
	return true, nil, nil
}
