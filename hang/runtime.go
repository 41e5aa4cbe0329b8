package hang

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/procnet"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// Runtime is what the ranks run, read from the libraries they map.
type Runtime struct {
	// Backend is "nccl" (NCCL or the CUDA driver is loaded), "gloo" (torch
	// without CUDA: collectives go through gloo) or "" (unknown: no rank's
	// maps could be read, or no torch).
	Backend string `json:"backend"`
	// From says how the backend was told.
	From string `json:"backend_from,omitempty"`
	// Torch is torch.__version__ from the package the ranks loaded.
	Torch string `json:"torch,omitempty"`
	// NCCL is the NCCL version from its library's file name or wheel,
	// "loaded" when NCCL is there but its version is not in a name.
	NCCL string `json:"nccl,omitempty"`
}

var reTorchVersion = regexp.MustCompile(`(?m)^__version__\s*=\s*['"]([^'"]+)['"]`)

// readRuntime looks at the files the ranks map (their user or root may
// read them): torch's own package gives its version, libnccl and the CUDA
// driver say the job can use NCCL.
func readRuntime(h *host.Host, j Job) Runtime {
	var rt Runtime
	read, cuda := false, false
	for _, r := range j.Ranks {
		files, err := proctab.MappedFiles(h, r.PID)
		if err != nil {
			continue
		}
		read = true
		root := "/proc/" + strconv.Itoa(r.PID) + "/root"
		for _, f := range files {
			base := path.Base(f)
			switch {
			case strings.HasPrefix(base, "libnccl") && rt.NCCL == "":
				rt.NCCL = ncclVersion(h, root, f)
			case strings.HasPrefix(base, "libcuda.so") || strings.HasPrefix(base, "libtorch_cuda"):
				cuda = true
			}
			if i := strings.LastIndex(f, "/torch/"); i >= 0 && rt.Torch == "" && (strings.HasPrefix(base, "_C.") || strings.HasPrefix(base, "libtorch")) {
				if b, err := h.ReadFile(root + f[:i] + "/torch/version.py"); err == nil {
					if m := reTorchVersion.FindSubmatch(b); m != nil {
						rt.Torch = string(m[1])
					}
				}
			}
		}
	}
	switch {
	case rt.NCCL != "" || cuda:
		rt.Backend, rt.From = "nccl", "the ranks have NCCL or CUDA loaded"
	case read && rt.Torch != "":
		rt.Backend, rt.From = "gloo", "the ranks run torch without CUDA or NCCL loaded: collectives go through gloo"
	case read:
		rt.From = "no rank has torch, NCCL or CUDA loaded"
	default:
		rt.From = "no rank's libraries could be read (another user's processes)"
	}
	return rt
}

var reSoVersion = regexp.MustCompile(`\.so\.(\d+\.\d+\.\d+)`)

// ncclVersion: libnccl.so.2.21.5 names it; pip's nvidia-nccl wheel installs
// libnccl.so.2 under site-packages/nvidia/nccl/lib and records its version
// in nvidia_nccl_cu12-2.21.5.dist-info.
func ncclVersion(h *host.Host, root, lib string) string {
	if m := reSoVersion.FindStringSubmatch(path.Base(lib)); m != nil {
		return m[1]
	}
	if i := strings.LastIndex(lib, "/nvidia/nccl/"); i >= 0 {
		if ents, err := h.ReadDir(root + lib[:i]); err == nil {
			for _, e := range ents {
				n := e.Name()
				if strings.HasPrefix(n, "nvidia_nccl") && strings.HasSuffix(n, ".dist-info") {
					if _, v, ok := strings.Cut(strings.TrimSuffix(n, ".dist-info"), "-"); ok {
						return v
					}
				}
			}
		}
	}
	return "loaded"
}

// older reports whether version v is below want (both dotted numbers; a
// suffix like a0 or +cu121 is ignored). Unknown versions are not older.
func older(v, want string) bool {
	a, b := nums(v), nums(want)
	if len(a) == 0 {
		return false
	}
	for i := range b {
		x := 0
		if i < len(a) {
			x = a[i]
		}
		if x != b[i] {
			return x < b[i]
		}
	}
	return false
}

func nums(v string) []int {
	var out []int
	for _, f := range strings.Split(v, ".") {
		end := 0
		for end < len(f) && f[end] >= '0' && f[end] <= '9' {
			end++
		}
		if end == 0 {
			break
		}
		n, _ := strconv.Atoi(f[:end])
		out = append(out, n)
		if end < len(f) {
			break
		}
	}
	return out
}

// storeSockets lists each rank's connections to the job's rendezvous port
// (MASTER_PORT), and says whether anything in its network namespace still
// listens there.
func storeSockets(h *host.Host, j Job, ss []RankSample) (gone string) {
	port, err := strconv.Atoi(j.Env("MASTER_PORT"))
	if err != nil || port <= 0 {
		return ""
	}
	closed, listening, seen := 0, false, false
	for i := range ss {
		s := &ss[i]
		if s.Gone {
			continue
		}
		all, err := procnet.TCP(h, s.PID)
		if err != nil {
			continue
		}
		seen = true
		for _, sk := range all {
			if sk.State == "LISTEN" && int(sk.Local.Port()) == port {
				listening = true
			}
		}
		held, err := procnet.Held(h, s.PID)
		if err != nil {
			continue
		}
		s.StoreKnown = true
		for _, sk := range held {
			if sk.State == "LISTEN" && int(sk.Local.Port()) == port {
				s.StoreHost = true
			}
			if int(sk.Remote.Port()) != port || sk.State == "LISTEN" {
				continue
			}
			s.StoreConns++
			s.StoreSockets = append(s.StoreSockets, fmt.Sprintf("%s → %s %s", sk.Local, sk.Remote, sk.State))
			if sk.State == "CLOSE-WAIT" {
				closed++
			}
		}
	}
	if seen && !listening && closed > 0 {
		return fmt.Sprintf("nothing listens on the job's store port %d any more, and %s to it closed at the other end (CLOSE-WAIT): the process that hosted the store (torchrun's agent, or rank 0) is gone", port, plural(closed, "rank connection is", "rank connections are"))
	}
	return ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
