package remote

import (
	"debug/elf"
	"fmt"
	"runtime"
	"sort"
	"strings"

	"github.com/ncclwiz/ncclwiz/internal/dotted"
	"github.com/ncclwiz/ncclwiz/internal/glibc"
)

// binInfo is one ncclwiz build that can be sent to nodes.
type binInfo struct {
	arch  string // linux GOARCH: amd64, arm64
	path  string
	sum   string
	glibc string // highest GLIBC version it asks for; "" for none (the release builds)
}

// elfArch names a binary's architecture as Go does; "" when it is not ELF.
func elfArch(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_AARCH64:
		return "arm64"
	case elf.EM_PPC64:
		return "ppc64le"
	}
	return strings.ToLower(strings.TrimPrefix(f.Machine.String(), "EM_"))
}

// NormArch turns `uname -m` into Go's name for the architecture.
func NormArch(machine string) string {
	switch m := strings.TrimSpace(machine); m {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64", "aarch64_be":
		return "arm64"
	case "ppc64le":
		return "ppc64le"
	default:
		return m
	}
}

// loadBinaries checksums this ncclwiz and the --binary builds, and checks
// that each is built for the architecture it is given for.
func loadBinaries(o Options) (map[string]binInfo, error) {
	out := map[string]binInfo{}
	add := func(arch, path string, local bool) error {
		sum, err := FileSum(path)
		if err != nil {
			return err
		}
		b := binInfo{arch: arch, path: path, sum: sum}
		if got := elfArch(path); got != "" {
			if !local && got != arch {
				return fmt.Errorf("--binary %s=%s: that file is built for %s", arch, path, got)
			}
			if local {
				b.arch = got
			}
			b.glibc, _ = glibc.Required(path)
		}
		out[b.arch] = b
		return nil
	}
	if err := add(runtime.GOARCH, o.LocalBinary, true); err != nil {
		return nil, err
	}
	arches := make([]string, 0, len(o.Binaries))
	for a := range o.Binaries {
		arches = append(arches, a)
	}
	sort.Strings(arches)
	for _, a := range arches {
		if err := add(NormArch(a), o.Binaries[a], false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// choose picks the build for a node from what the probe saw: its
// architecture (uname -m) and C library. It returns a reason and a message
// the user can act on when no build fits, so a mixed cluster (an x86 login
// node, Grace compute nodes) ends with what to install, not exit 126.
func choose(bins map[string]binInfo, p probe) (binInfo, string, string) {
	arch := NormArch(p.machine)
	if arch == "" {
		// A node whose probe printed no architecture: the build of this
		// machine, as before the probe asked.
		arch = runtime.GOARCH
		if b, ok := bins[arch]; ok {
			return b, "", ""
		}
		for _, b := range bins {
			return b, "", ""
		}
	}
	b, ok := bins[arch]
	if !ok {
		have := make([]string, 0, len(bins))
		for a := range bins {
			have = append(have, "linux/"+a)
		}
		sort.Strings(have)
		return binInfo{}, "arch", fmt.Sprintf("the node is %s (linux/%s) and no ncclwiz for it is at hand (have %s): pass --binary %s=PATH with the linux/%s build "+
			"(ncclwiz_linux_%s.tar.gz of a release, or CGO_ENABLED=0 GOARCH=%s go build), or install ncclwiz on the nodes "+
			"(curl -fsSL https://github.com/ncclwiz/ncclwiz/releases/latest/download/install.sh | sh) and give its path with --remote-path",
			p.machine, arch, strings.Join(have, ", "), arch, arch, arch, arch)
	}
	libc := strings.ToLower(p.libc)
	switch {
	case strings.Contains(libc, "musl"):
		return binInfo{}, "libc", "the node's C library is musl (" + p.libc + "); ncclwiz needs glibc (2.17 or later) to load NVML. " +
			"A build without GPU checks runs there: CGO_ENABLED=0 GOARCH=" + arch + " go build -tags nonvml, passed with --binary " + arch + "=PATH"
	case b.glibc != "" && p.glibcVersion() != "" && dotted.Compare(b.glibc, p.glibcVersion()) > 0:
		return binInfo{}, "libc", fmt.Sprintf("%s needs glibc %s (a build with cgo) and the node has %s: use a release build, which needs none "+
			"(ncclwiz_linux_%s.tar.gz, or CGO_ENABLED=0 go build), with --binary %s=PATH", b.path, b.glibc, p.glibcVersion(), arch, arch)
	}
	return b, "", ""
}
