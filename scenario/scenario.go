// Package scenario builds simulated practice servers: a fixture tree copied
// into a private temporary directory, a description of the parts that are
// not files (statfs, environment, identity), simulated GPUs (internal/nvml's Sim), and sometimes a failing log to explain. The wizard runs its
// whole flow against them; fixes change the copy, never the real machine.
package scenario

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/ownedtmp"
)

//go:embed all:data
var data embed.FS

// Info describes a scenario for --list-scenarios and the Learn track.
type Info struct {
	Name        string `yaml:"-"`
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
	// GPUs selects the simulated NVML server (see gpus_cgo.go); "" = none.
	GPUs string `yaml:"gpus"`
	// Log names a file in the scenario (relative to its tree) holding the
	// failing job's output, for the "explain a log" entry.
	Log string `yaml:"log"`
	// Lesson is what the scenario teaches, shown on its Start screen.
	Lesson string `yaml:"lesson"`
}

type manifest struct {
	Info             `yaml:",inline"`
	host.FixtureSpec `yaml:",inline"`
	// ShmSize is the simulated tmpfs size; used bytes are measured from the
	// files in the tree, so a cleanup really frees space in the simulation.
	ShmSize uint64 `yaml:"shm_size"`
	// GPUProcesses lists compute processes per simulated GPU index.
	GPUProcesses map[int][]GPUProcess `yaml:"gpu_processes"`
}

// GPUProcess is a process the simulated NVML reports on a GPU.
type GPUProcess struct {
	PID    int    `yaml:"pid"`
	Memory uint64 `yaml:"memory"`
}

// List returns every scenario, sorted by name.
func List() ([]Info, error) {
	ents, err := fs.ReadDir(data, "data")
	if err != nil {
		return nil, fmt.Errorf("list scenarios: %w", err)
	}
	var out []Info
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		m, err := readManifest(e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, m.Info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func readManifest(name string) (manifest, error) {
	var m manifest
	b, err := data.ReadFile(path.Join("data", name, "scenario.yaml"))
	if err != nil {
		return m, fmt.Errorf("scenario %s: %w", name, err)
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("scenario %s: parse scenario.yaml: %w", name, err)
	}
	m.Info.Name = name
	return m, nil
}

// Scenario is a built practice server.
type Scenario struct {
	Info
	Host *host.Host
	// LogPath is the real path of the scenario's failing log, or "".
	LogPath string
	root    string
}

// Close removes the simulation's private copy.
func (s *Scenario) Close() error {
	if s.root == "" {
		return nil
	}
	return os.RemoveAll(s.root)
}

// TmpPrefix starts the name of a scenario's private copy.
const TmpPrefix = "ncclwiz-scenario-"

// Build copies the scenario's tree into a fresh temporary directory and
// returns a simulated host over it.
func Build(name string) (*Scenario, error) {
	m, err := readManifest(name)
	if err != nil {
		names := []string{}
		if list, lerr := List(); lerr == nil {
			for _, i := range list {
				names = append(names, i.Name)
			}
		}
		return nil, fmt.Errorf("unknown scenario %q (available: %s)", name, strings.Join(names, ", "))
	}
	// Copies left by runs that died without cleaning up (SIGKILL, a signal
	// nobody handled) go first; this one records its owner for the next.
	ownedtmp.Sweep("", TmpPrefix)
	root, err := ownedtmp.Make("", TmpPrefix+name+"-")
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	s := &Scenario{Info: m.Info, root: root}
	// The shared base layer first, then the scenario's own files over it.
	for _, layer := range []string{"data/_base/root", path.Join("data", name, "root")} {
		if err := copyTree(layer, root); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("scenario %s: %w", name, err)
		}
	}
	if err := writePCI(root, simulatedPCI(m.GPUs)); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	// /dev/shm is 1777 on every real system; the embedded tree cannot say so.
	if err := os.Chmod(filepath.Join(root, "dev/shm"), 0o777|os.ModeSticky); err != nil && !os.IsNotExist(err) {
		_ = s.Close()
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	// Files look as if left an hour ago, so nothing counts as "just created".
	if err := ageTree(root, time.Hour); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	h, err := host.FromSpec(root, m.FixtureSpec)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	h.Kind, h.Name, h.Simulated = "scenario", name, true
	// You practise as yourself: the tree's files are yours, so the
	// simulation's user is the one running ncclwiz.
	h.UID, h.EUID = os.Getuid(), os.Geteuid()
	shmReal := h.ShmReal()
	size := m.ShmSize
	if size > 0 {
		base := h.StatfsFunc
		h.StatfsFunc = func(p string) (host.StatFS, error) {
			if filepath.Clean(p) == filepath.Clean(shmReal) {
				return tmpfsStat(shmReal, size), nil
			}
			return base(p)
		}
	}
	// Fixes act on the simulation: a remount changes its size (and the
	// mountinfo line), a signal ends a simulated process.
	h.Act = host.Actions{
		Remount: func(dir string, newSize uint64, _ []string) error {
			if filepath.Clean(dir) != filepath.Clean(shmReal) {
				return fmt.Errorf("simulation: %s is not the simulated /dev/shm", dir)
			}
			size = newSize
			return rewriteMountSize(h, newSize)
		},
		Signal: func(pid int, _ syscall.Signal) error {
			return os.RemoveAll(h.Path(fmt.Sprintf("/proc/%d", pid)))
		},
	}
	h.NVML, err = simulatedGPUs(m.GPUs, m.GPUProcesses)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	if m.Log != "" {
		s.LogPath = filepath.Join(root, filepath.FromSlash(m.Log))
	}
	s.Host = h
	return s, nil
}

// rewriteMountSize updates size= of the shm line in the simulated mountinfo.
func rewriteMountSize(h *host.Host, size uint64) error {
	p := h.Path("/proc/self/mountinfo")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) > 4 && f[4] == h.ShmLogical() {
			for j, field := range f {
				if strings.Contains(field, "size=") {
					opts := strings.Split(field, ",")
					for k, o := range opts {
						if strings.HasPrefix(o, "size=") {
							opts[k] = fmt.Sprintf("size=%dk", size>>10)
						}
					}
					f[j] = strings.Join(opts, ",")
				}
			}
			lines[i] = strings.Join(f, " ")
		}
	}
	return os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644)
}

func ageTree(root string, age time.Duration) error {
	t := time.Now().Add(-age)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, t, t)
	})
}

// tmpfsStat reports a tmpfs of the given size whose used space is what the
// files in dir occupy, so the simulation sees the effect of a cleanup.
func tmpfsStat(dir string, size uint64) host.StatFS {
	const bs = 4096
	var used uint64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			used += (uint64(info.Size()) + bs - 1) / bs * bs
		}
		return nil
	})
	if used > size {
		used = size
	}
	blocks := size / bs
	free := (size - used) / bs
	return host.StatFS{Type: host.TmpfsMagic, Bsize: bs, Blocks: blocks, Bfree: free, Bavail: free, Files: 1 << 20, Ffree: 1<<20 - 64}
}

// copyTree copies an embedded tree to dst. Files named *.symlink become
// symlinks to their content; files named *.sparse hold a decimal size and
// become sparse files of that size (segments of many MiB without bloating
// the binary).
func copyTree(src, dst string) error {
	return fs.WalkDir(data, src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, src), "/")
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if d.Name() == ".keep" {
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := data.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(target, ".symlink"):
			return os.Symlink(strings.TrimSpace(string(b)), strings.TrimSuffix(target, ".symlink"))
		case strings.HasSuffix(target, ".sparse"):
			var n int64
			if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &n); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			f, err := os.Create(strings.TrimSuffix(target, ".sparse"))
			if err != nil {
				return err
			}
			// Allocate the blocks (as NCCL >= 2.19 does) so allocated-size
			// accounting sees a real segment; fall back to a sparse file.
			if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
				if err := f.Truncate(n); err != nil {
					f.Close()
					return err
				}
			}
			return f.Close()
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// pciGPU is a simulated GPU's place on the PCI bus.
type pciGPU struct{ BDF, Class string }

// writePCI lays the simulated GPUs out in sysfs as the kernel does: the
// device under its root port in /sys/devices, linked from /sys/bus/pci.
// Config space is a zeroed 4 KiB (readable, no ACS capability), as on a
// board whose root ports do not implement ACS.
func writePCI(root string, gs []pciGPU) error {
	for i, g := range gs {
		port := fmt.Sprintf("0000:00:%02x.0", 1+i)
		dev := filepath.Join(root, "sys/devices/pci0000:00", port, g.BDF)
		if err := os.MkdirAll(dev, 0o755); err != nil {
			return fmt.Errorf("simulate PCI: %w", err)
		}
		for f, v := range map[string]string{"vendor": "0x10de\n", "class": g.Class + "\n"} {
			if err := os.WriteFile(filepath.Join(dev, f), []byte(v), 0o644); err != nil {
				return fmt.Errorf("simulate PCI: %w", err)
			}
		}
		portDir := filepath.Join(root, "sys/devices/pci0000:00", port)
		if err := os.WriteFile(filepath.Join(portDir, "config"), make([]byte, 4096), 0o644); err != nil {
			return fmt.Errorf("simulate PCI: %w", err)
		}
		links := filepath.Join(root, "sys/bus/pci/devices")
		if err := os.MkdirAll(links, 0o755); err != nil {
			return fmt.Errorf("simulate PCI: %w", err)
		}
		for _, d := range []string{port, g.BDF} {
			target := "../../../devices/pci0000:00/" + port
			if d == g.BDF {
				target += "/" + g.BDF
			}
			if err := os.Symlink(target, filepath.Join(links, d)); err != nil && !os.IsExist(err) {
				return fmt.Errorf("simulate PCI: %w", err)
			}
		}
	}
	return nil
}
