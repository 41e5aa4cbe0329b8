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
	"github.com/ncclwiz/ncclwiz/internal/proctab"
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

// CleanupDirPrefix starts the name of the private directory shm.cleanup
// moves a file into right before unlinking it (steps).
const CleanupDirPrefix = "nccl-ncclwiz-rm-"

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
	// Lease is what the kernel said when asked for a write lease on a
	// segment no visible process holds ("" when not asked: fixture trees,
	// simulations, segments with visible holders).
	Lease  LeaseVerdict
	State  State
	Reason string
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
	// Private is true only when the /proc scan saw every process that
	// could hold a segment: the initial PID namespace and nothing that could
	// not be inspected. Without it only the kernel lease proves a segment
	// orphaned.
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
	ix := newIndex(inv.Segments, shmPrefixes(h))
	sc, err := procScan(ctx, h, ix, vis.pidNS == "host")
	if err != nil {
		return nil, err
	}
	blind := blindness(sc, vis)
	inv.Private, inv.PIDNamespace, inv.Visibility, inv.Note = blind == "", vis.pidNS, vis.evidence, vis.note
	inv.ScannedPIDs, inv.UnreadablePIDs, inv.IgnoredPIDs = sc.scanned, sc.unreadable, sc.ignored
	dirfd := -1
	if RealHost(h) {
		if fd, err := OpenDir(h); err == nil {
			dirfd = fd
			defer unix.Close(fd)
		}
	}
	now := h.Now()
	for i := range inv.Segments {
		s := &inv.Segments[i]
		s.Holders = sc.holders[i]
		var lease LeaseResult
		if dirfd >= 0 && len(s.Holders) == 0 && !s.Symlink && !s.Irregular {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("scan interrupted: %w", err)
			}
			lease = probeLease(dirfd, s)
			s.Lease = lease.Verdict
		}
		s.State, s.Reason = judge(s, lease, blind, RealHost(h), now)
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
	initPIDNamespace  = "pid:[4026531836]"
	initIPCNamespace  = "ipc:[4026531839]"
	initUserNamespace = "user:[4026531837]"
)

// initialUserNS reports whether ncclwiz runs in the initial user namespace.
// Fixture trees without namespace links describe a plain host; on the real
// machine a link that cannot be read is not proof.
func initialUserNS(h *host.Host) bool {
	l, err := h.Readlink("/proc/self/ns/user")
	if err != nil {
		return !RealHost(h)
	}
	return l == initUserNamespace
}

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
	if self, err := proctab.Self(h); err == nil && len(self.NSpid) > 1 {
		return "nested", "NSpid in /proc/self/status lists several PID namespaces"
	}
	return "unknown", "the PID namespace could not be read"
}

// visibility decides whether /proc can show every process that could hold
// a segment in the shm directory (reference §4 item 6). Only the initial
// PID namespace lists every process of the machine. From a nested one
// nothing proves that no process outside shares the tmpfs: a container's
// own "shm" tmpfs is shared by docker run --ipc=container:ID, by a pod's
// containers and by unshare -p beside processes outside, and the processes
// that mounted it there cannot be listed from inside. So a nested
// namespace is never "all visible"; only the kernel lease proves there.
func visibility(ctx context.Context, h *host.Host) vis {
	ns, why := pidNamespace(h)
	v := vis{pidNS: ns, evidence: []string{why}}
	if ns == "host" {
		v.all = true
		return v
	}
	c := sysinfo.DetectContainer(ctx, h)
	v.evidence = append(v.evidence, c.Evidence...)
	if ns == "unknown" && !c.InContainer() && !RealHost(h) {
		// Fixture trees without namespace links describe a plain host.
		v.all = true
		v.evidence = append(v.evidence, "no container detected")
		return v
	}
	if ns == "unknown" && RealHost(h) && !procReadable(h) {
		// No /proc: nothing says whose namespace this is, and no process
		// can be inspected. Say that, not a guess about a container.
		v.note = "/proc cannot be read here (not mounted, or hidden), so ncclwiz can see no process at all and cannot tell " +
			"which PID namespace it runs in. Only the kernel's lease can prove a segment unused (ncclwiz takes one on the files it owns, " +
			"or on any file with CAP_LEASE); the others are left alone. Mount /proc (mount -t proc proc /proc) to see the holders."
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
	where := "a PID namespace of its own"
	if c.InContainer() {
		where = "a " + c.Runtime + " container with its own PID namespace"
	}
	const prove = " Holders there are invisible in /proc from here, so only the kernel's lease can prove a segment unused " +
		"(ncclwiz takes one on the files it owns); the others are left alone. Run ncclwiz on the host (or with --pid=host) to see every holder."
	switch {
	case ipcErr == nil && ipc == initIPCNamespace:
		v.evidence = append(v.evidence, "the IPC namespace is the host's ("+ipc+")")
		v.note = "ncclwiz runs in " + where + " but the host's IPC namespace (--ipc=host), " +
			"so this /dev/shm is shared with the host and other containers." + prove
	case c.Runtime == sysinfo.RuntimeKubernetes:
		v.note = "ncclwiz runs in a Kubernetes pod: its /dev/shm is shared by every container of the pod, whose processes are in other PID namespaces." + prove
	case src == "shm":
		v.evidence = append(v.evidence, "the shm directory is a container's tmpfs (mount source \"shm\"), which other containers may share (--ipc=container:ID)")
		v.note = "ncclwiz runs in " + where + "; its " + shmDir(h) + " may be shared with other containers (docker run --ipc=container:ID) " +
			"or processes outside this PID namespace." + prove
	default:
		v.note = fmt.Sprintf("ncclwiz runs in %s, and %s (mount source %q) may be shared with processes outside it.", where, shmDir(h), src) + prove
	}
	return v
}

// procReadable reports whether /proc lists this very process.
func procReadable(h *host.Host) bool {
	_, err := h.Lstat("/proc/self/stat")
	return err == nil
}

// blindness says why the /proc scan cannot prove a segment unused on its
// own, or "" when it saw every process that could hold one. A process that
// could not be inspected could hold any file — root opens anything, and a
// descriptor can be passed over a socket — so any of them is blindness,
// whatever its uid or the file's mode.
func blindness(sc scanResult, v vis) string {
	switch {
	case !v.all:
		why := "processes in other PID namespaces may hold it"
		if v.note != "" {
			why += ": " + v.note
		}
		return why
	case sc.hidden != "":
		return "/proc is mounted with hidepid=" + sc.hidden + ", which hides other users' processes; run ncclwiz as root to prove it unused"
	case len(sc.unreadable) > 0:
		return fmt.Sprintf("%s could not be inspected (pid %s) and could hold it; run ncclwiz as root to prove it unused",
			units.Count(len(sc.unreadable), "process", "processes"), pidList(sc.unreadable, 5))
	}
	return ""
}

type index struct {
	segs        []Segment
	byIno       map[uint64][]int
	byName      map[string]int
	prefixes    []string
	prefixBytes [][]byte
	// devs are the maps-style "major:minor" strings of the segments'
	// filesystems, to skip other mappings before parsing them; devNums the
	// same as numbers, to skip other open files.
	devs    map[string]bool
	devNums map[uint64]bool
}

func newIndex(segs []Segment, prefixes []string) *index {
	ix := &index{segs: segs, byIno: map[uint64][]int{}, byName: map[string]int{}, prefixes: prefixes, devs: map[string]bool{}, devNums: map[uint64]bool{}}
	for i, s := range segs {
		if s.Symlink || s.Irregular {
			continue // never "held": only regular files are judged by holders
		}
		ix.byIno[s.Ino] = append(ix.byIno[s.Ino], i)
		ix.byName[s.Name] = i
		ix.devs[mapsDev(s.Dev)] = true
		ix.devNums[s.Dev] = true
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
	if !h.IsRoot() || !initialUserNS(h) {
		// hidepid spares only real root: uid 0 of a user namespace
		// (rootless containers, unshare -r) is hidden from like anyone.
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

// scanPID reads one process: its fd links and maps, and those of its other
// threads where they differ. A thread can have a file table of its own
// (unshare(CLONE_FILES)), and when the thread-group leader has exited
// (pthread_exit in main) /proc/PID/fd and /proc/PID/maps are empty while
// the other threads still hold and map files: only
// /proc/PID/task/TID/{fd,maps} show those.
func (w *scanWorker) scanPID(h *host.Host, pid int, ix *index, real bool) procOutcome {
	clear(w.hits)
	base := "/proc/" + strconv.Itoa(pid)
	fdState := scanFDs(h, base+"/fd", ix, real, w.hits, w.link)
	mapLines, mapState := scanMaps(h, base+"/maps", ix, real, w.hits, w.rd)
	var o procOutcome
	if fdState == gone || mapState == gone {
		o.gone = true
		return o
	}
	o.denied = fdState == denied || mapState == denied
	// A process that could not be read already makes the scan blind; its
	// threads (PID 1 of some sandboxes has many, with many fds) add nothing.
	if !o.denied && w.scanThreads(h, pid, base, ix, real, mapLines == 0) == denied {
		o.denied = true
	}
	if len(w.hits) > 0 || o.denied {
		o.comm, o.uids = procIdentity(h, pid)
	}
	if len(w.hits) > 0 {
		for i, via := range w.hits {
			o.hits = append(o.hits, segHit{i, via})
		}
		sort.Slice(o.hits, func(a, b int) bool { return o.hits[a].seg < o.hits[b].seg })
	}
	return o
}

// scanThreads reads the other threads of pid. Threads share one memory map
// (CLONE_THREAD implies CLONE_VM), so a thread's maps are read only when
// the leader's were empty (it exited); a thread's fd table is read unless
// kcmp(2) shows it is one already read. A thread that exits meanwhile is
// skipped; one that cannot be read makes the process uninspected.
func (w *scanWorker) scanThreads(h *host.Host, pid int, base string, ix *index, real, needMaps bool) access {
	d, err := os.Open(h.Path(base + "/task"))
	if err != nil {
		if classify(err) == denied {
			return denied
		}
		return readOK // no task directory: a fixture tree, or the process is gone
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return readOK
	}
	if len(names) < 2 {
		return readOK // a single thread: /proc/PID is all of it
	}
	state := readOK
	tables := []int{pid} // tasks whose fd tables were read
	for _, n := range names {
		tid, err := strconv.Atoi(n)
		if err != nil || tid == pid {
			continue
		}
		tb := base + "/task/" + n
		if needMaps {
			lines, st := scanMaps(h, tb+"/maps", ix, real, w.hits, w.rd)
			if st == denied {
				state = denied
			}
			if lines > 0 {
				needMaps = false
			}
		}
		if real && sharesFiles(tables, tid) {
			continue
		}
		switch scanFDs(h, tb+"/fd", ix, real, w.hits, w.link) {
		case denied:
			state = denied
		case readOK:
			tables = append(tables, tid)
		}
	}
	return state
}

// kcmpFiles is KCMP_FILES of linux/kcmp.h.
const kcmpFiles = 2

// sharesFiles reports whether tid's fd table is that of one of the tasks
// already read. Any error (no kcmp, no permission, a task gone, an exited
// leader's empty table) is "no", so the table is read.
func sharesFiles(tasks []int, tid int) bool {
	for _, t := range tasks {
		r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(t), uintptr(tid), kcmpFiles, 0, 0, 0)
		if errno == 0 && r == 0 {
			return true
		}
	}
	return false
}

// scanFDs matches the open files of one fd directory. On the real host
// every link to a path is stat'ed through /proc (which reaches the open
// file itself) and matched by device and inode, whatever its name: a bind
// mount of the segment elsewhere, a path from another mount namespace or a
// deleted file of the same name are all told apart. Fixture trees match by
// name. Links are read into one reused buffer and only candidates become
// strings.
func scanFDs(h *host.Host, fdDir string, ix *index, real bool, hits map[int]string, buf []byte) access {
	d, err := os.Open(h.Path(fdDir))
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
		link := buf[:n]
		if real {
			if len(link) == 0 || link[0] != '/' {
				continue // sockets, pipes, anon inodes, memfd: not a file in a directory
			}
			// Only the device and inode are needed: AT_STATX_DONT_SYNC keeps
			// a network or FUSE filesystem (a hung NFS server) from being
			// asked, so the scan never waits on one.
			var stx unix.Statx_t
			err := unix.Statx(dfd, fd, unix.AT_STATX_DONT_SYNC, unix.STATX_INO, &stx)
			if err == nil {
				dev := unix.Mkdev(stx.Dev_major, stx.Dev_minor)
				if !ix.devNums[dev] {
					continue
				}
				for _, i := range ix.byIno[stx.Ino] {
					if ix.segs[i].Dev == dev {
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
		if !ix.mayBeSegment(link) {
			continue
		}
		name, inDir, deleted := ix.splitTarget(string(link))
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

// scanMaps matches the memory mappings of one maps file by inode and the
// device of the shm filesystem, which is robust to " (deleted)", bind
// mounts and paths from other mount namespaces. Lines are read through one
// bounded buffer. It returns the number of lines (0 for a kernel thread or
// an exited thread-group leader).
func scanMaps(h *host.Host, mapsPath string, ix *index, real bool, hits map[int]string, rd *bufio.Reader) (int, access) {
	f, err := os.Open(h.Path(mapsPath))
	if err != nil {
		return 0, classify(err)
	}
	defer f.Close()
	rd.Reset(f)
	lines := 0
	for {
		line, err := rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Longer than any path the kernel prints: skip the rest of it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = rd.ReadSlice('\n')
			}
			line = nil
			lines++
		}
		if len(line) > 0 {
			lines++
			matchMapsLine(line, ix, real, hits)
		}
		if err == io.EOF {
			return lines, readOK
		}
		if err != nil {
			return lines, classify(err)
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

// procIdentity returns the name and the real, effective, saved and
// filesystem uids of a process, from one read of its status (readable for
// every process); "?" and nil when it is gone.
func procIdentity(h *host.Host, pid int) (string, []int) {
	p, err := proctab.ReadStatus(h, pid)
	if err != nil {
		return "?", nil
	}
	return p.Comm, p.UIDs
}

// judge decides the state of one segment. On the real machine (real) only
// a kernel lease proves a segment unused: a /proc scan, however complete,
// cannot see a descriptor in flight over a UNIX socket, a file an io_uring
// registered, or a loop device's backing file — each keeps the segment in
// use. On a fixture tree or a simulation (no kernel to ask) the scan is
// the proof when it saw every process (blind is "").
func judge(s *Segment, lease LeaseResult, blind string, real bool, now time.Time) (State, string) {
	switch {
	case s.Symlink:
		return Unknown, "symlink to " + s.LinkTarget + "; not followed, never removed"
	case s.Irregular && strings.HasPrefix(s.Name, CleanupDirPrefix):
		return Unknown, "the private directory an ncclwiz cleanup moves each file into right before unlinking it; one left by a killed " +
			"cleanup is emptied back into " + path.Dir(s.Path) + " by the next `ncclwiz fix --apply shm.cleanup`"
	case s.Irregular:
		return Unknown, "not a regular file; never removed"
	case len(s.Holders) > 0:
		return InUse, holderText(s.Holders)
	case lease.Verdict == LeaseHeld:
		return InUse, lease.Why
	case lease.Verdict == LeaseChanged || lease.Verdict == LeaseGone:
		return Unknown, lease.Why
	}
	if age := now.Sub(s.ModTime); age < YoungAge {
		return Young, fmt.Sprintf("modified %s ago; a job may be starting", age.Round(time.Second))
	}
	if lease.Verdict == LeaseFree {
		return Orphaned, leaseProof
	}
	if real {
		why := noLeaseWhy
		if lease.Why != "" {
			why += " (" + lease.Why + ")"
		}
		return Unknown, why
	}
	if blind != "" {
		if lease.Why != "" {
			blind += "; and no kernel lease: " + lease.Why
		}
		return Unknown, blind
	}
	return Orphaned, "no live process has it open or mapped (every process and thread inspected)"
}

// noLeaseWhy is the reason a segment stays when no lease could be taken.
const noLeaseWhy = "not proven unused: no kernel lease could be taken, and a /proc scan is no proof (it cannot see a descriptor " +
	"in flight over a UNIX socket, an io_uring registered file or a loop device's backing file)"

// leaseProof is the reason of a segment the kernel proved unused.
const leaseProof = "nothing has it open or mapped: the kernel granted ncclwiz an exclusive lease"

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

// Proof is one fresh pass over /proc for a batch of segments about to be
// removed: who holds them now, and whether that pass saw every process.
type Proof struct {
	// Holders[i] are the visible holders of the batch's i-th segment.
	Holders [][]Holder
	// Blind says why the scan alone proves nothing ("" when it saw every
	// process and thread); then only a kernel lease can.
	Blind string
	// real: the machine itself, where only a kernel lease proves.
	real bool
}

// ProveBatch scans /proc once for every segment of a batch, so that
// removing many files costs one scan, not one per file. The scan explains
// who holds a file; the proof that nothing does is, per file, the kernel
// lease (or, where none can be taken, this scan when it saw everything).
func ProveBatch(ctx context.Context, h *host.Host, segs []Segment) (*Proof, error) {
	cur := make([]Segment, len(segs))
	for i, s := range segs {
		s.Symlink, s.Irregular, s.Holders = false, false, nil
		cur[i] = s
	}
	v := visibility(ctx, h)
	ix := newIndex(cur, shmPrefixes(h))
	sc, err := procScan(ctx, h, ix, v.pidNS == "host")
	if err != nil {
		return nil, err
	}
	p := &Proof{Holders: make([][]Holder, len(segs)), Blind: blindness(sc, v), real: RealHost(h)}
	for i := range segs {
		p.Holders[i] = sc.holders[i]
	}
	return p, nil
}

// Judge decides the state of the batch's i-th segment right before its
// removal: seg as it is now (mode, owner, modification time from a fresh
// stat), this proof's holders and the lease ncclwiz holds or was refused
// (a zero LeaseResult where none was asked for).
func (p *Proof) Judge(i int, seg Segment, lease LeaseResult, now time.Time) (State, string) {
	seg.Holders, seg.Symlink, seg.Irregular = p.Holders[i], false, false
	return judge(&seg, lease, p.Blind, p.real, now)
}
