//go:build cgo

package gpu

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/dotted"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
	"github.com/ncclwiz/ncclwiz/internal/nvml/gonvml"
)

// box fills every mock function the checks call, so a missing one shows
// up as a test failure (the mocks panic on nil functions).
type box struct {
	nvlinks int
	p2p     nvml.GpuP2PStatus
	procs   map[int][]nvml.ProcessInfo
	lost    map[int]bool
	perNUMA int
}

func (b box) wire(srv *server.Server) *server.Server {
	if b.perNUMA == 0 {
		b.perNUMA = len(srv.Devices)
	}
	for i, d := range srv.Devices {
		md, idx := d.(*server.Device), i
		busID := fmt.Sprintf("00000000:%02X:00.0", 0x18+idx)
		if b.lost[idx] {
			md.GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
		}
		md.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for j, c := range busID {
				p.BusId[j] = int8(c)
			}
			return p, nvml.SUCCESS
		}
		md.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
		md.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			if l >= b.nvlinks {
				return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		md.GetNvLinkVersionFunc = func(int) (uint32, nvml.Return) { return 4, nvml.SUCCESS }
		md.GetMaxPcieLinkGenerationFunc = func() (int, nvml.Return) { return 5, nvml.SUCCESS }
		md.GetMaxPcieLinkWidthFunc = func() (int, nvml.Return) { return 16, nvml.SUCCESS }
		md.GetMemoryAffinityFunc = func(int, nvml.AffinityScope) ([]uint, nvml.Return) {
			return []uint{1 << (idx / b.perNUMA)}, nvml.SUCCESS
		}
		md.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return b.procs[idx], nvml.SUCCESS }
		md.GetP2PStatusFunc = func(o nvml.Device, c nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			if c == nvml.P2P_CAPS_INDEX_NVLINK && b.nvlinks == 0 {
				return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
			}
			return b.p2p, nvml.SUCCESS
		}
		md.GetTopologyCommonAncestorFunc = func(o nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			if o.(*server.Device).Index/b.perNUMA != idx/b.perNUMA {
				return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
			}
			return nvml.TOPOLOGY_NODE, nvml.SUCCESS
		}
	}
	return srv
}

// hostWith wires lib (a go-nvml server or binding; nil for none) into a
// fixture host through the go-nvml adapter.
func hostWith(t *testing.T, lib nvml.Interface, files map[string]any, env map[string]string) *host.Host {
	t.Helper()
	h := ft.Tree(t, files, host.FixtureSpec{UID: 1000, Env: env})
	if lib != nil {
		h.NVML = gonvml.Wrap(lib)
	}
	return h
}

func sev(fs []checks.Finding, sub string) (checks.Severity, bool) {
	for _, f := range fs {
		if strings.Contains(f.Title, sub) {
			return f.Severity, true
		}
	}
	return checks.OK, false
}

func titles(fs []checks.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s: %s\n", f.Severity, f.Title)
	}
	return b.String()
}

func TestHealthyDGX(t *testing.T) {
	for name, srv := range map[string]*server.Server{"a100": dgxa100.New(), "h100": dgxh100.New()} {
		t.Run(name, func(t *testing.T) {
			h := hostWith(t, box{nvlinks: 12, p2p: nvml.P2P_STATUS_OK, perNUMA: 4}.wire(srv), nil, nil)
			s := Probe(context.Background(), h)
			if !s.OK() || len(s.Devices) != 8 || s.CUDA != "12.4" || s.Driver != "550.54.15" {
				t.Fatalf("probe = %+v", s)
			}
			if s.Devices[3].BusID != "00000000:1B:00.0" || s.Devices[0].NVLinkActive != 12 || s.Devices[0].CC == "" {
				t.Errorf("device = %+v", s.Devices[3])
			}
			if s.Topology[0][1] != "NV12" || s.Topology[0][0] != "X" {
				t.Errorf("topology row 0 = %v", s.Topology[0])
			}
			for _, run := range []checks.Func{runInventory, runTopology, runProcesses, runVisible} {
				fs, err := run(context.Background(), h)
				if err != nil {
					t.Fatal(err)
				}
				if e, w := checks.Problems(fs); e+w != 0 {
					t.Errorf("healthy box reports problems:\n%s", titles(fs))
				}
			}
			fs, _ := runTopology(context.Background(), h)
			if !strings.Contains(fs[0].Title, "NVLink between every pair (NV12)") {
				t.Errorf("topology: %s", titles(fs))
			}
		})
	}
}

// accelerate's refusal (and with it NCCL_IB_DISABLE) depends on the driver:
// before 550.40.07 it insists on both variables; after, P2P alone is advised.
func TestConsumerPCIeWithoutP2P(t *testing.T) {
	rtx := gpus.Config{Name: "NVIDIA GeForce RTX 4090", Architecture: nvml.DEVICE_ARCH_ADA, Brand: nvml.BRAND_GEFORCE, MemoryMB: 24564, CudaMajor: 8, CudaMinor: 9}
	for _, c := range []struct {
		driver    string
		wantIB    bool
		wantInTxt string
	}{
		{"535.183.01", true, "accelerate refuses to start"},
		{"550.54.15", false, "NCCL_P2P_DISABLE=1 makes that choice explicit"},
	} {
		t.Run(c.driver, func(t *testing.T) {
			srv, err := server.New(server.WithGPUs(rtx, rtx), server.WithDriverVersion(c.driver), server.WithCUDADriverVersion(12020))
			if err != nil {
				t.Fatal(err)
			}
			h := hostWith(t, box{p2p: nvml.P2P_STATUS_NOT_SUPPORTED}.wire(srv), nil, nil)
			fs, err := runTopology(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			var f *checks.Finding
			for i := range fs {
				if fs[i].Guide == "consumer-gpu-p2p" {
					f = &fs[i]
				}
			}
			if f == nil || f.Severity != checks.Warn {
				t.Fatalf("no consumer-GPU finding:\n%s", titles(fs))
			}
			rec := f.Evidence["recommended_env"].(map[string]string)
			if rec["NCCL_P2P_DISABLE"] != "1" || (rec["NCCL_IB_DISABLE"] == "1") != c.wantIB || !strings.Contains(f.Detail, c.wantInTxt) {
				t.Errorf("recommended env = %v, detail %q", rec, f.Detail)
			}
		})
	}
}

func TestMixedModelsAndLostGPU(t *testing.T) {
	srv, _ := server.New(server.WithGPUs(gpus.A100_SXM4_80GB, gpus.H100_SXM5_80GB, gpus.H100_SXM5_80GB), server.WithCUDADriverVersion(12040))
	h := hostWith(t, box{p2p: nvml.P2P_STATUS_OK, lost: map[int]bool{2: true}}.wire(srv), nil, nil)
	fs, _ := runInventory(context.Background(), h)
	if s, ok := sev(fs, "Mixed GPU models"); !ok || s != checks.Warn {
		t.Errorf("mixed models:\n%s", titles(fs))
	}
	if s, ok := sev(fs, "GPU 2 (00000000:1A:00.0) has fallen off the bus"); !ok || s != checks.Error {
		t.Errorf("lost GPU:\n%s", titles(fs))
	}
	// Mixed GPUs make CUDA's and NVML's numbering differ.
	fs, _ = runVisible(context.Background(), h)
	if s, ok := sev(fs, "CUDA_DEVICE_ORDER is not PCI_BUS_ID"); !ok || s != checks.Warn {
		t.Errorf("device order:\n%s", titles(fs))
	}
}

func TestNoDriverOnThisMachine(t *testing.T) {
	h := hostWith(t, nvml.New(), nil, nil)
	s := Probe(context.Background(), h)
	if s.OK() {
		t.Skip("this machine has an NVIDIA driver")
	}
	if s.State != StateNoDriver || !strings.Contains(s.Detail, "no NVIDIA driver found") {
		t.Errorf("state %s: %s", s.State, s.Detail)
	}
	for _, run := range []checks.Func{runInventory, runProcesses, runTopology} {
		fs, err := run(context.Background(), h)
		if err != nil || fs[0].Severity != checks.Skipped || !strings.Contains(fs[0].Title, "no NVIDIA driver found") {
			t.Errorf("without a driver: %v\n%s", err, titles(fs))
		}
	}
}

func TestInitFailuresAreDistinct(t *testing.T) {
	for ret, want := range map[nvml.Return]string{
		nvml.ERROR_LIBRARY_NOT_FOUND: StateNoDriver, nvml.ERROR_DRIVER_NOT_LOADED: StateNoDriver, nvml.ERROR_NO_PERMISSION: StateNoPermission,
		nvml.ERROR_LIB_RM_VERSION_MISMATCH: StateMismatch, nvml.ERROR_GPU_IS_LOST: StateGPULost, nvml.ERROR_NOT_SUPPORTED: StateNotSupported,
	} {
		srv := dgxh100.New()
		srv.InitFunc = func() nvml.Return { return ret }
		// After a failed Init no other call may be made: make any call fail the test.
		srv.DeviceGetCountFunc = func() (int, nvml.Return) { t.Fatal("NVML called after a failed Init"); return 0, 0 }
		srv.ShutdownFunc = func() nvml.Return { t.Fatal("Shutdown after a failed Init"); return 0 }
		s := Probe(context.Background(), hostWith(t, srv, nil, nil))
		if s.State != want {
			t.Errorf("Init %d: state %s, want %s", ret, s.State, want)
		}
	}
}

// A rank whose launcher died still holds GPU memory.
func TestStaleRankHoldingGPUMemory(t *testing.T) {
	srv := box{nvlinks: 18, p2p: nvml.P2P_STATUS_OK, procs: map[int][]nvml.ProcessInfo{3: {{Pid: 4242, UsedGpuMemory: 30 << 30}}}}.wire(dgxh100.New())
	files := map[string]any{
		"/proc/4242/stat":    "4242 (python) S 1 4242 4242 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 5000 0 0\n",
		"/proc/4242/status":  "Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n",
		"/proc/4242/cmdline": "python\x00train.py\x00--lr\x003e-4\x00",
		"/proc/4242/environ": "RANK=3\x00LOCAL_RANK=3\x00WORLD_SIZE=8\x00TORCHELASTIC_RUN_ID=none\x00HF_TOKEN=hf_secretsecretsecretsecret\x00",
		// launcher gone: re-parented to the machine's init
		"/proc/1/stat":   "1 (systemd) S 0 1 1 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n",
		"/proc/1/status": "Name:\tsystemd\nUid:\t0\t0\t0\t0\nNSpid:\t1\n",
		"/proc/uptime":   "86400.00 100.00\n",
		"/etc/passwd":    "root:x:0:0::/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\n",
	}
	h := hostWith(t, srv, files, nil)
	fs, err := runProcesses(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := sev(fs, "leftover rank of a dead job holds 30 GiB of GPU memory")
	if !ok || s != checks.Warn {
		t.Fatalf("stale rank not flagged:\n%s", titles(fs))
	}
	list := fs[0].Evidence["processes"].([]map[string]any)
	if list[0]["user"] != "alice" || !strings.Contains(list[0]["command"].(string), "train.py") {
		t.Errorf("process evidence = %v", list[0])
	}
	rs, _ := FindStaleRanks(context.Background(), h)
	if len(rs) != 1 || rs[0].GPUMemory != 30<<30 {
		t.Errorf("FindStaleRanks = %+v", rs)
	}
}

func TestVisibleDevices(t *testing.T) {
	h := hostWith(t, box{nvlinks: 18, p2p: nvml.P2P_STATUS_OK}.wire(dgxh100.New()), nil, nil)
	devs := Probe(context.Background(), h).Devices
	tests := []struct {
		value   string
		problem string
		gpus    []int
	}{
		{"0,1,2,3", "", []int{0, 1, 2, 3}},
		{"4,5", "", []int{4, 5}},
		{"0,9,1", "index 9 but this machine has 8 GPUs", []int{0}},
		{"0,0", "GPU 0 is listed twice", []int{0}},
		{"abc", "not an index", nil},
		{devs[2].UUID[:12], "", []int{2}},
		{"GPU-ffffffff-ffff", "no GPU with this UUID here", nil},
		{"0,,1", "empty entry", []int{0}},
	}
	for _, tt := range tests {
		es := ParseVisible(tt.value, devs)
		var got []int
		problem := ""
		for _, e := range es {
			if e.Problem != "" {
				problem = e.Problem
				break
			}
			got = append(got, e.GPU)
		}
		if !strings.Contains(problem, tt.problem) || (tt.problem == "" && problem != "") || fmt.Sprint(got) != fmt.Sprint(tt.gpus) {
			t.Errorf("%q: gpus %v problem %q; want %v %q", tt.value, got, problem, tt.gpus, tt.problem)
		}
	}
	h.Env = append(h.Env, "CUDA_VISIBLE_DEVICES=")
	fs, _ := runVisible(context.Background(), h)
	if s, _ := sev(fs, "set but empty"); s != checks.Error {
		t.Errorf("empty value:\n%s", titles(fs))
	}
}

func TestFabricManager(t *testing.T) {
	base := map[string]any{"/dev/nvidia-nvswitch0": "", "/dev/nvidia-nvswitch1": "", "/dev/nvidiactl": "",
		"/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"}
	tests := []struct {
		name string
		cmds map[string]host.FixtureCommand
		sev  checks.Severity
		want string
	}{
		{"inactive", map[string]host.FixtureCommand{"systemctl is-active nvidia-fabricmanager": {Stdout: "inactive\n", Exit: 3}}, checks.Error, "nvidia-fabricmanager is inactive"},
		{"mismatch", map[string]host.FixtureCommand{"systemctl is-active nvidia-fabricmanager": {Stdout: "active\n"},
			"nv-fabricmanager --version": {Stdout: "Fabric Manager version is : 550.90.07\n"}}, checks.Error, "Fabric Manager 550.90.07 does not match driver 550.54.15"},
		{"good", map[string]host.FixtureCommand{"systemctl is-active nvidia-fabricmanager": {Stdout: "active\n"},
			"nv-fabricmanager --version": {Stdout: "Fabric Manager version is : 550.54.15\n"}}, checks.OK, "nvidia-fabricmanager is active"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ft.Tree(t, base, host.FixtureSpec{Commands: tt.cmds})
			fs, err := runFabric(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			if s, ok := sev(fs, tt.want); !ok || s != tt.sev {
				t.Errorf("got\n%s", titles(fs))
			}
		})
	}
	h := ft.Tree(t, map[string]any{"/dev/nvidiactl": ""}, host.FixtureSpec{})
	fs, _ := runFabric(context.Background(), h)
	if fs[0].Severity != checks.OK || !strings.Contains(fs[0].Title, "No NVSwitch") {
		t.Errorf("no switches: %s", titles(fs))
	}
}

func TestNCCLStack(t *testing.T) {
	sp := "/home/alice/venv/lib/python3.11/site-packages"
	torch := map[string]any{
		sp + "/torch/version.py":                           "__version__ = '2.4.0+cu121'\ndebug = False\ncuda: Optional[str] = '12.1'\n",
		sp + "/torch-2.4.0.dist-info/METADATA":             "Name: torch\nRequires-Dist: nvidia-nccl-cu12==2.20.5; platform_system == \"Linux\"\n",
		sp + "/nvidia_nccl_cu12-2.20.5.dist-info/METADATA": "Name: nvidia-nccl-cu12\n",
		sp + "/nvidia/nccl/lib/libnccl.so.2":               "",
		"/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3":      "",
		"/opt/custom-nccl/lib/libnccl.so.2.23.4":           "",
		"/home/alice/venv/bin/python":                      "",
	}
	env := map[string]string{"VIRTUAL_ENV": "/home/alice/venv"}
	// Issue 25 item 8: the torch read is the job's Python's, named; a CPU
	// build of torch is an error for an NCCL job.
	t.Run("CPU-only torch", func(t *testing.T) {
		cpu := map[string]any{"/home/alice/venv/bin/python": "", sp + "/torch/version.py": "__version__ = '1.13.0a0'\ndebug = False\ncuda = None\n"}
		h := hostWith(t, nil, cpu, env)
		fs, _ := runStack(context.Background(), h)
		if s, ok := sev(fs, "torch 1.13.0a0 in /home/alice/venv/bin/python ($VIRTUAL_ENV) is a CPU-only build: an NCCL job cannot run with it"); !ok || s != checks.Error {
			t.Errorf("got\n%s", titles(fs))
		}
	})
	t.Run("healthy wheel", func(t *testing.T) {
		h := hostWith(t, box{nvlinks: 18, p2p: nvml.P2P_STATUS_OK}.wire(dgxh100.New()), torch, env)
		fs, err := runStack(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(fs[0].Title, "torch 2.4.0+cu121 (CUDA 12.1) loads NCCL 2.20.5 from wheel") {
			t.Errorf("got\n%s", titles(fs))
		}
		if e, w := checks.Problems(fs); e+w != 0 {
			t.Errorf("problems:\n%s", titles(fs))
		}
	})
	t.Run("shadowing LD_LIBRARY_PATH", func(t *testing.T) {
		e := map[string]string{"VIRTUAL_ENV": "/home/alice/venv", "LD_LIBRARY_PATH": "/opt/custom-nccl/lib:/usr/local/cuda/lib64"}
		h := hostWith(t, box{nvlinks: 18, p2p: nvml.P2P_STATUS_OK}.wire(dgxh100.New()), torch, e)
		fs, _ := runStack(context.Background(), h)
		if s, ok := sev(fs, "LD_LIBRARY_PATH puts NCCL 2.23.4 ahead of the NCCL 2.20.5 torch was built with"); !ok || s != checks.Warn {
			t.Errorf("got\n%s", titles(fs))
		}
	})
	t.Run("driver too old for torch", func(t *testing.T) {
		srv := box{nvlinks: 18, p2p: nvml.P2P_STATUS_OK}.wire(dgxh100.New())
		srv.CudaDriverVersion = 11080
		srv.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 11080, nvml.SUCCESS }
		h := hostWith(t, srv, torch, env)
		fs, _ := runStack(context.Background(), h)
		if s, ok := sev(fs, "The driver supports CUDA 11.8 but torch was built for CUDA 12.1"); !ok || s != checks.Error {
			t.Errorf("got\n%s", titles(fs))
		}
	})
	t.Run("system NCCL in the SIGBUS range", func(t *testing.T) {
		h := hostWith(t, nil, map[string]any{"/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3": ""}, nil)
		fs, _ := runStack(context.Background(), h)
		if s, ok := sev(fs, "NCCL 2.18.3 turns a full /dev/shm into a Bus error"); !ok || s != checks.Info {
			t.Errorf("got\n%s", titles(fs))
		}
	})
	t.Run("nothing installed", func(t *testing.T) {
		h := hostWith(t, nil, nil, nil)
		fs, _ := runStack(context.Background(), h)
		if fs[0].Severity != checks.Info {
			t.Errorf("got\n%s", titles(fs))
		}
	})
}

func TestVersionHelpers(t *testing.T) {
	if cudaVersion(12040) != "12.4" || cudaVersion(11080) != "11.8" || cudaVersion(0) != "" {
		t.Error("cudaVersion")
	}
	if !dotted.Less("11.8", "12.1") || dotted.Less("12.10", "12.9") || !inRange("2.18.3", "2.12", "2.19") || inRange("2.19.1", "2.12", "2.19") {
		t.Error("version comparisons")
	}
	_ = os.Getpid
}
