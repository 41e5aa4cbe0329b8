package shm

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/host"
)

// LeaseVerdict is what the kernel said when ncclwiz asked for a write lease
// on a segment.
//
// fcntl(F_SETLEASE, F_WRLCK) is granted only when the lease taker's open is
// the only open file description of the inode anywhere: fs/locks.c
// (check_conflicting_open) requires i_writecount and i_readcount to be its
// own. Every other open counts, whoever holds it — another thread with its
// own file table, a process in another PID namespace or container, a
// process ncclwiz may not inspect, a mapping whose fd was closed (the
// mapping keeps the struct file) and a descriptor in flight in a UNIX
// socket's queue (the skb keeps it). While the lease is held, any new open
// of the file breaks it, which F_GETLEASE shows. Verified on Linux 6.18 by
// TestLeaseCoversEveryHolder. An O_PATH descriptor does not count: it can
// neither read nor map the file; the /proc scan still reports it.
type LeaseVerdict string

// Lease verdicts.
const (
	// LeaseFree: granted; no other open file description exists.
	LeaseFree LeaseVerdict = "free"
	// LeaseHeld: refused because something else has the file open.
	LeaseHeld LeaseVerdict = "held"
	// LeaseUnavailable: ncclwiz may not take one here (not the owner and
	// no CAP_LEASE, leases disabled, a filesystem without leases).
	LeaseUnavailable LeaseVerdict = "unavailable"
	// LeaseChanged: the name is no longer the planned regular file.
	LeaseChanged LeaseVerdict = "changed"
	// LeaseGone: the name no longer exists.
	LeaseGone LeaseVerdict = "gone"
)

// Lease is a write lease ncclwiz holds on one segment. While it is held,
// nothing else has the file open, and an open that starts breaks it.
type Lease struct {
	fd       int
	ino, dev uint64
}

// LeaseResult is the outcome of asking for a lease, with a sentence for
// people when it was not granted.
type LeaseResult struct {
	Verdict LeaseVerdict
	Why     string
}

// Broken reports whether another process has started to open the file
// since the lease was granted (or ncclwiz can no longer tell).
func (l *Lease) Broken() bool {
	t, err := unix.FcntlInt(uintptr(l.fd), unix.F_GETLEASE, 0)
	return err != nil || t != unix.F_WRLCK
}

// Same reports whether the name in dirfd is the leased file now.
func (l *Lease) Same(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG &&
		st.Ino == l.ino && uint64(st.Dev) == l.dev
}

// Links is the leased file's link count now (0 once its last name is gone).
func (l *Lease) Links() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(l.fd, &st); err != nil {
		return 0, err
	}
	return uint64(st.Nlink), nil
}

// Release gives the lease up and closes ncclwiz's descriptor; an open that
// was waiting on it proceeds.
func (l *Lease) Release() {
	_, _ = unix.FcntlInt(uintptr(l.fd), unix.F_SETLEASE, unix.F_UNLCK)
	_ = unix.Close(l.fd)
}

// TakeLease opens name in dirfd and asks the kernel for a write lease on it.
// The name is resolved without following a symlink, to an O_PATH descriptor
// first (so a device or FIFO swapped in is never opened), checked to be the
// regular file dev/ino, and only then opened for reading through
// /proc/self/fd. The caller must Release a granted lease.
func TakeLease(dirfd int, name string, dev, ino uint64) (*Lease, LeaseResult) {
	pfd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, LeaseResult{LeaseGone, "already gone"}
		}
		return nil, LeaseResult{LeaseUnavailable, "cannot open it: " + err.Error()}
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, LeaseResult{LeaseUnavailable, "cannot stat it: " + err.Error()}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != ino || uint64(st.Dev) != dev {
		return nil, LeaseResult{LeaseChanged, "it changed since it was scanned (not the same regular file)"}
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		// No /proc to reopen the O_PATH descriptor through: open the name
		// again (never following a link, never blocking on a FIFO) and
		// check that it is the very file the O_PATH descriptor holds.
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			var again unix.Stat_t
			if serr := unix.Fstat(fd, &again); serr != nil || again.Ino != st.Ino || again.Dev != st.Dev {
				_ = unix.Close(fd)
				return nil, LeaseResult{LeaseChanged, "it changed while ncclwiz opened it (not the same regular file)"}
			}
		}
	}
	switch {
	case errors.Is(err, unix.EWOULDBLOCK):
		// Someone else holds a lease on it, so they have it open.
		return nil, LeaseResult{LeaseHeld, heldWhy}
	case err != nil:
		return nil, LeaseResult{LeaseUnavailable, "cannot open it for the kernel lease: " + err.Error()}
	}
	err = setLease(fd)
	if (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) && int(st.Uid) != unix.Geteuid() {
		// Not the owner and no CAP_LEASE (Docker drops it; setpriv
		// --bounding-set=-lease): the kernel checks the filesystem uid, so
		// root that may still set its uid asks as the file's owner.
		if ferr := setLeaseAs(fd, int(st.Uid)); ferr == nil || !errors.Is(ferr, errNoFsuid) {
			err = ferr
		}
	}
	if err != nil {
		_ = unix.Close(fd)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EBUSY):
			return nil, LeaseResult{LeaseHeld, heldWhy}
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
			return nil, LeaseResult{LeaseUnavailable, fmt.Sprintf("the kernel lease that proves a file unused may only be taken by its owner (uid %d), "+
				"with CAP_LEASE, or by root that may act as the owner (CAP_SETUID); ncclwiz has none of these here", st.Uid)}
		default:
			return nil, LeaseResult{LeaseUnavailable, "this filesystem or kernel gives no file leases (" + err.Error() + "; see sysctl fs.leases-enable)"}
		}
	}
	return &Lease{fd: fd, ino: st.Ino, dev: uint64(st.Dev)}, LeaseResult{Verdict: LeaseFree}
}

func setLease(fd int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_WRLCK)
	return err
}

// errNoFsuid: this thread could not take the owner's filesystem uid.
var errNoFsuid = errors.New("cannot act as the file's owner")

// setLeaseAs asks for the lease with the filesystem uid set to uid, on a
// thread of its own: setfsuid changes only the calling thread, and if the
// uid cannot be restored the thread is never given back to the runtime
// (a goroutine that exits locked ends its thread).
func setLeaseAs(fd, uid int) error {
	res := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		prev, _ := unix.SetfsuidRetUid(uid)
		if cur, _ := unix.SetfsuidRetUid(-1); cur != uid {
			_, _ = unix.SetfsuidRetUid(prev)
			if again, _ := unix.SetfsuidRetUid(-1); again == prev {
				runtime.UnlockOSThread()
			}
			res <- errNoFsuid
			return
		}
		err := setLease(fd)
		_, _ = unix.SetfsuidRetUid(prev)
		if again, _ := unix.SetfsuidRetUid(-1); again == prev {
			runtime.UnlockOSThread()
		}
		res <- err
	}()
	return <-res
}

// heldWhy explains a refused lease when /proc shows no holder.
const heldWhy = "open elsewhere: the kernel refused ncclwiz an exclusive lease, so another open file description exists " +
	"(a thread, a process in another PID namespace or one ncclwiz cannot inspect, or a descriptor in flight over a UNIX socket)"

// probeLease takes and at once releases a lease: whether, right now,
// anything at all has the file open or mapped.
func probeLease(dirfd int, s *Segment) LeaseResult {
	l, r := TakeLease(dirfd, s.Name, s.Dev, s.Ino)
	if l != nil {
		l.Release()
	}
	return r
}

// OpenDir opens the shared-memory directory for *at calls: what it resolves
// to inside the host's root (old Debian: /dev/shm -> /run/shm), never
// following a link from there on. The caller closes the descriptor.
func OpenDir(h *host.Host) (int, error) {
	real := h.ShmReal()
	if r, err := resolveDir(h, shmDir(h)); err == nil {
		real = h.Path(r)
	}
	fd, err := unix.Open(real, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", shmDir(h), err)
	}
	return fd, nil
}

// RealHost reports whether h is this machine (not a fixture tree or a
// simulation), where the kernel's view — leases, device numbers — applies.
func RealHost(h *host.Host) bool {
	return (h.Root == "" || h.Root == "/") && !h.Simulated
}
