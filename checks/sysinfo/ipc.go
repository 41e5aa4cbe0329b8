package sysinfo

import (
	"bufio"
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// logind.conf locations in systemd's precedence order (later wins).
var logindFiles = []string{"/usr/lib/systemd/logind.conf", "/etc/systemd/logind.conf"}
var logindDropinDirs = []string{"/usr/lib/systemd/logind.conf.d", "/usr/local/lib/systemd/logind.conf.d", "/etc/systemd/logind.conf.d", "/run/systemd/logind.conf.d"}

// RemoveIPC is the effective systemd-logind RemoveIPC setting.
type RemoveIPC struct {
	Value   bool   // effective value
	Default bool   // nobody set it; systemd's default (yes) applies
	Source  string // file that set it last
	Logind  bool   // systemd-logind appears to be installed
	// Running: systemd-logind runs in this host or namespace, so RemoveIPC
	// acts here; RunningWhy says what showed it (or what was looked at).
	Running    bool
	RunningWhy string
}

// logindRunning looks for a running systemd-logind: the state directory it
// creates at start (/run/systemd/seats, /run/systemd/sessions) or its
// process. A container image often ships logind.conf without running
// logind; then nothing removes users' shared memory at logout.
func logindRunning(h *host.Host) (bool, string) {
	for _, d := range []string{"/run/systemd/seats", "/run/systemd/sessions"} {
		if fi, err := h.Lstat(d); err == nil && fi.IsDir() {
			return true, d + " exists (systemd-logind's state)"
		}
	}
	ents, err := h.ReadDir("/proc")
	if err != nil {
		return false, "no /run/systemd/seats and /proc cannot be listed"
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := proctab.ReadStat(h, pid); err == nil && p.Comm == "systemd-logind" && !p.Zombie() {
			return true, "systemd-logind runs as PID " + e.Name()
		}
	}
	return false, "no /run/systemd/seats or /run/systemd/sessions and no systemd-logind process"
}

// ReadRemoveIPC parses logind.conf and its drop-ins. systemd's default is
// RemoveIPC=yes: when a user's last login session ends, logind deletes their
// /dev/shm files and SysV segments (logind.conf(5)).
func ReadRemoveIPC(h *host.Host) RemoveIPC {
	r := RemoveIPC{Value: true, Default: true}
	var files []string
	for _, f := range logindFiles {
		if exists(h, f) {
			files = append(files, f)
			r.Logind = true
		}
	}
	// Drop-ins are applied in lexical order of file name across dirs.
	byName := map[string]string{}
	for _, d := range logindDropinDirs {
		ents, err := h.ReadDir(d)
		if err != nil {
			continue
		}
		r.Logind = true
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".conf") {
				byName[e.Name()] = path.Join(d, e.Name())
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, byName[n])
	}
	if r.Logind {
		r.Running, r.RunningWhy = logindRunning(h)
	}
	for _, f := range files {
		b, err := h.ReadFile(f)
		if err != nil {
			continue
		}
		inLogin := false
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' || line[0] == ';' {
				continue
			}
			if strings.HasPrefix(line, "[") {
				inLogin = line == "[Login]"
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok || !inLogin || strings.TrimSpace(k) != "RemoveIPC" {
				continue
			}
			if b, ok := parseSystemdBool(strings.TrimSpace(v)); ok {
				r.Value, r.Default, r.Source = b, false, f
			}
		}
	}
	return r
}

func parseSystemdBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "1", "yes", "true", "on", "y", "t":
		return true, true
	case "0", "no", "false", "off", "n", "f":
		return false, true
	}
	return false, false
}

// Limit is one row of /proc/self/limits.
type Limit struct {
	Soft, Hard uint64 // math.MaxUint64 means unlimited
}

const unlimited = ^uint64(0)

// ReadLimits parses /proc/self/limits into a map keyed by the row name.
func ReadLimits(h *host.Host) (map[string]Limit, error) {
	b, err := h.ReadFile("/proc/self/limits")
	if err != nil {
		return nil, err
	}
	out := map[string]Limit{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if len(line) < 26 {
			continue
		}
		name := strings.TrimSpace(line[:26])
		f := strings.Fields(line[26:])
		if len(f) < 2 {
			continue
		}
		out[name] = Limit{Soft: parseLimit(f[0]), Hard: parseLimit(f[1])}
	}
	return out, nil
}

func parseLimit(s string) uint64 {
	if s == "unlimited" {
		return unlimited
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func limitString(v uint64) string {
	if v == unlimited {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}

// NUMANode is one /sys/devices/system/node/nodeN.
type NUMANode struct {
	ID       int
	MemTotal uint64 // bytes
	CPUList  string
}

// ReadNUMA lists NUMA nodes with their memory and CPUs.
func ReadNUMA(h *host.Host) ([]NUMANode, error) {
	ents, err := h.ReadDir("/sys/devices/system/node")
	if err != nil {
		return nil, err
	}
	var out []NUMANode
	for _, e := range ents {
		id, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node"))
		if err != nil || !strings.HasPrefix(e.Name(), "node") {
			continue
		}
		n := NUMANode{ID: id}
		dir := "/sys/devices/system/node/" + e.Name()
		if b, err := h.ReadFile(dir + "/meminfo"); err == nil {
			// "Node 0 MemTotal:       32768000 kB"
			for _, line := range strings.Split(string(b), "\n") {
				f := strings.Fields(line)
				if len(f) >= 4 && f[2] == "MemTotal:" {
					kb, _ := strconv.ParseUint(f[3], 10, 64)
					n.MemTotal = kb * 1024
				}
			}
		}
		if b, err := h.ReadFile(dir + "/cpulist"); err == nil {
			n.CPUList = strings.TrimSpace(string(b))
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// MemInfo returns /proc/meminfo values in bytes (MemTotal, MemAvailable …).
func MemInfo(h *host.Host) map[string]uint64 {
	out := map[string]uint64{}
	b, err := h.ReadFile("/proc/meminfo")
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 {
			v, _ := strconv.ParseUint(f[1], 10, 64)
			if len(f) >= 3 && f[2] == "kB" {
				v *= 1024
			}
			out[strings.TrimSuffix(f[0], ":")] = v
		}
	}
	return out
}

// CgroupMemoryMax returns the memory limit of this process's cgroup (v2
// memory.max, else v1 memory.limit_in_bytes) and the file it came from;
// 0 means none found.
func CgroupMemoryMax(h *host.Host) (uint64, string) {
	b, err := h.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, ""
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = path.Join("/sys/fs/cgroup", parts[2], "memory.max")
		case strings.Contains(parts[1], "memory"):
			file = path.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		default:
			continue
		}
		v, err := h.ReadFile(file)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(v))
		if s == "max" {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		// cgroup v1 reports "no limit" as a huge page-aligned number.
		if err != nil || n >= 1<<62 {
			continue
		}
		return n, file
	}
	return 0, ""
}

func readUint(h *host.Host, p string) (uint64, bool) {
	b, err := h.ReadFile(p)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

func runIPC(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	var fs []checks.Finding
	sysv := map[string]any{}
	for _, k := range []string{"shmmax", "shmmni", "shmall"} {
		if v, ok := readUint(h, "/proc/sys/kernel/"+k); ok {
			sysv[k] = v
		}
	}
	if b, err := h.ReadFile("/proc/sysvipc/shm"); err == nil {
		n, bytes, unattached := 0, uint64(0), 0
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) < 7 {
				continue
			}
			n++
			sz, _ := strconv.ParseUint(f[3], 10, 64)
			bytes += sz
			if f[6] == "0" {
				unattached++
			}
		}
		sysv["segments"], sysv["bytes"], sysv["unattached"] = n, bytes, unattached
	}
	summary := checks.Finding{Severity: checks.OK, Title: "SysV IPC limits", Evidence: map[string]any{"sysv": sysv}}
	if shmmni, ok := sysv["shmmni"].(uint64); ok {
		if n, ok := sysv["segments"].(int); ok && shmmni > 0 && uint64(n) >= shmmni*9/10 {
			summary.Severity = checks.Warn
			summary.Title = fmt.Sprintf("SysV shared memory nearly exhausted: %d of %d segments", n, shmmni)
			summary.Detail = "NCCL uses POSIX shared memory in /dev/shm, but other libraries in the job (MPI, CUDA IPC helpers) may need SysV segments. Unattached segments (nattch 0) can be listed with ipcs -m."
		}
	}
	fs = append(fs, summary)

	// systemd-logind RemoveIPC.
	rip := ReadRemoveIPC(h)
	if rip.Logind {
		ev := map[string]any{"remove_ipc": rip.Value, "default": rip.Default, "uid": h.UID, "logind_running": rip.Running, "logind_evidence": rip.RunningWhy}
		if rip.Source != "" {
			ev["source"] = rip.Source
		}
		switch {
		case rip.Value && !rip.Running:
			// Configured but nobody acts on it here (a container image with
			// logind.conf, say): nothing removes shared memory at logout.
			fs = append(fs, checks.Finding{Severity: checks.OK,
				Title:    "systemd-logind does not run here, so its RemoveIPC setting does not apply",
				Detail:   "logind.conf is installed but systemd-logind is not running (" + rip.RunningWhy + "); RemoveIPC only matters where it runs.",
				Evidence: ev})
		case !rip.Value:
			fs = append(fs, checks.Finding{Severity: checks.OK, Title: "systemd-logind RemoveIPC=no", Evidence: ev})
		default:
			src := "systemd's default"
			if !rip.Default {
				src = rip.Source
			}
			// Only a latent risk: it bites jobs that outlive the user's last
			// session (nohup, mpirun, SLURM). Root and system users are exempt.
			sev := checks.Info
			if h.UID < 1000 {
				sev = checks.OK
			}
			f := checks.Finding{Severity: sev,
				Title: "systemd-logind RemoveIPC=yes (" + src + ")",
				Detail: "When a regular user's last login session ends, logind deletes their /dev/shm files and SysV segments. " +
					"Jobs started by mpirun, SLURM or nohup without a session then fail with 'Error while attaching to shared memory segment … No such file or directory'. " +
					"Set RemoveIPC=no in a logind.conf.d drop-in and restart systemd-logind (root).",
				Evidence: ev, Guide: "shm-removeipc", Fixes: []string{"systemd.removeipc"}}
			if sev == checks.OK {
				f.Detail = "RemoveIPC only cleans up after regular users (uid >= 1000); this user is exempt."
				f.Fixes = nil
			}
			fs = append(fs, f)
		}
	}

	// NUMA nodes matter to NCCL only where a GPU's host allocations go
	// (numa.go).
	if nodes, err := ReadNUMA(h); err == nil && len(nodes) > 0 {
		fs = append(fs, judgeNUMA(nodes, gpuHomes(ctx, h), h.Getenv("NCCL_CUMEM_HOST_ENABLE")))
	}

	// Limits of this process (what a job started from this shell inherits).
	if lim, err := ReadLimits(h); err == nil {
		ev := map[string]any{}
		for k, name := range map[string]string{"Max locked memory": "memlock", "Max open files": "nofile", "Max stack size": "stack"} {
			if l, ok := lim[k]; ok {
				ev[name] = map[string]any{"soft": limitString(l.Soft), "hard": limitString(l.Hard)}
			}
		}
		f := checks.Finding{Severity: checks.OK, Title: "Process limits", Evidence: ev}
		var notes []string
		if l, ok := lim["Max open files"]; ok && l.Soft < 4096 {
			f.Severity = checks.Warn
			notes = append(notes, fmt.Sprintf("open files soft limit is %d", l.Soft))
			f.Detail = "NCCL opens sockets and IPC descriptors per peer and channel; large or multi-node jobs fail with 'Too many open files'. Raise nofile (ulimit -n, /etc/security/limits.d)."
			f.Guide = "fd-exhaustion"
		}
		if l, ok := lim["Max stack size"]; ok && l.Soft == unlimited {
			f.Severity = checks.Warn
			notes = append(notes, "stack size is unlimited")
			f.Detail = strings.TrimSpace(f.Detail + " An unlimited stack (ulimit -s unlimited) gives threads a 2 MB stack that NCCL's topology search can overflow before NCCL 2.28 (NCCL runtime troubleshooting, 'Stack size'); use a finite value such as 8192.")
		}
		if len(notes) > 0 {
			f.Title = "Process limits: " + strings.Join(notes, "; ")
		}
		fs = append(fs, f)
	}

	// Host RAM and cgroup limit vs /dev/shm: tmpfs pages are RAM, charged to
	// the cgroup that touches them.
	if st, err := h.Statfs(h.ShmLogical()); err == nil && st.Total() > 0 {
		mi := MemInfo(h)
		shm := st.Total()
		ev := map[string]any{"shm_size_bytes": shm, "mem_total_bytes": mi["MemTotal"], "mem_available_bytes": mi["MemAvailable"]}
		f := checks.Finding{Severity: checks.OK, Title: fmt.Sprintf("/dev/shm (%s) fits in RAM (%s)", human(shm), human(mi["MemTotal"])), Evidence: ev}
		if limit, file := CgroupMemoryMax(h); limit > 0 {
			ev["cgroup_memory_max_bytes"], ev["cgroup_file"] = limit, file
			if shm > limit {
				f.Severity = checks.Warn
				f.Title = fmt.Sprintf("/dev/shm (%s) is larger than this cgroup's memory limit (%s)", human(shm), human(limit))
				f.Detail = "Shared-memory pages count against the container's memory limit: filling /dev/shm gets the job OOM-killed before the tmpfs is full. Raise the memory limit along with --shm-size."
				f.Guide = "container-shm"
			}
		}
		if mt := mi["MemTotal"]; mt > 0 && shm > mt && f.Severity == checks.OK {
			f.Severity = checks.Warn
			f.Title = fmt.Sprintf("/dev/shm (%s) is larger than RAM (%s)", human(shm), human(mt))
			f.Detail = "tmpfs lives in RAM (and swap); a /dev/shm bigger than memory lets a runaway job exhaust the machine."
		}
		fs = append(fs, f)
	}
	return fs, nil
}
