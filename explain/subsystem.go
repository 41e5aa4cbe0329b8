package explain

import (
	"regexp"
	"slices"
	"strings"
)

// subsystem is the part of NCCL a source file belongs to. A WARN line or
// the first frame of a return-code trail names the file, and so which part
// of NCCL complained and which guide applies, even when the message itself
// is not in the catalogue. Paths are those of NCCL's src/ tree (2.4–2.30).
type subsystem struct {
	Prefix string // path prefix (or file name) inside src/
	Name   string
	Guide  string
	Checks []string // extra checks beyond the guide's
	// API files check the caller's arguments: there PyTorch's wrapper
	// (invalid argument, invalid usage) says as much as the warning.
	API bool
}

// subsystems is ordered: the first matching prefix wins, so specific
// files come before their directory.
var subsystems = []subsystem{
	{"transport/net_ib", "the InfiniBand/RoCE transport", "ib-roce", nil, false},
	{"misc/ibvwrap", "the InfiniBand verbs library", "ib-roce", nil, false},
	{"transport/net_socket", "the TCP socket transport", "socket-connect", nil, false},
	{"misc/socket", "NCCL's sockets", "socket-connect", nil, false},
	{"include/socket", "NCCL's sockets", "socket-connect", nil, false},
	{"transport/coll_net", "the CollNet/SHARP transport", "ib-roce", nil, false},
	{"transport/net", "the network transport", "multi-node-basics", nil, false},
	{"include/net", "the network plugin interface", "multi-node-basics", nil, false},
	{"plugin/", "a network/tuner plugin (libnccl-net, aws-ofi-nccl)", "multi-node-basics", nil, false},
	{"misc/net", "the network plugin loader", "multi-node-basics", nil, false},
	{"misc/shmutils", "shared memory (/dev/shm)", "container-shm", []string{"shm.mount", "shm.segments"}, false},
	{"transport/shm", "the shared-memory transport", "container-shm", []string{"shm.mount", "shm.segments"}, false},
	{"include/shm", "shared memory (/dev/shm)", "container-shm", []string{"shm.mount"}, false},
	{"transport/p2p", "the GPU peer-to-peer transport", "p2p-acs-iommu", nil, false},
	{"transport/nvls", "NVLink SHARP (NVLS)", "nvls", nil, false},
	{"graph/", "topology detection and path search", "p2p-acs-iommu", []string{"gpu.topology"}, false},
	{"proxy", "the proxy thread (network progress)", "multi-node-basics", nil, false},
	{"bootstrap", "bootstrap (rank discovery over TCP)", "socket-interface", nil, false},
	{"misc/nvmlwrap", "NVML (GPU discovery)", "nvml-visibility", nil, false},
	{"misc/cudawrap", "the CUDA driver", "cuda-driver", nil, false},
	{"include/cudawrap", "the CUDA driver", "cuda-driver", nil, false},
	{"include/alloc", "GPU and host memory allocation", "gpu-oom-init", nil, false},
	{"misc/strongstream", "CUDA streams and graphs", "cuda-kernel-fault", nil, false},
	{"enqueue", "the collective launch path", "reading-nccl-debug", nil, true},
	{"init", "communicator initialisation", "reading-nccl-debug", nil, true},
	{"group", "group calls (ncclGroupStart/End)", "reading-nccl-debug", nil, true},
}

// reSrcFile finds NCCL's source location: "graph/search.cc:1023" before
// "NCCL WARN" (2.3+), after a bare "WARN " (1.x), or in an INFO
// return-code frame ("NCCL INFO transport/net_ib.cc:1112 -> 2").
var reSrcFile = regexp.MustCompile(`(?:^|[\s\]])((?:[A-Za-z_][\w.-]*/)*[A-Za-z_][\w-]*\.(?:cc|cu|cpp|h)):\d+\b`)

// subsystemOf names the subsystem of the first NCCL source file in text.
func subsystemOf(text string) (file string, sub subsystem, ok bool) {
	sm := reSrcFile.FindStringSubmatch(text)
	if sm == nil {
		return "", subsystem{}, false
	}
	file = strings.TrimPrefix(sm[1], "src/")
	sub, ok = subsystemByFile(file)
	return file, sub, ok
}

func subsystemByFile(file string) (subsystem, bool) {
	for _, s := range subsystems {
		if strings.HasPrefix(file, s.Prefix) {
			return s, true
		}
	}
	return subsystem{}, false
}

// placeIn points d at the guide and checks of the subsystem whose file is
// in d.Fields["source"].
func (s *scan) placeIn(d *Diagnosis) (subsystem, bool) {
	sub, ok := subsystemByFile(d.Fields["source"])
	if !ok {
		return sub, false
	}
	d.Fields["subsystem"] = sub.Name
	if g, ok := s.e.lib.Get(sub.Guide, s.e.opts.Lang); ok {
		d.Guide = sub.Guide
		d.Checks = d.Checks[:0]
		for _, c := range append(append([]string{}, g.Checks...), sub.Checks...) {
			if !slices.Contains(d.Checks, c) {
				d.Checks = append(d.Checks, c)
			}
		}
		d.Fixes = append(d.Fixes[:0], g.Fixes...)
	}
	return sub, true
}
