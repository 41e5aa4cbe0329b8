package netcheck

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/envvars"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/report"
)

// fixture loads testdata/<name> with extra environment variables.
func fixture(t *testing.T, name string, env ...string) *host.Host {
	t.Helper()
	h, err := host.LoadFixture(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	h.Env = append(h.Env, env...)
	return h
}

// findTitle returns the first finding whose title contains sub.
func findTitle(fs []checks.Finding, sub string) *checks.Finding {
	for i := range fs {
		if strings.Contains(fs[i].Title, sub) {
			return &fs[i]
		}
	}
	return nil
}

func titles(fs []checks.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n  [" + f.Severity.String() + "] " + f.Title)
	}
	return b.String()
}

// vetFindings checks the conventions every finding of this package keeps:
// evidence survives the report's sanitiser (no JSON null), recommended
// variables are suggestible, guides and fixes are the contract's.
func vetFindings(t *testing.T, fs []checks.Finding) {
	t.Helper()
	guides := map[string]bool{"socket-interface": true, "socket-connect": true, "ib-roce": true, "memlock": true, "p2p-acs-iommu": true,
		"port-clash": true, "rendezvous-timeout": true, "multi-node-basics": true}
	fixes := map[string]bool{"env.export": true, "limits.memlock": true, "proc.stale": true}
	for _, f := range fs {
		_ = report.SanitizeFinding(f)
		if f.Guide != "" && !guides[f.Guide] {
			t.Errorf("%q: guide %q is not one of this package's", f.Title, f.Guide)
		}
		for _, x := range f.Fixes {
			if !fixes[x] {
				t.Errorf("%q: fix %q unknown", f.Title, x)
			}
		}
		rec, _ := f.Evidence["recommended_env"].(map[string]string)
		why, _ := f.Evidence["recommended_env_reason"].(map[string]string)
		for k := range rec {
			v, ok := envvars.Lookup(k)
			if !ok || !v.Suggestible() {
				t.Errorf("%q recommends %s, which is not suggestible", f.Title, k)
			}
			if why[k] == "" {
				t.Errorf("%q recommends %s without a reason", f.Title, k)
			}
		}
		if len(rec) > 0 && !contains(f.Fixes, "env.export") {
			t.Errorf("%q recommends env without the env.export fix", f.Title)
		}
		if f.Severity.IsProblem() && f.Guide == "" {
			t.Errorf("problem %q has no guide", f.Title)
		}
	}
}

func recEnv(f *checks.Finding) map[string]string {
	if f == nil {
		return nil
	}
	m, _ := f.Evidence["recommended_env"].(map[string]string)
	return m
}

func runRDMAOn(t *testing.T, h *host.Host) []checks.Finding {
	t.Helper()
	fs, err := runRDMA(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	vetFindings(t, fs)
	return fs
}

func TestRDMAHealthy(t *testing.T) {
	fs := runRDMAOn(t, fixture(t, "ib-healthy"))
	if _, w := checks.Problems(fs); w != 0 {
		t.Fatalf("healthy IB flagged:%s", titles(fs))
	}
	s := findTitle(fs, "2 RDMA ports, 2 ACTIVE")
	if s == nil || !strings.Contains(s.Title, "mlx5_0:1 InfiniBand ACTIVE 200 Gb/sec") {
		t.Fatalf("summary missing ports:%s", titles(fs))
	}
	devs := s.Evidence["devices"].([]IBDevice)
	if devs[0].Ports[0].GIDs != 1 || devs[0].Ports[0].NetDevs[0] != "ib0" || devs[0].FWVer != "20.39.1002" {
		t.Errorf("device details: %+v", devs[0])
	}
	if findTitle(fs, "nvidia-peermem is loaded") == nil || findTitle(fs, "unlimited, as RDMA needs") == nil {
		t.Errorf("GPUDirect and memlock not confirmed:%s", titles(fs))
	}
}

func TestRDMAHealthyWithBadSettings(t *testing.T) {
	tests := []struct {
		name, env, want string
		sev             checks.Severity
		rec             map[string]string
	}{
		{"IB disabled although healthy", "NCCL_IB_DISABLE=1", "NCCL_IB_DISABLE=1 although 2 RDMA ports are ACTIVE", checks.Warn, map[string]string{"NCCL_IB_DISABLE": "0"}},
		{"HCA from another machine", "NCCL_IB_HCA=mlx5_4", "selects no ACTIVE RDMA port", checks.Error, map[string]string{"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}},
		{"HCA port that does not exist", "NCCL_IB_HCA==mlx5_0:2,mlx5_1:1", "names a port that mlx5_0 does not have", checks.Warn, nil},
		{"HCA exclusion of everything", "NCCL_IB_HCA=^mlx5", "selects no ACTIVE RDMA port", checks.Error, nil},
		{"HCA prefix", "NCCL_IB_HCA=mlx5_0", "selects mlx5_0:1 (ACTIVE)", checks.OK, nil},
		{"HCA exact list", "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1", "selects mlx5_0:1, mlx5_1:1 (ACTIVE)", checks.OK, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := runRDMAOn(t, fixture(t, "ib-healthy", tt.env))
			f := findTitle(fs, tt.want)
			if f == nil {
				t.Fatalf("no finding %q:%s", tt.want, titles(fs))
			}
			if f.Severity != tt.sev {
				t.Errorf("severity %s, want %s", f.Severity, tt.sev)
			}
			for k, v := range tt.rec {
				if recEnv(f)[k] != v {
					t.Errorf("recommended %s=%q, want %q", k, recEnv(f)[k], v)
				}
			}
		})
	}
}

func TestRDMAPrefixOvermatch(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"mlx5_1", "mlx5_10", "mlx5_11"} {
		for f, c := range map[string]string{"state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "InfiniBand", "rate": "400 Gb/sec (4X NDR)", "gids/0": "fe80:0000:0000:0000:0000:0000:0000:0001"} {
			p := filepath.Join(dir, "sys/class/infiniband", d, "ports/1", f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(c+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, err := host.FromSpec(dir, host.FixtureSpec{Env: map[string]string{"NCCL_IB_HCA": "mlx5_1"}})
	if err != nil {
		t.Fatal(err)
	}
	fs := runRDMAOn(t, h)
	f := findTitle(fs, "entry mlx5_1 is a prefix: it also selects mlx5_10, mlx5_11")
	if f == nil || f.Severity != checks.Info {
		t.Fatalf("prefix over-match not explained:%s", titles(fs))
	}
}

func TestRDMAPortsDown(t *testing.T) {
	fs := runRDMAOn(t, fixture(t, "ib-down"))
	all := findTitle(fs, "no port is ACTIVE")
	if all == nil || all.Severity != checks.Warn || recEnv(all)["NCCL_IB_DISABLE"] != "1" {
		t.Fatalf("all-down not reported with NCCL_IB_DISABLE=1:%s", titles(fs))
	}
	sm := findTitle(fs, "mlx5_1:1: the link is up but the port is INIT")
	if sm == nil || sm.Severity != checks.Warn || !strings.Contains(sm.Detail, "subnet manager") {
		t.Errorf("INIT port without subnet manager not explained:%s", titles(fs))
	}
	if f := findTitle(fs, "Locked-memory limit (ulimit -l) is 8 MiB"); f == nil || f.Severity != checks.Info {
		t.Errorf("memlock with no active port should be info:%s", titles(fs))
	}
	// With IB explicitly disabled, the choice is consistent.
	fs = runRDMAOn(t, fixture(t, "ib-down", "NCCL_IB_DISABLE=1"))
	if f := findTitle(fs, "NCCL uses sockets, consistently"); f == nil || f.Severity != checks.Info {
		t.Errorf("IB disabled with all ports down:%s", titles(fs))
	}
	if findTitle(fs, "no port is ACTIVE") != nil {
		t.Error("recommends disabling what is already disabled")
	}
}

func TestRDMAMemlockAndPeermemWhenActive(t *testing.T) {
	// ib-healthy's ports with ib-down's limits and modules.
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "ib-healthy"), dir)
	copyTree(t, filepath.Join("testdata", "ib-down", "proc"), filepath.Join(dir, "proc"))
	h, err := host.LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs := runRDMAOn(t, h)
	m := findTitle(fs, "RDMA needs it unlimited")
	if m == nil || m.Severity != checks.Warn || !contains(m.Fixes, "limits.memlock") || m.Guide != "memlock" {
		t.Fatalf("finite memlock with active RDMA:%s", titles(fs))
	}
	g := findTitle(fs, "nvidia-peermem is not loaded")
	if g == nil || g.Severity != checks.Warn || !strings.Contains(g.Detail, "modprobe nvidia-peermem") {
		t.Errorf("missing peermem with proprietary driver:%s", titles(fs))
	}
	// Open kernel modules on a 5.12+ kernel give DMA-BUF instead.
	write(t, filepath.Join(dir, "proc/driver/nvidia/version"), "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15\n")
	fs = runRDMAOn(t, h)
	if f := findTitle(fs, "DMA-BUF is available"); f == nil || f.Severity != checks.OK {
		t.Errorf("DMA-BUF path not recognised:%s", titles(fs))
	}
}

func TestRoCE(t *testing.T) {
	fs := runRDMAOn(t, fixture(t, "roce"))
	s := findTitle(fs, "2 RDMA ports, 2 ACTIVE")
	if s == nil || !strings.Contains(s.Title, "mlx5_0:1 RoCE ACTIVE 100 Gb/sec") {
		t.Fatalf("RoCE summary:%s", titles(fs))
	}
	f := findTitle(fs, "RoCE port mlx5_1:1 has only link-local RoCE v2 GIDs")
	if f == nil || f.Severity != checks.Warn || !strings.Contains(f.Title, "ens1f1np1") {
		t.Fatalf("RoCE port without IP not flagged:%s", titles(fs))
	}
	if findTitle(fs, "RoCE port mlx5_0:1") != nil {
		t.Errorf("port with an IPv4 RoCE v2 GID flagged:%s", titles(fs))
	}
	// A GID index copied from elsewhere: 5 is empty, 2 is RoCE v1.
	fs = runRDMAOn(t, fixture(t, "roce", "NCCL_IB_GID_INDEX=5", "NCCL_IB_HCA==mlx5_0"))
	if f := findTitle(fs, "NCCL_IB_GID_INDEX=5 points at an empty GID on mlx5_0:1"); f == nil || f.Severity != checks.Error {
		t.Errorf("empty GID index:%s", titles(fs))
	}
	fs = runRDMAOn(t, fixture(t, "roce", "NCCL_IB_GID_INDEX=2", "NCCL_IB_HCA==mlx5_0"))
	if f := findTitle(fs, "NCCL_IB_GID_INDEX=2 selects a IB/RoCE v1 GID on mlx5_0:1"); f == nil || f.Severity != checks.Warn {
		t.Errorf("RoCE v1 GID index:%s", titles(fs))
	}
	fs = runRDMAOn(t, fixture(t, "roce", "NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==mlx5_0"))
	if findTitle(fs, "NCCL_IB_GID_INDEX=3") != nil || findTitle(fs, "RoCE port mlx5_1:1") != nil {
		t.Errorf("a valid RoCE v2 index, or an unused port, flagged:%s", titles(fs))
	}
	// Without NCCL_IB_HCA both ports are used, and index 3 is empty on mlx5_1.
	fs = runRDMAOn(t, fixture(t, "roce", "NCCL_IB_GID_INDEX=3"))
	if f := findTitle(fs, "NCCL_IB_GID_INDEX=3 points at an empty GID on mlx5_1:1"); f == nil {
		t.Errorf("index 3 on the port without an address:%s", titles(fs))
	}
}

func TestRDMAMixedLinkLayers(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "ib-healthy"), dir)
	copyTree(t, filepath.Join("testdata", "roce", "sys/class/infiniband/mlx5_0"), filepath.Join(dir, "sys/class/infiniband/mlx5_2"))
	h, err := host.LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	h.Env = append(h.Env, "NCCL_IB_HCA=mlx5")
	fs := runRDMAOn(t, h)
	if f := findTitle(fs, "mixes InfiniBand and RoCE ports"); f == nil || f.Severity != checks.Warn {
		t.Fatalf("mixed link layers:%s", titles(fs))
	}
}

func TestNoRDMA(t *testing.T) {
	fs := runRDMAOn(t, fixture(t, "no-rdma"))
	if len(fs) != 1 || fs[0].Severity != checks.OK || !strings.Contains(fs[0].Title, "No RDMA devices") {
		t.Fatalf("no-RDMA machine:%s", titles(fs))
	}
	fs = runRDMAOn(t, fixture(t, "no-rdma", "NCCL_IB_HCA=mlx5_0", "NCCL_NET=IB"))
	if f := findTitle(fs, "NCCL_IB_HCA=mlx5_0 is set, but this machine has no RDMA devices"); f == nil || f.Severity != checks.Warn {
		t.Errorf("copied NCCL_IB_HCA:%s", titles(fs))
	}
	if f := findTitle(fs, "NCCL_NET=IB forces InfiniBand"); f == nil || f.Severity != checks.Error {
		t.Errorf("NCCL_NET=IB without IB:%s", titles(fs))
	}
}

func TestRDMAFromNCCLConf(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, filepath.Join("testdata", "ib-healthy"), dir)
	write(t, filepath.Join(dir, "etc/nccl.conf"), "NCCL_IB_DISABLE=1\n")
	h, err := host.LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs := runRDMAOn(t, h)
	if f := findTitle(fs, "NCCL_IB_DISABLE=1 (from /etc/nccl.conf)"); f == nil || f.Severity != checks.Warn {
		t.Fatalf("setting from /etc/nccl.conf not found:%s", titles(fs))
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies a fixture directory, keeping symlinks as symlinks.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			_ = os.Remove(target)
			return os.Symlink(l, target)
		case info.IsDir():
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
