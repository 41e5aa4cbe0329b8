package netcheck

import (
	"archive/tar"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
)

// iommuOn extracts testdata/iommu-on.tar, a sysfs tree of a machine with
// the IOMMU on, and returns its directory. It is a tar because sysfs names
// PCI devices 0000:18:00.0, and a ':' in a file name makes the Go module
// zip (hence go install of this module) invalid.
func iommuOn(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(filepath.Join("testdata", "iommu-on.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(hd.Name))
		switch hd.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(hd.Linkname, target)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(target, b, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func fixtureAt(t *testing.T, dir string, env ...string) *host.Host {
	t.Helper()
	h, err := host.LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	h.Env = append(h.Env, env...)
	return h
}

func runPCIeOn(t *testing.T, h *host.Host) []checks.Finding {
	t.Helper()
	fs, err := runPCIe(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	vetFindings(t, fs)
	return fs
}

func TestPCIeIOMMUOnWithACS(t *testing.T) {
	fs := runPCIeOn(t, fixtureAt(t, iommuOn(t)))
	s := fs[0]
	if !strings.Contains(s.Title, "IOMMU on (7 groups, translating); 2 NVIDIA GPUs on the PCI bus; bare metal") {
		t.Fatalf("summary: %s", s.Title)
	}
	gpus := s.Evidence["gpus"].([]GPU)
	if gpus[0].BDF != "0000:03:00.0" || gpus[0].GroupType != "DMA-FQ" || strings.Join(gpus[0].Bridges, ",") != "0000:00:01.0,0000:01:00.0,0000:02:08.0" {
		t.Errorf("GPU topology: %+v", gpus[0])
	}
	io := findTitle(fs, "The IOMMU translates GPU DMA")
	if io == nil || io.Severity != checks.Warn || !strings.Contains(io.Detail, "iommu=pt") || !strings.Contains(io.Detail, "NCCL_P2P_DISABLE=1") {
		t.Fatalf("IOMMU translation risk:%s", titles(fs))
	}
	acs := findTitle(fs, "ACS redirects peer-to-peer traffic on 3 PCIe bridges")
	if acs == nil || acs.Severity != checks.Warn {
		t.Fatalf("ACS redirect:%s", titles(fs))
	}
	cmds := acs.Evidence["commands"].([]string)
	if len(cmds) != 3 || cmds[0] != "sudo setpci -s 0000:01:00.0 ECAP_ACS+0x6.w=0000" {
		t.Errorf("commands: %v", cmds)
	}
	if !strings.Contains(strings.Join(acs.Evidence["bridges"].([]string), " "), "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+") {
		t.Errorf("ACSCtl text: %v", acs.Evidence["bridges"])
	}
	for _, r := range []string{"lost at reboot", "breaks VFIO", "slower"} {
		if !strings.Contains(acs.Detail, r) {
			t.Errorf("remedies lack the risk %q", r)
		}
	}
	// With the workaround set, both become informational.
	fs = runPCIeOn(t, fixtureAt(t, iommuOn(t), "NCCL_P2P_DISABLE=1"))
	if _, w := checks.Problems(fs); w != 0 || findTitle(fs, "already works around it") == nil {
		t.Errorf("workaround not recognised:%s", titles(fs))
	}
}

func TestPCIePassthroughAndUnprivileged(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, iommuOn(t), dir)
	// iommu=pt: identity domains; and configs as an unprivileged reader sees them (64 bytes).
	groups, _ := filepath.Glob(filepath.Join(dir, "sys/kernel/iommu_groups/*/type"))
	for _, g := range groups {
		write(t, g, "identity\n")
	}
	n := 0
	err := filepath.Walk(filepath.Join(dir, "sys/devices"), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.Name() != "config" {
			return err
		}
		n++
		return os.Truncate(p, 64)
	})
	if err != nil || n != 6 {
		t.Fatalf("truncated %d configs: %v", n, err)
	}
	h, err := host.LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	h.UID, h.EUID = 1000, 1000
	fs := runPCIeOn(t, h)
	if _, w := checks.Problems(fs); w != 0 {
		t.Fatalf("passthrough flagged:%s", titles(fs))
	}
	if f := findTitle(fs, "needs root to read"); f == nil || f.Severity != checks.Info || !strings.Contains(f.Detail, "sudo ncclwiz check --only host.pcie") {
		t.Errorf("unreadable ACS not explained:%s", titles(fs))
	}
	if !strings.Contains(fs[0].Title, "passthrough") {
		t.Errorf("summary: %s", fs[0].Title)
	}
}

func TestPCIeNoGPUAndVM(t *testing.T) {
	h := fixture(t, "no-rdma")
	fs := runPCIeOn(t, h)
	if len(fs) != 1 || !strings.Contains(fs[0].Title, "IOMMU off; 0 NVIDIA GPUs") {
		t.Fatalf("no GPU:%s", titles(fs))
	}
	dir := t.TempDir()
	copyTree(t, iommuOn(t), dir)
	write(t, filepath.Join(dir, "proc/cpuinfo"), "processor\t: 0\nflags\t\t: fpu vme hypervisor sse\n")
	h, err := host.LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs = runPCIeOn(t, h)
	if _, w := checks.Problems(fs); w != 0 {
		t.Errorf("a VM must not be told to disable ACS:%s", titles(fs))
	}
	if f := findTitle(fs, "This is a virtual machine"); f == nil || !strings.Contains(f.Detail, "ATS") {
		t.Errorf("VM advice missing:%s", titles(fs))
	}
}

func TestPCIeNeedlessP2PDisable(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, iommuOn(t), dir)
	if err := os.RemoveAll(filepath.Join(dir, "sys/kernel/iommu_groups")); err != nil {
		t.Fatal(err)
	}
	// ACS off everywhere: rewrite each bridge's control register.
	for _, c := range []string{"0000:00:01.0", "0000:00:01.0/0000:01:00.0", "0000:00:01.0/0000:01:00.0/0000:02:08.0", "0000:00:01.0/0000:01:00.0/0000:02:10.0"} {
		p := filepath.Join(dir, "sys/devices/pci0000:00", c, "config")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint16(b[0x148+6:], 0)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.LoadFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	h.Env = append(h.Env, "NCCL_P2P_DISABLE=1")
	fs := runPCIeOn(t, h)
	if f := findTitle(fs, "NCCL_P2P_DISABLE=1 is set, but nothing here calls for it"); f == nil || f.Severity != checks.Info {
		t.Fatalf("needless P2P disable:%s", titles(fs))
	}
	if _, w := checks.Problems(fs); w != 0 {
		t.Errorf("clean PCIe flagged:%s", titles(fs))
	}
}

func TestParseACS(t *testing.T) {
	cfg := make([]byte, 4096)
	// AER at 0x100 → vendor-specific at 0x140 → ACS at 0x180.
	binary.LittleEndian.PutUint32(cfg[0x100:], 0x0001|1<<16|0x140<<20)
	binary.LittleEndian.PutUint32(cfg[0x140:], 0x000b|1<<16|0x180<<20)
	binary.LittleEndian.PutUint32(cfg[0x180:], 0x000d|1<<16)
	binary.LittleEndian.PutUint16(cfg[0x186:], 0x0005)
	ctrl, present, readable := ParseACS(cfg)
	if !present || !readable || ctrl != 5 || acsText(ctrl) != "SrcValid+ TransBlk- ReqRedir+ CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-" {
		t.Errorf("ACS at 0x180: %x %v %v %s", ctrl, present, readable, acsText(ctrl))
	}
	if _, present, readable := ParseACS(cfg[:64]); present || readable {
		t.Error("64-byte config treated as readable")
	}
	loop := make([]byte, 4096)
	binary.LittleEndian.PutUint32(loop[0x100:], 0x0001|1<<16|0x100<<20) // points at itself
	if _, present, _ := ParseACS(loop); present {
		t.Error("self-loop")
	}
}

func FuzzParseACS(f *testing.F) {
	cfg := make([]byte, 0x200)
	binary.LittleEndian.PutUint32(cfg[0x100:], 0x000d|1<<16)
	f.Add(cfg)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = ParseACS(b)
	})
}
