package gpu

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/dotted"
)

// NCCLBuild is one NCCL library a job could load.
type NCCLBuild struct {
	Version string // "2.21.5", "" when the file name does not say
	Path    string
	// Source is "system", "wheel", "LD_LIBRARY_PATH" or "LD_PRELOAD".
	Source string
}

// Stack is what a job started from this environment would load.
type Stack struct {
	// Python is the job's interpreter (JobPython's rule): the torch below
	// is the one it imports.
	Python           Python
	Torch, TorchCUDA string // "2.4.0+cu121", "12.1"
	TorchNeedsNCCL   string // from torch's METADATA Requires-Dist
	SitePackages     string
	Builds           []NCCLBuild
	Wheels           []NCCLBuild // nvidia-nccl-cu* wheels in SitePackages
}

var (
	libVersionRe = regexp.MustCompile(`libnccl\.so\.(\d+\.\d+\.\d+)`)
	wheelRe      = regexp.MustCompile(`^nvidia_nccl_cu\d+-(\d+\.\d+\.\d+)[^/]*\.dist-info$`)
	torchInfoRe  = regexp.MustCompile(`^torch-([^/]+)\.dist-info$`)
	requiresRe   = regexp.MustCompile(`(?m)^Requires-Dist: nvidia-nccl-cu\d+\s*==\s*([\d.]+)`)
	pyVerRe      = regexp.MustCompile(`(?m)^__version__\s*=\s*['"]([^'"]+)['"]`)
	pyCUDARe     = regexp.MustCompile(`(?m)^cuda\s*(?::\s*\S+\s*)?=\s*['"]([^'"]+)['"]`)
)

// systemLibDirs are where distributions and the CUDA/NCCL packages put libnccl.
var systemLibDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
	"/usr/local/lib", "/usr/local/cuda/lib64", "/usr/local/nccl/lib", "/opt/nccl/lib"}

// ReadStack finds torch and the NCCL builds the job's Python (JobPython)
// would load, without importing torch.
func ReadStack(ctx context.Context, h *host.Host) Stack {
	st := Stack{Python: JobPython(ctx, h, h.Python)}
	seen := map[string]bool{}
	add := func(b NCCLBuild) {
		if !seen[b.Path] {
			seen[b.Path] = true
			st.Builds = append(st.Builds, b)
		}
	}
	scanDir := func(dir, source string) {
		ents, err := h.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			if m := libVersionRe.FindStringSubmatch(e.Name()); m != nil {
				add(NCCLBuild{Version: m[1], Path: path.Join(dir, e.Name()), Source: source})
			}
		}
	}
	for _, d := range splitList(h.Getenv("LD_LIBRARY_PATH")) {
		scanDir(d, "LD_LIBRARY_PATH")
	}
	for _, p := range strings.FieldsFunc(h.Getenv("LD_PRELOAD"), func(r rune) bool { return r == ':' || r == ' ' }) {
		if strings.Contains(path.Base(p), "libnccl") {
			v := ""
			if m := libVersionRe.FindStringSubmatch(p); m != nil {
				v = m[1]
			}
			add(NCCLBuild{Version: v, Path: p, Source: "LD_PRELOAD"})
		}
	}
	for _, d := range systemLibDirs {
		scanDir(d, "system")
	}
	for _, p := range ldCachePaths(h) {
		if m := libVersionRe.FindStringSubmatch(p); m != nil {
			add(NCCLBuild{Version: m[1], Path: p, Source: "system"})
		}
	}
	st.SitePackages = findSitePackages(ctx, h, st.Python)
	if st.SitePackages != "" {
		readSitePackages(h, &st)
	}
	return st
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ":") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ldCachePaths pulls libnccl paths out of /etc/ld.so.cache (NUL-separated
// strings in a binary table).
func ldCachePaths(h *host.Host) []string {
	b, err := h.ReadFile("/etc/ld.so.cache")
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range bytes.Split(b, []byte{0}) {
		if bytes.HasPrefix(s, []byte("/")) && bytes.Contains(s, []byte("libnccl.so")) {
			out = append(out, string(s))
		}
	}
	return out
}

// findSitePackages picks the site-packages of the job's interpreter that
// holds torch (or NCCL wheels): the interpreter's own import path, never
// another Python's.
func findSitePackages(ctx context.Context, h *host.Host, py Python) string {
	if py.Path == "" {
		return ""
	}
	for _, dir := range sitePackages(ctx, h, py.Path) {
		if _, err := h.Lstat(dir + "/torch"); err == nil {
			return dir
		}
		if ents, err := h.ReadDir(dir); err == nil {
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "nvidia_nccl_cu") {
					return dir
				}
			}
		}
	}
	return ""
}

func readSitePackages(h *host.Host, st *Stack) {
	dir := st.SitePackages
	ents, _ := h.ReadDir(dir)
	for _, e := range ents {
		if m := wheelRe.FindStringSubmatch(e.Name()); m != nil {
			lib := path.Join(dir, "nvidia/nccl/lib/libnccl.so.2")
			b := NCCLBuild{Version: m[1], Path: lib, Source: "wheel"}
			st.Wheels = append(st.Wheels, b)
			st.Builds = append(st.Builds, b)
		}
		if m := torchInfoRe.FindStringSubmatch(e.Name()); m != nil && st.Torch == "" {
			st.Torch = m[1]
			if meta, err := h.ReadFile(path.Join(dir, e.Name(), "METADATA")); err == nil {
				if r := requiresRe.FindSubmatch(meta); r != nil {
					st.TorchNeedsNCCL = string(r[1])
				}
			}
		}
	}
	if b, err := h.ReadFile(path.Join(dir, "torch/version.py")); err == nil {
		if m := pyVerRe.FindSubmatch(b); m != nil {
			st.Torch = string(m[1])
		}
		if m := pyCUDARe.FindSubmatch(b); m != nil && string(m[1]) != "None" {
			st.TorchCUDA = string(m[1])
		}
	}
}

// inRange reports lo <= v < hi.
func inRange(v, lo, hi string) bool { return !dotted.Less(v, lo) && dotted.Less(v, hi) }

func runStack(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	st := ReadStack(ctx, h)
	var builds []map[string]any
	for _, b := range st.Builds {
		builds = append(builds, map[string]any{"version": b.Version, "path": b.Path, "source": b.Source})
	}
	ev := map[string]any{"torch": st.Torch, "torch_cuda": st.TorchCUDA, "site_packages": st.SitePackages, "nccl_builds": builds,
		"python": st.Python.Path, "python_from": st.Python.From}
	in := " in " + st.Python.String()
	if st.Python.Path == "" {
		in = " (no Python interpreter: " + st.Python.Why + ")"
	}
	// The NCCL a torch job loads: an LD_PRELOAD or LD_LIBRARY_PATH copy
	// wins over the wheel torch links against; without torch, the system's.
	var active *NCCLBuild
	for _, src := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "wheel", "system"} {
		for i := range st.Builds {
			if st.Builds[i].Source == src && active == nil {
				active = &st.Builds[i]
			}
		}
	}
	var fs []checks.Finding
	head := checks.Finding{Severity: checks.OK, Evidence: ev}
	const rule = "ncclwiz takes the job's Python from --python, else the job's ranks running here (their venv or interpreter), else the active virtualenv or conda env, else python3 on PATH; `ncclwiz test` uses the same one."
	switch {
	case st.Torch == "" && len(st.Builds) == 0:
		head.Severity = checks.Info
		head.Title = "No torch and no NCCL library found" + in
		head.Detail = "Activate the training job's virtualenv or conda env (or set LD_LIBRARY_PATH as the job does), or name its interpreter with --python, and check again. " + rule
		return []checks.Finding{head}, nil
	case st.Torch != "" && st.TorchCUDA == "":
		// A CPU build of torch has no NCCL: an NCCL job fails at
		// init_process_group("nccl") ("Distributed package doesn't have
		// NCCL built in").
		head.Severity = checks.Error
		head.Title = fmt.Sprintf("torch %s%s is a CPU-only build: an NCCL job cannot run with it", st.Torch, in)
		head.Detail = "Its torch/version.py says cuda = None, so torch.distributed has no NCCL backend and init_process_group(\"nccl\") fails " +
			"(\"Distributed package doesn't have NCCL built in\"). Install a CUDA build of torch in the job's environment (pytorch.org's install selector gives the command for your CUDA version), " +
			"or, if this is not the job's Python, name the right one with --python. " + rule
		head.Guide = "cuda-driver"
		if active != nil {
			ev["active_nccl"] = active.Version
		}
	case active != nil:
		head.Title = fmt.Sprintf("torch %s (CUDA %s) loads NCCL %s from %s", orDash(st.Torch), orDash(st.TorchCUDA), orDash(active.Version), active.Source) + in
		if st.Torch == "" {
			head.Title = fmt.Sprintf("NCCL %s (%s); no torch", orDash(active.Version), active.Source) + in
		}
		ev["active_nccl"] = active.Version
	default:
		head.Title = fmt.Sprintf("torch %s (CUDA %s); no separate NCCL library found (it may be built into torch)", st.Torch, orDash(st.TorchCUDA)) + in
	}
	fs = append(fs, head)

	if active != nil && (active.Source == "LD_PRELOAD" || active.Source == "LD_LIBRARY_PATH") {
		want := st.TorchNeedsNCCL
		if want == "" && len(st.Wheels) > 0 {
			want = st.Wheels[0].Version
		}
		if want != "" && active.Version != "" && active.Version != want {
			fs = append(fs, checks.Finding{Severity: checks.Warn,
				Title:  fmt.Sprintf("%s puts NCCL %s ahead of the NCCL %s torch was built with", active.Source, active.Version, want),
				Detail: fmt.Sprintf("%s (%s) shadows the wheel's libnccl. A different NCCL can fail with 'undefined symbol: nccl…' or 'Mismatched NCCL version detected'. Remove it from %s unless you mean to test that build.", active.Path, active.Source, active.Source),
				Guide:  "nccl-version-mismatch"})
		}
	}
	if len(st.Wheels) > 1 {
		var vs []string
		for _, w := range st.Wheels {
			vs = append(vs, w.Version)
		}
		fs = append(fs, checks.Finding{Severity: checks.Warn, Title: "Several NCCL wheels in one environment: " + strings.Join(vs, ", "),
			Detail: "Two nvidia-nccl-cu* wheels share nvidia/nccl/lib; whichever was installed last wins. Keep the one torch requires (pip list | grep nccl).",
			Guide:  "nccl-version-mismatch"})
	}
	if st.TorchNeedsNCCL != "" && len(st.Wheels) == 1 && st.Wheels[0].Version != st.TorchNeedsNCCL {
		fs = append(fs, checks.Finding{Severity: checks.Warn,
			Title:  fmt.Sprintf("torch requires nvidia-nccl %s but %s is installed", st.TorchNeedsNCCL, st.Wheels[0].Version),
			Detail: "The wheel was replaced after torch was installed. Reinstall the version torch requires.", Guide: "nccl-version-mismatch"})
	}
	if st.TorchCUDA != "" {
		s := Probe(ctx, h)
		if s.OK() && s.CUDA != "" && dotted.Less(s.CUDA, st.TorchCUDA) {
			fs = append(fs, checks.Finding{Severity: checks.Error,
				Title:  fmt.Sprintf("The driver supports CUDA %s but torch was built for CUDA %s", s.CUDA, st.TorchCUDA),
				Detail: fmt.Sprintf("CUDA fails to start with 'CUDA driver version is insufficient for CUDA runtime version'. Install a driver for CUDA %s or newer (driver %s is installed), or a torch wheel built for CUDA %s or older.", st.TorchCUDA, s.Driver, s.CUDA),
				Guide:  "cuda-driver", Evidence: map[string]any{"driver": s.Driver, "driver_cuda": s.CUDA, "torch_cuda": st.TorchCUDA}})
		}
	}
	if active != nil && active.Version != "" && inRange(active.Version, "2.12", "2.19") {
		fs = append(fs, checks.Finding{Severity: checks.Info,
			Title:  fmt.Sprintf("NCCL %s turns a full /dev/shm into a Bus error", active.Version),
			Detail: "NCCL 2.12 to 2.18 size shared-memory segments with ftruncate and then write them, so running out of /dev/shm kills the rank with SIGBUS instead of a clear message; 2.19 and later report 'failed to extend'. Keep /dev/shm roomy or upgrade.",
			Guide:  "shm-sigbus"})
	}
	return fs, nil
}

func orDash(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
