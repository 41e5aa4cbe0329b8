// Package shm holds the shared-memory checks: whether /dev/shm is a usable,
// big-enough tmpfs (shm.mount), and which NCCL/PyTorch segments in it are in
// use or orphaned (shm.segments). Scan and ProveOrphaned are shared with the
// cleanup fix, which re-proves every file right before removing it.
package shm

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
)

// Checks returns shm.mount and shm.segments.
func Checks() []checks.Check {
	return []checks.Check{
		{ID: "shm.mount", Title: "/dev/shm mount", Category: "shm", Tier: checks.Quick, Run: runMount},
		{ID: "shm.segments", Title: "Shared-memory segments", Category: "shm", Tier: checks.Quick, Run: runSegments},
	}
}

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
	// Found is false when the directory does not exist.
	Found bool
	// StatfsOK is false when the sizes could not be read.
	StatfsOK bool
	IsTmpfs  bool
}

type mountEntry struct {
	mountPoint, root, fsType, source string
	opts, superOpts                  []string
	majMin                           string
}

// parseMountinfo parses /proc/PID/mountinfo (proc(5)).
func parseMountinfo(b []byte) []mountEntry {
	var out []mountEntry
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(f)+1 || sep+2 >= len(f) {
			continue
		}
		e := mountEntry{
			majMin:     f[2],
			root:       unescape(f[3]),
			mountPoint: unescape(f[4]),
			opts:       strings.Split(f[5], ","),
			fsType:     f[sep+1],
			source:     unescape(f[sep+2]),
		}
		if sep+3 < len(f) {
			e.superOpts = strings.Split(f[sep+3], ",")
		}
		out = append(out, e)
	}
	return out
}

// unescape decodes the octal escapes (\040 for space) the kernel uses.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// ReadMount finds the mount that holds the shared-memory directory: the
// longest mount point containing it, the last one listed when mounts are
// stacked (the top of the stack is what processes see).
func ReadMount(_ context.Context, h *host.Host) (Mount, error) {
	dir := h.ShmLogical()
	m := Mount{Path: dir}
	if fi, err := h.Lstat(dir); err != nil || !fi.IsDir() {
		return m, nil
	}
	m.Found = true
	if b, err := h.ReadFile("/proc/self/mountinfo"); err == nil {
		best := -1
		entries := parseMountinfo(b)
		for i, e := range entries {
			if !within(dir, e.mountPoint) {
				continue
			}
			if best < 0 || len(e.mountPoint) >= len(entries[best].mountPoint) {
				best = i
			}
		}
		if best >= 0 {
			e := entries[best]
			m.MountPoint, m.Source, m.FSType = e.mountPoint, e.source, e.fsType
			m.Options, m.SuperOptions = e.opts, e.superOpts
			for _, o := range e.superOpts {
				if v, ok := strings.CutPrefix(o, "size="); ok {
					m.SizeOption = v
				}
			}
			for _, o := range append(append([]string{}, e.opts...), e.superOpts...) {
				switch o {
				case "ro":
					m.ReadOnly = true
				case "noexec":
					m.NoExec = true
				}
			}
		}
	}
	st, err := h.Statfs(dir)
	if err != nil {
		return m, nil
	}
	m.StatfsOK = true
	m.Total, m.Used, m.Free = st.Total(), st.Used(), st.Free()
	m.InodesTotal, m.InodesFree = st.Files, st.Ffree
	m.IsTmpfs = st.Type == host.TmpfsMagic || m.FSType == "tmpfs"
	if m.FSType == "" && st.Type == host.TmpfsMagic {
		m.FSType = "tmpfs"
	}
	const stRdonly = 0x1 // ST_RDONLY in statfs f_flags
	if st.Flags&stRdonly != 0 {
		m.ReadOnly = true
	}
	return m, nil
}

// SegmentBytes is the size of one NCCL SHM receive segment with default
// buffer sizes (4096 + the three protocol buffers, plus NCCL's 4-byte
// refcount trailer since 2.16): 9,637,892 bytes, about 9.2 MiB.
const SegmentBytes = 9637892

// DockerDefault is the /dev/shm size Docker and Kubernetes give a container.
const DockerDefault = 64 << 20

func runMount(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	m, err := ReadMount(ctx, h)
	if err != nil {
		return nil, err
	}
	dir := m.Path
	if !m.Found {
		return []checks.Finding{{Severity: checks.Error, Title: dir + " does not exist",
			Detail: "NCCL's shared-memory transport creates its segments in /dev/shm (the path is fixed in NCCL's source); without it, ranks on one node cannot use SHM. " +
				"Mount a tmpfs there, or start the container with --shm-size / --ipc=host.",
			Evidence: map[string]any{"path": dir}, Guide: "shm-no-space", Fixes: []string{"container.shm"}}}, nil
	}
	ev := map[string]any{"path": dir, "fstype": m.FSType, "mount_source": m.Source, "mount_point": m.MountPoint,
		"options": m.Options, "super_options": m.SuperOptions}
	if m.SizeOption != "" {
		ev["size_option"] = m.SizeOption
	}
	if !m.StatfsOK {
		return []checks.Finding{{Severity: checks.Skipped, Title: "Could not read the size of " + dir, Evidence: ev}}, nil
	}
	pct := 0.0
	if m.Total > 0 {
		pct = float64(m.Used) * 100 / float64(m.Total)
	}
	ev["size_bytes"], ev["used_bytes"], ev["free_bytes"] = m.Total, m.Used, m.Free
	ev["used_percent"] = float64(int(pct*10)) / 10
	ev["inodes_total"], ev["inodes_free"] = m.InodesTotal, m.InodesFree

	var fs []checks.Finding
	summary := fmt.Sprintf("%s is %s, %s, %.0f%% used (%s free)", dir, m.FSType, Human(m.Total), pct, Human(m.Free))
	head := checks.Finding{Severity: checks.OK, Title: summary, Evidence: ev}
	fs = append(fs, head)
	bad := func(sev checks.Severity, title, detail, guide string, fixes ...string) {
		fs = append(fs, checks.Finding{Severity: sev, Title: title, Detail: detail, Guide: guide, Fixes: fixes})
	}
	if !m.IsTmpfs {
		bad(checks.Warn, fmt.Sprintf("%s is %s, not tmpfs", dir, m.FSType),
			"Shared memory normally lives in RAM (tmpfs). On a disk filesystem NCCL's SHM transport still works but every access can hit storage.",
			"shm-no-space")
	}
	if m.ReadOnly {
		bad(checks.Error, dir+" is mounted read-only",
			"NCCL cannot create its segments (mkstemp fails), so 'Error while creating shared memory segment' follows. Remount it read-write or start the container without a read-only /dev/shm.",
			"shm-no-space", "container.shm")
	}
	if m.InodesTotal > 0 && m.InodesFree == 0 {
		bad(checks.Error, dir+" has no free inodes", "No new file can be created there even though bytes may be free; remove orphaned segments.",
			"shm-stale-segments", "shm.cleanup")
	}
	switch {
	case m.Free < SegmentBytes:
		bad(checks.Error, fmt.Sprintf("%s is full: %s free, less than one NCCL segment (9.2 MiB)", dir, Human(m.Free)),
			"NCCL sizes each shared-memory receive buffer at about 9.2 MiB; with less free space it fails with 'failed to extend /dev/shm/nccl-… bytes' "+
				"(or a Bus error on NCCL 2.12-2.18). Remove orphaned segments first (shm.segments shows them), then make /dev/shm bigger if it is still small.",
			"shm-no-space", "shm.cleanup", "shm.remount", "container.shm")
	case pct >= 90:
		bad(checks.Warn, fmt.Sprintf("%s is %.0f%% full (%s free)", dir, pct, Human(m.Free)),
			"A multi-GPU job needs roughly 9.2 MiB per shared-memory connection; it may not fit. Look for orphaned segments.",
			"shm-no-space", "shm.cleanup")
	}
	if m.Total <= DockerDefault {
		// Each pair of local ranks that talks over SHM needs a ~9.2 MiB
		// receive buffer per channel; a 64 MiB tmpfs holds six of them.
		title := fmt.Sprintf("%s is only %s", dir, Human(m.Total))
		if m.Total == DockerDefault {
			title = fmt.Sprintf("%s is 64 MiB, the Docker and Kubernetes default", dir)
		}
		bad(checks.Warn, title,
			fmt.Sprintf("It holds at most %d NCCL shared-memory segments of ~9.2 MiB, so a few local ranks exhaust it. "+
				"Inside a container restart it with --shm-size=1g (or --ipc=host, or a Kubernetes emptyDir with medium: Memory); "+
				"on a host remount /dev/shm with a larger size.", m.Total/SegmentBytes),
			"shm-no-space", "container.shm", "shm.remount")
	}
	return fs, nil
}

// Human formats bytes with binary units ("9.2 MiB").
func Human(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	v := float64(b) / float64(div)
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %ciB", int64(v), "KMGTPE"[exp])
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[exp])
}
