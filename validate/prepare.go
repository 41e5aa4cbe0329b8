package validate

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/gpu"
	"github.com/ncclwiz/ncclwiz/envvars"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/contain"
)

// CollectiveScript is the torch.distributed program torchrun runs.
//
//go:embed collective.py
var CollectiveScript []byte

// ProbeScript asks the interpreter which torch it has.
//
//go:embed probe.py
var ProbeScript []byte

// Install hints, each from the project's own instructions.
const (
	hintTorch = "install PyTorch with CUDA into the interpreter your training uses (https://pytorch.org/get-started/locally/, e.g. `pip install torch`), " +
		"or point ncclwiz at it with --python /path/to/venv/bin/python"
	hintNCCLTests = "build nccl-tests (needs CUDA and NCCL): `git clone https://github.com/NVIDIA/nccl-tests && make -C nccl-tests` " +
		"(add CUDA_HOME=… NCCL_HOME=… if they are not in /usr/local/cuda and /usr), then pass --nccl-tests nccl-tests/build"
	hintNoGPU = "without a GPU, `ncclwiz check` still inspects /dev/shm, processes and the environment. Run `ncclwiz test` on the GPU server itself"
)

// probeInfo is probe.py's answer.
type probeInfo struct {
	Python        string `json:"python"`
	Executable    string `json:"executable"`
	Error         string `json:"error"`
	Torch         string `json:"torch"`
	CUDA          string `json:"cuda"`
	CUDAAvailable bool   `json:"cuda_available"`
	DeviceCount   int    `json:"device_count"`
	CUDAError     string `json:"cuda_error"`
	Distributed   bool   `json:"distributed"`
	NCCLAvailable bool   `json:"nccl_available"`
	NCCL          string `json:"nccl"`
	RunModule     *bool  `json:"run_module"`
}

// Plan is what Run will do; Prepare builds it without starting any GPU work.
type Plan struct {
	Backend  string
	Launcher string
	// Python and Torch describe the interpreter (torchrun backend);
	// PythonFrom says which rule chose it (gpu.JobPython).
	Python, PythonFrom, Torch, NCCL string
	GPUs                            int
	Rungs                           []Rung
	// Skipped rungs, with the reason, in ladder order.
	Skipped map[string]string
	// Candidate is the fix environment and where it came from.
	Candidate      []string
	CandidateLabel string
	Notes          []string

	h         *host.Host
	opts      Options
	snap      *Snapshot
	visible   []int
	visErr    string
	python    string
	torchrun  string // empty: python -m torch.distributed.run
	perf      string
	perfJSON  bool
	baseEnv   []string
	pathEnv   string
	probe     probeInfo
	tmpDir    string
	runID     string
	sizes     []int64
	maxBytes  int64
	tolerance float64
}

var reEnvKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// launcherVars are set by an outer launcher; inherited, they would make
// torchrun or the script believe they are part of another job.
var launcherVars = map[string]bool{
	"RANK": true, "WORLD_SIZE": true, "LOCAL_RANK": true, "LOCAL_WORLD_SIZE": true, "GROUP_RANK": true,
	"ROLE_RANK": true, "ROLE_WORLD_SIZE": true, "MASTER_ADDR": true, "MASTER_PORT": true, "NODE_RANK": true,
}

// forcedVars are set by the test itself: it needs NCCL's INFO lines on
// stdout to see the transports.
var forcedVars = map[string]bool{"NCCL_DEBUG": true, "NCCL_DEBUG_SUBSYS": true, "NCCL_DEBUG_FILE": true}

// Prepare finds the GPUs and a backend and lays out the ladder. It returns
// a *CannotRunError (wrapped) when nothing can run, with what to install.
func Prepare(ctx context.Context, h *host.Host, opts Options) (plan *Plan, err error) {
	if h == nil {
		return nil, errors.New("validate: no host")
	}
	if h.Simulated {
		return nil, newCannotRun([]string{"this is a simulated practice server: there are no real GPUs to launch NCCL on"},
			[]string{"run `ncclwiz test` without --scenario on a machine with GPUs"})
	}
	if h.Kind == "fixture" {
		return nil, newCannotRun([]string{"the machine is read from a fixture tree: a collective test needs the real machine"}, nil)
	}
	p := &Plan{h: h, opts: opts, Skipped: map[string]string{}}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if err := p.setOptions(); err != nil {
		return nil, err
	}
	p.baseEnv, p.Notes = baseEnv(h.Env)
	p.pathEnv = envGet(p.baseEnv, "PATH")
	p.Notes = append(p.Notes, ncclConfNotes(h, envGet(p.baseEnv, "HOME"))...)

	if opts.GPUs != nil {
		s := *opts.GPUs
		p.snap = &s
	} else {
		s := probeGPUs(ctx, h)
		p.snap = &s
	}
	cvd, cvdSet := h.LookupEnv("CUDA_VISIBLE_DEVICES")
	p.visible, p.visErr = visibleDevices(p.snap, cvd, cvdSet)

	var reasons, hints []string
	gpuReason := p.gpuProblem(cvd, cvdSet)

	backend := opts.Backend
	if backend == "" {
		backend = BackendAuto
	}
	var torchWhy, ntWhy string
	switch backend {
	case BackendAuto, BackendTorchrun:
		torchWhy = p.findTorch(ctx)
		if torchWhy == "" {
			p.Backend = BackendTorchrun
		} else if backend == BackendAuto {
			ntWhy = p.findNCCLTests(ctx)
			if ntWhy == "" {
				p.Backend = BackendNCCLTests
			}
		}
	case BackendNCCLTests:
		ntWhy = p.findNCCLTests(ctx)
		if ntWhy == "" {
			p.Backend = BackendNCCLTests
		}
	default:
		return nil, fmt.Errorf("unknown backend %q (want auto, torchrun or nccl-tests)", backend)
	}

	// GPU count: the override, else torch's view (it honours
	// CUDA_VISIBLE_DEVICES exactly as the training will), else NVML's.
	switch {
	case opts.NGPUs > 0:
		p.GPUs = opts.NGPUs
	case p.Backend == BackendTorchrun:
		p.GPUs = p.probe.DeviceCount
		if p.snap.State == "ok" && p.visErr == "" && len(p.visible) != p.GPUs {
			p.Notes = append(p.Notes, fmt.Sprintf("NVML sees %d visible GPUs but torch sees %d; the test uses torch's count", len(p.visible), p.GPUs))
		}
	case p.snap.State == "ok":
		p.GPUs = len(p.visible)
	}
	if p.Backend == BackendTorchrun && p.GPUs > 0 {
		gpuReason = "" // torch sees GPUs even if NVML could not say more
	}
	if p.Backend == BackendNCCLTests && p.GPUs == 0 {
		if gpuReason == "" {
			gpuReason = "cannot count the GPUs without NVML (" + p.snap.State + ")"
		}
		hints = append(hints, "if this machine does have GPUs that NVML cannot report, pass --gpus N")
	}
	if gpuReason != "" {
		reasons = append(reasons, gpuReason)
	}
	if p.Backend == "" {
		if torchWhy != "" {
			reasons = append(reasons, "the torchrun backend cannot be used: "+torchWhy)
			hints = append(hints, hintTorch)
		}
		if ntWhy != "" {
			reasons = append(reasons, "the nccl-tests backend cannot be used: "+ntWhy)
			hints = append(hints, hintNCCLTests)
		}
	}
	if len(reasons) > 0 {
		if gpuReason != "" {
			hints = append(hints, hintNoGPU)
		}
		return nil, newCannotRun(reasons, hints)
	}
	if err := p.layout(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Plan) setOptions() error {
	o := p.opts
	p.maxBytes = o.MaxBytes
	if p.maxBytes <= 0 {
		p.maxBytes = DefaultMaxBytes
	}
	if p.maxBytes < 8 {
		return fmt.Errorf("max message size %d is below 8 bytes", p.maxBytes)
	}
	p.tolerance = o.Tolerance
	if p.tolerance <= 0 {
		p.tolerance = DefaultTolerance
	}
	if p.tolerance > 1 {
		return fmt.Errorf("tolerance %.2f is above 1", p.tolerance)
	}
	if p.opts.Timeout <= 0 {
		p.opts.Timeout = DefaultTimeout
	}
	if p.opts.Grace <= 0 {
		p.opts.Grace = 5 * time.Second
	}
	switch o.Contain {
	case contain.ModeAuto, contain.ModeNamespace, contain.ModeSubreaper:
	default:
		return fmt.Errorf("unknown containment %q (want %s or %s)", o.Contain, contain.ModeNamespace, contain.ModeSubreaper)
	}
	p.sizes = torchSizes(p.maxBytes)
	for _, kv := range o.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !reEnvKey.MatchString(k) {
			// NAME=value, not KEY=VALUE: errors pass the secret redactor.
			return fmt.Errorf("--env %q: want NAME=value with a valid variable name", kv)
		}
		if strings.ContainsAny(v, "\x00\n") {
			return fmt.Errorf("--env %s: the value holds a newline or NUL byte", k)
		}
	}
	for _, id := range o.Rungs {
		if !knownRung(id) {
			return fmt.Errorf("unknown rung %q (want %s)", id, strings.Join(ladderIDs, ", "))
		}
	}
	return nil
}

var ladderIDs = []string{RungSingle, RungAll, RungSHM, RungNet, RungFix}

func knownRung(id string) bool {
	for _, r := range ladderIDs {
		if r == id {
			return true
		}
	}
	return false
}

// torchSizes goes from 8 bytes up by x16 and ends at maxBytes, with the
// large sizes (≥ largeMin) where bandwidth is judged.
func torchSizes(maxBytes int64) []int64 {
	var out []int64
	for s := int64(8); s < maxBytes && s < largeMin; s *= 16 {
		out = append(out, s)
	}
	if maxBytes > largeMin {
		out = append(out, largeMin)
	}
	return append(out, maxBytes)
}

func (p *Plan) gpuProblem(cvd string, cvdSet bool) string {
	s := p.snap
	switch s.State {
	case gpu.StateOK:
		if p.visErr != "" {
			return p.visErr
		}
		if len(s.Devices) == 0 {
			return "no NVIDIA GPU found (NVML lists none)"
		}
		if len(p.visible) == 0 {
			return fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q hides every GPU", cvd)
		}
		for _, i := range p.visible {
			d := s.Devices[i]
			if d.Lost {
				p.Notes = append(p.Notes, fmt.Sprintf("GPU %d has fallen off the bus (NVML: GPU is lost); rungs that use it will fail. Check the kernel log for Xid errors (`ncclwiz guides gpu-xid`)", d.Index))
			}
		}
		return ""
	case gpu.StateNoDriver, gpu.StateNoNVML:
		return "no usable GPU: " + orDefault(s.Detail, "no NVIDIA driver (NVML cannot be loaded)")
	case gpu.StateUnavailable:
		return "cannot see the GPUs: " + orDefault(s.Detail, "this build has no NVML (static -tags nonvml build)")
	case gpu.StateNoPermission:
		return "no permission to open the GPUs (/dev/nvidia*)" + detail(s.Detail)
	case gpu.StateMismatch:
		return "the NVIDIA kernel module and user-space driver versions differ (reboot or reinstall the driver)" + detail(s.Detail)
	case gpu.StateGPULost:
		return "a GPU has fallen off the bus or is lost (see dmesg for Xid errors)" + detail(s.Detail)
	}
	return "GPU state " + s.State + detail(s.Detail)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func detail(d string) string {
	if d == "" {
		return ""
	}
	return " (" + d + ")"
}

// findTorch resolves the interpreter, runs probe.py and picks the launcher.
// It returns "" when torchrun can run, else why not.
func (p *Plan) findTorch(ctx context.Context) string {
	py, from, why := p.resolvePython(ctx)
	if why != "" {
		return why
	}
	p.python, p.Python, p.PythonFrom = py, py, from
	if err := p.ensureTmp(); err != nil {
		return err.Error()
	}
	probePath := filepath.Join(p.tmpDir, "probe.py")
	if err := os.WriteFile(probePath, ProbeScript, 0o600); err != nil {
		return fmt.Sprintf("write %s: %v", probePath, err)
	}
	var out []string
	env := append(append([]string{}, p.baseEnv...), MarkerVar+"="+p.ensureRunID())
	res, err := runProcess(ctx, procSpec{
		Path: py, Args: []string{probePath}, Env: env, Dir: p.tmpDir, Marker: p.runID, TmpDir: p.tmpDir, Contain: p.opts.Contain,
		Timeout: 2 * time.Minute, Grace: 2 * time.Second,
		OnLine: func(s string) {
			if len(out) < 200 {
				out = append(out, s)
			}
		},
	})
	if err != nil {
		return fmt.Sprintf("cannot run %s: %v", py, err)
	}
	if res.TimedOut {
		return fmt.Sprintf("%s did not answer within 2 minutes when importing torch", py)
	}
	if res.Canceled {
		return "interrupted"
	}
	found := false
	for _, l := range out {
		if i := strings.Index(l, "NCCLWIZ_PROBE "); i >= 0 {
			if err := json.Unmarshal([]byte(l[i+len("NCCLWIZ_PROBE "):]), &p.probe); err == nil {
				found = true
			}
		}
	}
	if !found {
		last := ""
		if len(out) > 0 {
			last = ": " + out[len(out)-1]
		}
		return fmt.Sprintf("%s did not run the probe (exit %d)%s", py, res.ExitCode, last)
	}
	pr := p.probe
	ver := ""
	if pr.Python != "" {
		ver = " (Python " + pr.Python + ")"
	}
	switch {
	case pr.Error != "":
		how := from + "; choose another with --python"
		if strings.HasPrefix(from, "--python") {
			how = "given with --python"
		}
		return fmt.Sprintf("%s%s, the job's Python (%s), cannot import torch: %s", py, ver, how, pr.Error)
	case pr.CUDA == "":
		return fmt.Sprintf("torch %s in %s (%s) is a CPU-only build (torch.version.cuda is None): an NCCL job cannot run with it", pr.Torch, py, from)
	case pr.CUDAError != "":
		return fmt.Sprintf("torch %s cannot initialise CUDA: %s", pr.Torch, pr.CUDAError)
	case !pr.Distributed || !pr.NCCLAvailable:
		return fmt.Sprintf("torch %s in %s was built without NCCL support (torch.distributed.is_nccl_available() is False)", pr.Torch, py)
	case !pr.CUDAAvailable || pr.DeviceCount == 0:
		return fmt.Sprintf("torch %s sees no CUDA device (torch.cuda.is_available() is False)", pr.Torch)
	case pr.RunModule != nil && !*pr.RunModule:
		return fmt.Sprintf("torch %s in %s has no torch.distributed.run module, which torchrun needs: upgrade torch", pr.Torch, py)
	case p.opts.NGPUs > pr.DeviceCount:
		return fmt.Sprintf("--gpus %d but torch sees only %d CUDA devices", p.opts.NGPUs, pr.DeviceCount)
	}
	p.Torch, p.NCCL = pr.Torch, pr.NCCL
	dir := filepath.Dir(py)
	if tr := filepath.Join(dir, "torchrun"); isExec(tr) {
		// The entry point installed next to the interpreter belongs to it.
		p.torchrun, p.Launcher = tr, tr
	} else {
		p.Launcher = py + " -m torch.distributed.run"
	}
	return ""
}

// resolvePython finds the interpreter of the user's training by the one
// rule nccl.stack uses too (gpu.JobPython): --python, the job's ranks'
// venv or interpreter, the active venv or conda env, then PATH. It
// returns the interpreter and where it came from, or why there is none.
func (p *Plan) resolvePython(ctx context.Context) (py, from, why string) {
	explicit := p.opts.Python
	if explicit == "" {
		explicit = p.h.Python
	}
	r := gpu.JobPython(ctx, p.h, explicit)
	switch {
	case r.Path == "":
		return "", "", r.Why
	case strings.Contains(explicit, "/") && !isExec(r.Path):
		return "", "", fmt.Sprintf("--python %s is not an executable file", explicit)
	}
	return r.Path, r.From, ""
}

// findNCCLTests locates all_reduce_perf and asks it whether it can write
// JSON (-J, nccl-tests v2.18.5+). It returns "" when it can run.
func (p *Plan) findNCCLTests(ctx context.Context) string {
	var path string
	if d := p.opts.NCCLTestsDir; d != "" {
		for _, c := range []string{filepath.Join(d, "all_reduce_perf"), filepath.Join(d, "build", "all_reduce_perf")} {
			if isExec(c) {
				path = c
				break
			}
		}
		if path == "" {
			return fmt.Sprintf("no executable all_reduce_perf in %s or %s/build", d, d)
		}
	} else if path = lookPath("all_reduce_perf", p.pathEnv); path == "" {
		return "all_reduce_perf is not on PATH"
	}
	p.perf, p.Launcher = path, path
	if err := p.ensureTmp(); err != nil {
		return err.Error()
	}
	var usage strings.Builder
	env := append(append([]string{}, p.baseEnv...), MarkerVar+"="+p.ensureRunID())
	res, err := runProcess(ctx, procSpec{
		Path: path, Args: []string{"-h"}, Env: env, Dir: p.tmpDir, Marker: p.runID, TmpDir: p.tmpDir, Contain: p.opts.Contain,
		Timeout: 30 * time.Second, Grace: time.Second,
		OnLine: func(s string) {
			if usage.Len() < 64<<10 {
				usage.WriteString(s + "\n")
			}
		},
	})
	if err != nil {
		return fmt.Sprintf("cannot run %s: %v", path, err)
	}
	if res.TimedOut || res.ExitCode != 0 {
		u := strings.TrimSpace(usage.String())
		if i := strings.LastIndexByte(u, '\n'); i >= 0 {
			u = u[i+1:]
		}
		return fmt.Sprintf("%s -h failed (exit %d): %s", path, res.ExitCode, u)
	}
	p.perfJSON = strings.Contains(usage.String(), "--output_file")
	return ""
}

func (p *Plan) ensureTmp() error {
	if p.tmpDir != "" {
		return nil
	}
	// A test killed (SIGKILL) left its directory, and if its keeper was
	// killed too, its processes: end and remove those whose owner is
	// provably gone.
	p.Notes = append(p.Notes, contain.SweepRuns(os.TempDir(), MarkerVar)...)
	// The run ID in the name lets the next run find this run's processes
	// should ncclwiz and its keeper both be killed.
	d, err := os.MkdirTemp("", contain.TmpPrefix+p.ensureRunID()+"-")
	if err != nil {
		return fmt.Errorf("private temporary directory: %w", err)
	}
	if err := os.Chmod(d, 0o700); err != nil {
		os.RemoveAll(d)
		return fmt.Errorf("private temporary directory: %w", err)
	}
	if err := contain.ClaimTmp(d); err != nil {
		os.RemoveAll(d)
		return fmt.Errorf("private temporary directory: %w", err)
	}
	p.tmpDir = d
	return nil
}

func (p *Plan) ensureRunID() string {
	if p.runID == "" {
		p.runID = newRunID()
	}
	return p.runID
}

// Close removes the plan's private temporary directory.
func (p *Plan) Close() {
	if p != nil && p.tmpDir != "" {
		os.RemoveAll(p.tmpDir)
		p.tmpDir = ""
	}
}

// layout builds the rungs for the GPU count and the candidate environment.
func (p *Plan) layout() error {
	n := p.GPUs
	want := map[string]bool{}
	if len(p.opts.Rungs) == 0 {
		for _, id := range ladderIDs {
			want[id] = true
		}
	} else {
		for _, id := range p.opts.Rungs {
			want[id] = true
		}
	}
	p.Candidate, p.CandidateLabel = p.candidate()
	if want[RungFix] && len(p.Candidate) > 0 {
		if n >= 2 {
			want[RungAll] = true
		} else {
			want[RungSingle] = true
		}
	}
	multi := "needs at least 2 GPUs: with one GPU NCCL connects no peers, so P2P, shared memory and the network are never used"
	for _, id := range ladderIDs {
		if !want[id] {
			continue
		}
		r := Rung{ID: id}
		switch id {
		case RungSingle:
			r.Title, r.Ranks = "one GPU: driver, CUDA and NCCL start and compute correctly", 1
		case RungAll:
			r.Title, r.Ranks = fmt.Sprintf("all %d GPUs with NCCL's defaults", n), n
		case RungSHM:
			r.Title, r.Ranks = "shared memory only (P2P off)", n
			r.Env = []string{"NCCL_P2P_DISABLE=1"}
		case RungNet:
			r.Title, r.Ranks = "network only (P2P and shared memory off)", n
			r.Env = []string{"NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1"}
		case RungFix:
			r.Title, r.Ranks = "the candidate fix: "+p.CandidateLabel, max(n, 1)
			if n < 2 {
				r.Ranks = 1
			}
			r.Env = p.Candidate
			if len(p.Candidate) == 0 {
				p.Skipped[id] = "no candidate environment: pass --env NAME=value (or set NCCL_* variables in your shell)"
				continue
			}
		}
		if r.Ranks >= 2 || id == RungSingle || id == RungFix {
			p.Rungs = append(p.Rungs, r)
		} else {
			p.Skipped[id] = multi
		}
	}
	if n == 1 {
		p.Notes = append(p.Notes, "Only one GPU is visible: the test proves that the driver, CUDA, "+
			"torch/NCCL start and that a collective computes correct values on it. It cannot prove P2P "+
			"(NVLink/PCIe), shared memory or network transports; those appear only between two or more GPUs.")
	}
	return nil
}

// candidate returns the fix environment: --env, else the NCCL_* variables
// of the user's environment (which the defaults rung leaves out).
func (p *Plan) candidate() ([]string, string) {
	src := p.opts.Env
	label := ""
	if len(src) == 0 {
		for _, kv := range p.h.Env {
			if strings.HasPrefix(kv, "NCCL_") {
				src = append(src, kv)
			}
		}
		label = "your environment's NCCL settings"
	}
	m := map[string]string{}
	var keys []string
	for _, kv := range src {
		k, v, _ := strings.Cut(kv, "=")
		if forcedVars[k] {
			p.Notes = append(p.Notes, k+" is set by the test itself (it reads NCCL's INFO lines); "+k+"="+v+" is left out of the candidate")
			continue
		}
		if _, dup := m[k]; !dup {
			keys = append(keys, k)
		}
		m[k] = v
		if envvars.Governed(k) {
			v, ok := envvars.Lookup(k)
			switch {
			case !ok:
				msg := k + " is not a variable ncclwiz knows; NCCL ignores unknown names"
				if c := envvars.Closest(k); c != "" {
					msg += " (did you mean " + c + "?)"
				}
				p.Notes = append(p.Notes, msg)
			case !v.Suggestible():
				msg := fmt.Sprintf("%s is %s", k, v.Status)
				if v.ReplacedBy != "" {
					msg += "; use " + v.ReplacedBy
				}
				p.Notes = append(p.Notes, msg)
			}
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+m[k])
	}
	if label == "" {
		label = strings.Join(out, " ")
	}
	return out, label
}

// ncclConfNotes reports NCCL configuration files: NCCL reads
// $HOME/.nccl.conf (or $NCCL_CONF_FILE, which the test leaves out) and
// /etc/nccl.conf, and applies every variable the environment does not set
// (src/misc/param.cc initEnvFunc, setenv without overwrite; env.rst). Their
// settings therefore reach every rung, the defaults rung included.
func ncclConfNotes(h *host.Host, home string) []string {
	var files []string
	if home != "" {
		files = append(files, filepath.Join(home, ".nccl.conf"))
	}
	files = append(files, "/etc/nccl.conf")
	var notes []string
	for _, f := range files {
		b, err := h.ReadFile(f)
		if err != nil {
			continue
		}
		var vars []string
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if k, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") && reEnvKey.MatchString(k) {
				vars = append(vars, k)
			}
		}
		if len(vars) > 0 {
			notes = append(notes, fmt.Sprintf("%s sets %s; NCCL applies it to every rung (the defaults rung included) wherever the environment does not set the variable",
				f, strings.Join(vars, ", ")))
		}
	}
	return notes
}

// baseEnv is the user's environment without NCCL_* (the defaults rung must
// be NCCL's defaults) and without an outer launcher's rank variables.
func baseEnv(user []string) ([]string, []string) {
	var out, stripped []string
	for _, kv := range user {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, "NCCL_"):
			stripped = append(stripped, k)
			continue
		case launcherVars[k], strings.HasPrefix(k, "TORCHELASTIC_"), strings.HasPrefix(k, "NCCLWIZ_"):
			continue
		}
		out = append(out, kv)
	}
	var notes []string
	if len(stripped) > 0 {
		sort.Strings(stripped)
		notes = append(notes, "Your environment sets "+strings.Join(stripped, ", ")+
			"; the ladder runs with NCCL's defaults and tries your settings as the candidate rung")
	}
	if _, ok := lookupEnv(out, "OMP_NUM_THREADS"); !ok {
		out = append(out, "OMP_NUM_THREADS=1")
	}
	return append(out, "PYTHONUNBUFFERED=1"), notes
}

func lookupEnv(env []string, k string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], k+"="); ok {
			return v, true
		}
	}
	return "", false
}

func envGet(env []string, k string) string {
	v, _ := lookupEnv(env, k)
	return v
}

// setEnv returns env with each KEY=VALUE of set replacing earlier values.
func setEnv(env []string, set ...string) []string {
	keys := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// lookPath searches the diagnosed environment's PATH (not ncclwiz's own).
func lookPath(name, path string) string {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // never run a program from the current directory
		}
		if f := filepath.Join(dir, name); isExec(f) {
			return f
		}
	}
	return ""
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// newRunID is the marker value: random, so that two runs never match.
func newRunID() string { return rand.Text() }
