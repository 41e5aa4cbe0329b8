// Package shm holds the shared-memory checks: whether /dev/shm is a usable,
// big-enough tmpfs (shm.mount), and which NCCL/PyTorch segments in it are in
// use or orphaned (shm.segments). Scan, ProveBatch and TakeLease are shared
// with the cleanup fix, which proves every file again right before removing
// it: the kernel's write lease where it can take one, else a /proc scan
// that saw every process.
package shm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/sysinfo"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// Checks returns shm.mount and shm.segments.
func Checks() []checks.Check {
	return []checks.Check{
		{ID: "shm.mount", Title: "/dev/shm mount", Category: "shm", Tier: checks.Quick, Run: runMount},
		{ID: "shm.segments", Title: "Shared-memory segments", Category: "shm", Tier: checks.Quick, Run: runSegments},
	}
}

// Sizes that decide severities. NCCL's SHM transport gives each receiving
// rank one segment per peer and channel (reference §2.1, §4).
const (
	// SegmentBytes is one NCCL SHM receive segment with default buffer
	// sizes: 4096 + LL 512 KiB + LL128 4,915,200 B + SIMPLE 4 MiB =
	// 9,637,888 B, plus the 4-byte refcount trailer NCCL >= 2.16 appends.
	SegmentBytes = 9637892
	// DockerDefault is the /dev/shm size Docker and Kubernetes give a
	// container unless told otherwise (65536k).
	DockerDefault = 64 << 20
	// pairSegments is what the smallest multi-GPU job needs: two ranks,
	// two channels each way.
	pairSegments = 4
	// nodeSegments is an 8-GPU node without P2P at two channels per peer
	// pair, the order of magnitude reference §2.1 gives (~150 MiB).
	nodeSegments = 16
)

// Mount describes the filesystem behind the shared-memory directory.
type Mount struct {
	Path, Source, FSType string
	// MountPoint is where the filesystem is mounted (Path or a parent).
	MountPoint              string
	Options                 []string // per-mount options (rw, nosuid, noexec …)
	SuperOptions            []string // superblock options (size=65536k, mode=1777 …)
	SizeOption              string   // value of size= as written, e.g. "65536k"
	ReadOnly                bool
	NoExec                  bool
	Total, Used, Free       uint64
	InodesTotal, InodesFree uint64
	// Found is false when the directory is missing or not a directory;
	// Problem then says which.
	Found   bool
	Problem string
	// LinkTarget is set when the directory itself is a symlink (old Debian
	// systems had /dev/shm -> /run/shm); the mount is looked up for the
	// resolved path.
	LinkTarget string
	// Mode is the directory's permission bits (normally 1777) and DirUID
	// its owner.
	Mode           fs.FileMode
	DirUID, DirGID int
	// StatfsOK is false when the sizes could not be read; StatfsErr says why.
	StatfsOK  bool
	StatfsErr string
	IsTmpfs   bool
	// Unlimited is a tmpfs mounted with size=0: statfs reports no blocks
	// and it may grow until RAM runs out.
	Unlimited bool
	// MountinfoErr is set when /proc/self/mountinfo could not be read.
	MountinfoErr string
}

// UsedPercent is the share of the tmpfs in use, 0 when unknown/unlimited.
func (m Mount) UsedPercent() float64 {
	if m.Total == 0 {
		return 0
	}
	return float64(m.Used) * 100 / float64(m.Total)
}

type mountEntry struct {
	mountPoint, root, fsType, source string
	opts, superOpts                  []string
	majMin                           string
}

// parseMountinfo parses /proc/PID/mountinfo (proc_pid_mountinfo(5)):
// "36 35 98:0 /root /mnt opts [optional…] - fstype source superopts".
// Malformed lines are skipped.
func parseMountinfo(b []byte) []mountEntry {
	var out []mountEntry
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(f) {
			continue
		}
		e := mountEntry{
			majMin:     f[2],
			root:       host.UnescapeMount(f[3]),
			mountPoint: host.UnescapeMount(f[4]),
			opts:       strings.Split(f[5], ","),
			fsType:     host.UnescapeMount(f[sep+1]),
			source:     host.UnescapeMount(f[sep+2]),
		}
		if sep+3 < len(f) {
			e.superOpts = strings.Split(host.UnescapeMount(f[sep+3]), ",")
		}
		out = append(out, e)
	}
	return out
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// findMount returns the mount holding dir: the longest mount point that
// contains it, the last one listed when mounts are stacked (the top of the
// stack is what processes see).
func findMount(entries []mountEntry, dir string) (mountEntry, bool) {
	best := -1
	for i, e := range entries {
		if !within(dir, e.mountPoint) {
			continue
		}
		if best < 0 || len(e.mountPoint) >= len(entries[best].mountPoint) {
			best = i
		}
	}
	if best < 0 {
		return mountEntry{}, false
	}
	return entries[best], true
}

// resolveDir follows symlinks of the shm directory itself (never of
// entries in it) inside the host's root, at most a few levels.
func resolveDir(h *host.Host, dir string) (string, error) {
	cur := path.Clean(dir)
	for range 8 {
		fi, err := h.Lstat(cur)
		if err != nil {
			return cur, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return cur, nil
		}
		t, err := h.Readlink(cur)
		if err != nil {
			return cur, err
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(cur), t)
		}
		cur = path.Clean(t)
	}
	return cur, fmt.Errorf("%s: too many levels of symbolic links", dir)
}

// ReadMount describes the filesystem behind the shared-memory directory:
// the mountinfo entry (parsed here because gopsutil drops superblock options
// such as size=65536k), statfs sizes and the directory's mode. A missing
// directory is not an error: Found is false and Problem says why.
func ReadMount(_ context.Context, h *host.Host) (Mount, error) {
	dir := shmDir(h)
	m := Mount{Path: dir, DirUID: -1, DirGID: -1}
	resolved, err := resolveDir(h, dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		m.Problem = "does not exist"
		return m, nil
	case err != nil:
		m.Problem = "cannot be examined: " + err.Error()
		return m, nil
	}
	if resolved != path.Clean(dir) {
		m.LinkTarget = resolved
	}
	fi, err := h.Lstat(resolved)
	if err != nil {
		m.Problem = "cannot be examined: " + err.Error()
		return m, nil
	}
	if !fi.IsDir() {
		m.Problem = "is not a directory"
		return m, nil
	}
	m.Found = true
	m.Mode = fi.Mode() & (fs.ModePerm | fs.ModeSticky)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		m.DirUID, m.DirGID = int(st.Uid), int(st.Gid)
	}
	if b, err := h.ReadFile("/proc/self/mountinfo"); err != nil {
		m.MountinfoErr = err.Error()
	} else if e, ok := findMount(parseMountinfo(b), resolved); ok {
		m.MountPoint, m.Source, m.FSType = e.mountPoint, e.source, e.fsType
		m.Options, m.SuperOptions = e.opts, e.superOpts
		for _, o := range e.superOpts {
			if v, ok := strings.CutPrefix(o, "size="); ok {
				m.SizeOption = v
			}
		}
		for _, o := range e.opts {
			switch o {
			case "ro":
				m.ReadOnly = true
			case "noexec":
				m.NoExec = true
			}
		}
		for _, o := range e.superOpts {
			if o == "ro" {
				m.ReadOnly = true
			}
		}
	}
	st, err := h.Statfs(dir)
	if err != nil {
		m.StatfsErr = err.Error()
		return m, nil
	}
	m.StatfsOK = true
	m.Total, m.Used, m.Free = st.Total(), st.Used(), st.Free()
	m.InodesTotal, m.InodesFree = st.Files, st.Ffree
	m.IsTmpfs = st.Type == host.TmpfsMagic || (st.Type == 0 && m.FSType == "tmpfs")
	if m.FSType == "" && st.Type == host.TmpfsMagic {
		m.FSType = "tmpfs"
	}
	if m.IsTmpfs && st.Blocks == 0 {
		m.Unlimited = true
	}
	const stRdonly = 0x1 // ST_RDONLY in statfs f_flags
	if st.Flags&stRdonly != 0 {
		m.ReadOnly = true
	}
	return m, nil
}

// writableBy reports whether uid (with the given groups) may create files
// in a directory of this mode and owner.
func writableBy(mode fs.FileMode, owner, uid int, gid int, groups []int, dirGID int) bool {
	switch {
	case uid == 0:
		return true
	case owner == uid:
		return mode&0o200 != 0
	case mode&0o002 != 0:
		return true
	}
	if mode&0o020 != 0 {
		if gid == dirGID {
			return true
		}
		for _, g := range groups {
			if g == dirGID {
				return true
			}
		}
	}
	return false
}

// selfGroups returns the effective gid (-1 when unknown) and the
// supplementary groups of ncclwiz.
func selfGroups(h *host.Host) (gid int, groups []int) {
	self, err := proctab.Self(h)
	if err != nil || len(self.GIDs) < 2 {
		return -1, self.Groups
	}
	return self.GIDs[1], self.Groups
}

func runMount(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	m, err := ReadMount(ctx, h)
	if err != nil {
		return nil, err
	}
	dir := m.Path
	rec := RecommendedSize(h)
	if !m.Found {
		return []checks.Finding{{Severity: checks.Error, Title: dir + " " + m.Problem,
			Detail: fmt.Sprintf("NCCL's shared-memory transport creates its segments as files in /dev/shm (the path is fixed in NCCL's source), "+
				"so ranks on one node cannot use it. On a host, mount a tmpfs there (mount -t tmpfs -o size=%s tmpfs /dev/shm); "+
				"in a container, start it with --shm-size=%s or --ipc=host (Kubernetes: an emptyDir with medium: Memory mounted at /dev/shm). "+
				"ncclwiz recommends %s (%s). NCCL_SHM_DISABLE=1 avoids it at the cost of speed.",
				rec.Option(), rec.Option(), Human(rec.Bytes), rec.Reason),
			Evidence: map[string]any{"path": dir, "problem": m.Problem}, Guide: "shm-no-space", Fixes: []string{"container.shm"}}}, nil
	}
	ev := map[string]any{"path": dir, "fstype": m.FSType, "mount_source": m.Source, "mount_point": m.MountPoint,
		"options": nonNil(m.Options), "super_options": nonNil(m.SuperOptions), "read_only": m.ReadOnly, "noexec": m.NoExec,
		"is_tmpfs": m.IsTmpfs, "mode": fmt.Sprintf("%04o", unixMode(m.Mode)), "dir_uid": m.DirUID}
	if m.SizeOption != "" {
		ev["size_option"] = m.SizeOption
	}
	if m.LinkTarget != "" {
		ev["symlink_to"] = m.LinkTarget
	}
	if m.MountinfoErr != "" {
		ev["mountinfo_error"] = m.MountinfoErr
	}
	if !m.StatfsOK {
		ev["statfs_error"] = m.StatfsErr
		return []checks.Finding{{Severity: checks.Skipped, Title: "Could not read the size of " + dir,
			Detail: "statfs failed, so its size and free space are unknown: " + m.StatfsErr, Evidence: ev}}, nil
	}
	pct := m.UsedPercent()
	ev["size_bytes"], ev["used_bytes"], ev["free_bytes"] = m.Total, m.Used, m.Free
	ev["used_percent"] = float64(int(pct*10)) / 10
	ev["inodes_total"], ev["inodes_free"] = m.InodesTotal, m.InodesFree
	ev["unlimited"] = m.Unlimited
	ev["segment_bytes"] = SegmentBytes
	if !m.Unlimited {
		ev["segments_fit_total"] = m.Total / SegmentBytes
		ev["segments_fit_free"] = m.Free / SegmentBytes
	}

	summary := fmt.Sprintf("%s is %s, %s, %.0f%% used (%s free)", dir, orUnknown(m.FSType), Human(m.Total), pct, Human(m.Free))
	if m.Unlimited {
		summary = fmt.Sprintf("%s is tmpfs with no size limit, %s used", dir, Human(m.Used))
	}
	out := []checks.Finding{{Severity: checks.OK, Title: summary, Evidence: ev}}
	add := func(sev checks.Severity, title, detail, guide string, fixes ...string) {
		out = append(out, checks.Finding{Severity: sev, Title: title, Detail: detail, Guide: guide, Fixes: fixes})
	}
	// The size is the one every fix, script and guide uses (RecommendedSize).
	ev["recommended_size_bytes"] = rec.Bytes
	ev["recommended_size_reason"] = rec.Reason
	// Only what can run here is recommended (issue 25 item 4): on a host,
	// the remount (and persisting it); in a container, a new container
	// with a bigger /dev/shm — and the remount only with CAP_SYS_ADMIN.
	grow, growFixes := growAdvice(ctx, h, rec)

	if !m.IsTmpfs {
		add(checks.Warn, fmt.Sprintf("%s is %s, not tmpfs", dir, orUnknown(m.FSType)),
			"Shared memory normally lives in RAM (tmpfs). On a disk filesystem NCCL's SHM transport still works, "+
				"but every segment is backed by storage, which is slower and survives crashes as files on disk.",
			"shm-no-space")
	}
	if m.ReadOnly {
		add(checks.Error, dir+" is mounted read-only",
			"NCCL cannot create its segments (mkstemp fails), so 'Error while creating shared memory segment' follows. "+
				"Remount it read-write on a host, or start the container without a read-only /dev/shm.",
			"shm-no-space", growFixes...)
	}
	gid, groups := selfGroups(h)
	if !m.ReadOnly && m.Mode != 0 && !writableBy(m.Mode, m.DirUID, h.EUID, gid, groups, m.DirGID) {
		add(checks.Error, fmt.Sprintf("%s is not writable for uid %d (mode %04o)", dir, h.EUID, unixMode(m.Mode)),
			"NCCL creates its segments there as the user who runs the job, so mkstemp fails with 'Permission denied'. "+
				"The usual mode is 1777 (everyone may create files, only owners may delete them): chmod 1777 /dev/shm as root.",
			"shm-no-space")
	} else if !m.ReadOnly && m.Mode != 0 && m.Mode&0o002 == 0 {
		add(checks.Warn, fmt.Sprintf("%s is not writable for other users (mode %04o)", dir, unixMode(m.Mode)),
			"ncclwiz runs as a user who may write there, but a job started by anyone else fails to create its segments with 'Permission denied'. "+
				"The usual mode is 1777 (everyone may create files, only owners may delete them): chmod 1777 /dev/shm as root.",
			"shm-no-space")
	} else if m.Mode&0o002 != 0 && m.Mode&fs.ModeSticky == 0 {
		add(checks.Info, fmt.Sprintf("%s is world-writable without the sticky bit (mode %04o)", dir, unixMode(m.Mode)),
			"Any local user may delete or replace other users' segments while a job attaches to them. The usual mode is 1777.",
			"shm-stale-segments")
	}
	if m.InodesTotal > 0 && m.InodesFree == 0 {
		add(checks.Error, fmt.Sprintf("%s has no free inodes (%d in use)", dir, m.InodesTotal),
			"No new file can be created there even though bytes may be free, so NCCL's mkstemp fails. "+
				"Remove orphaned segments (shm.segments lists them), or remount with a larger nr_inodes.",
			"shm-no-space", "shm.cleanup", "shm.remount")
	}
	if m.Unlimited {
		if len(out) == 1 {
			out[0].Detail = "A tmpfs mounted with size=0 has no limit: segments can use RAM until the machine runs out."
		}
		return out, nil
	}
	const cleanupFirst = "Remove orphaned segments first (shm.segments shows which are unused), then make it bigger if it is still small. "
	switch {
	case m.Free < SegmentBytes:
		add(checks.Error, fmt.Sprintf("%s is full: %s free, less than one NCCL segment (%s)", dir, Human(m.Free), Human(SegmentBytes)),
			"With default buffer sizes each NCCL shared-memory receive segment is about 9.2 MiB. NCCL 2.19+ then fails with "+
				"'failed to extend /dev/shm/nccl-… bytes' (No space left on device); NCCL 2.12-2.18 crash with a Bus error (SIGBUS, exit code -7). "+
				cleanupFirst+grow,
			"shm-no-space", append([]string{"shm.cleanup"}, growFixes...)...)
	case pct >= 90 && m.Free < nodeSegments*SegmentBytes:
		add(checks.Error, fmt.Sprintf("%s is %.0f%% full: %s free, room for %s", dir, pct, Human(m.Free), units.Count(m.Free/SegmentBytes, "NCCL segment")),
			"Each NCCL shared-memory receive segment is about 9.2 MiB; an 8-GPU job without P2P needs on the order of 150 MiB. "+cleanupFirst+grow,
			"shm-no-space", append([]string{"shm.cleanup"}, growFixes...)...)
	case pct >= 90:
		add(checks.Warn, fmt.Sprintf("%s is %.0f%% full (%s free)", dir, pct, Human(m.Free)),
			"There is still room for NCCL's segments, but whatever fills it (datasets, orphaned segments, DataLoader tensors) shares RAM with the job. "+
				"shm.segments shows which NCCL and PyTorch files are orphaned.",
			"shm-no-space", "shm.cleanup")
	case m.Free < pairSegments*SegmentBytes && m.Total > DockerDefault:
		add(checks.Warn, fmt.Sprintf("%s has only %s free, room for %s", dir, Human(m.Free), units.Count(m.Free/SegmentBytes, "NCCL segment")),
			"Two ranks talking over shared memory already need about four ~9.2 MiB segments (one per peer and channel). "+cleanupFirst+grow,
			"shm-no-space", append([]string{"shm.cleanup"}, growFixes...)...)
	}
	if m.Total <= DockerDefault {
		sev := checks.Warn
		if m.Total < pairSegments*SegmentBytes {
			sev = checks.Error
		}
		title := fmt.Sprintf("%s is only %s", dir, Human(m.Total))
		if m.Total == DockerDefault {
			title = fmt.Sprintf("%s is 64 MiB, the Docker and Kubernetes default", dir)
		}
		add(sev, title,
			fmt.Sprintf("It holds at most %s of ~9.2 MiB (one per receiving rank, peer and channel with default buffer sizes), "+
				"so a few local ranks exhaust it: NCCL fails with 'failed to extend /dev/shm/nccl-…' or, on NCCL 2.12-2.18, a Bus error. ",
				units.Count(m.Total/SegmentBytes, "NCCL shared-memory segment"))+grow,
			"container-shm", growFixes...)
	}
	return out, nil
}

// growAdvice says how /dev/shm is made bigger where ncclwiz runs, and the
// fixes that do it here, in the order to try them.
func growAdvice(ctx context.Context, h *host.Host, rec SizeAdvice) (string, []string) {
	c := sysinfo.DetectContainer(ctx, h)
	start := fmt.Sprintf("start it with --shm-size=%dg or --ipc=host (Kubernetes: an emptyDir with medium: Memory and sizeLimit: %dGi mounted at /dev/shm)", rec.GiB(), rec.GiB())
	head := fmt.Sprintf("ncclwiz recommends %s (%s). ", Human(rec.Bytes), rec.Reason)
	if !c.InContainer() {
		return head + "Remount it to that size (fix shm.remount; shm.persist keeps it in /etc/fstab). " +
				"If the training runs in a container, that container's /dev/shm is set when it starts: " + start + " (fix container.shm).",
			[]string{"shm.remount", "container.shm"}
	}
	in := "This " + c.Runtime + " container's /dev/shm is set when it starts: start a new one with --shm-size=" + fmt.Sprint(rec.GiB()) + "g or --ipc=host " +
		fmt.Sprintf("(Kubernetes: an emptyDir with medium: Memory and sizeLimit: %dGi mounted at /dev/shm) — fix container.shm shows the setting. ", rec.GiB())
	r := sysinfo.CanRemount(h)
	if !r.OK {
		return head + in + "It cannot be grown from inside: " + r.Why + ".", []string{"container.shm"}
	}
	return head + in + "It has CAP_SYS_ADMIN, so shm.remount can also grow it now, until the container restarts.",
		[]string{"container.shm", "shm.remount"}
}

// unixMode turns Go's mode bits into the octal a user types with chmod.
func unixMode(m fs.FileMode) uint32 {
	v := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown filesystem"
	}
	return s
}

// Human formats bytes with binary units ("9.2 MiB").
func Human(b uint64) string { return units.Bytes(b) }

// shmDir is the shared-memory directory as processes name it: absolute and
// clean, so it compares with mount points and /proc link targets even when
// --shm-path was given as a relative path.
func shmDir(h *host.Host) string {
	d := h.ShmLogical()
	if !path.IsAbs(d) && (h.Root == "" || h.Root == "/") {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
	}
	return path.Clean(d)
}

// The recommended size of the shared-memory tmpfs. It is the one rule every
// screen uses: shm.mount's advice, shm.remount, shm.persist, container.shm,
// the exported scripts, and the guides (which state SizeRule; a test holds
// them to it).
const (
	// RecommendedCap is the size ncclwiz proposes where memory allows:
	// an 8-GPU node's NCCL segments need about 150 MiB (16 × 9.2 MiB),
	// and PyTorch DataLoader workers pass every batch through /dev/shm too.
	RecommendedCap = 8 << 30
	// RecommendedMin is NCCL's own documented example (--shm-size=1g).
	RecommendedMin = 1 << 30
	// SizeRule states the rule in words.
	SizeRule = "8 GiB, or half of the memory when that is less (RAM, or the container's memory limit), and at least 1 GiB"
)

// SizeAdvice is the recommended size with its reason.
type SizeAdvice struct {
	// Bytes is always a whole number of GiB.
	Bytes uint64
	// Reason says why, with this machine's numbers.
	Reason string
}

// GiB is the size in GiB, for --shm-size=Ng, sizeLimit: NGi and size=Ng.
func (a SizeAdvice) GiB() uint64 { return a.Bytes >> 30 }

// Option writes the size as mount's size= and docker's --shm-size take it.
func (a SizeAdvice) Option() string { return SizeOption(a.Bytes) }

// RecommendSize applies SizeRule to the memory that bounds the tmpfs: RAM
// (MemTotal) and, when set, the cgroup memory limit, which tmpfs pages are
// charged to (0 = unknown/none). A tmpfs only uses memory for what it
// holds, so the size is a ceiling, not a reservation; half of memory is
// the kernel's default ceiling for a tmpfs and keeps a runaway job from
// taking all of it.
func RecommendSize(ram, cgroupLimit uint64) SizeAdvice {
	mem, what := ram, "RAM"
	if cgroupLimit > 0 && (mem == 0 || cgroupLimit < mem) {
		mem, what = cgroupLimit, "this cgroup's memory limit"
	}
	a := SizeAdvice{Bytes: RecommendedCap, Reason: "room for an 8-GPU node's NCCL segments (about 150 MiB) many times over and for DataLoader workers' batches; a tmpfs only uses memory for what it holds"}
	half := mem / 2 / (1 << 30) * (1 << 30)
	if mem > 0 && half < a.Bytes {
		a = SizeAdvice{Bytes: half, Reason: fmt.Sprintf("half of %s (%s), the kernel's default ceiling for a tmpfs, so that a full /dev/shm cannot take all memory", what, Human(mem))}
	}
	if a.Bytes < RecommendedMin {
		a = SizeAdvice{Bytes: RecommendedMin, Reason: "NCCL's own example (--shm-size=1g), room for an 8-GPU node's NCCL segments (about 150 MiB)"}
		if mem > 0 {
			a.Reason += fmt.Sprintf(", although it is more than half of %s (%s)", what, Human(mem))
		}
	}
	return a
}

// RecommendedSize reads the machine's memory and applies SizeRule.
func RecommendedSize(h *host.Host) SizeAdvice {
	limit, _ := sysinfo.CgroupMemoryMax(h)
	return RecommendSize(sysinfo.MemInfo(h)["MemTotal"], limit)
}

// SizeOption writes bytes the way mount's size= takes them (8g, 512m, 100k).
func SizeOption(b uint64) string {
	switch {
	case b%(1<<30) == 0:
		return fmt.Sprintf("%dg", b>>30)
	case b%(1<<20) == 0:
		return fmt.Sprintf("%dm", b>>20)
	}
	return fmt.Sprintf("%dk", (b+1023)>>10)
}
