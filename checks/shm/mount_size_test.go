package shm

import (
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

// The one size rule (SizeRule), at its edges.
func TestRecommendSize(t *testing.T) {
	const gib = 1 << 30
	for _, tt := range []struct {
		name        string
		ram, cgroup uint64
		want        uint64
		reason      string
	}{
		{"big server: the cap", 2048 * gib, 0, 8 * gib, "room for an 8-GPU node"},
		{"16 GiB exactly: the cap", 16 * gib, 0, 8 * gib, "many times over"},
		{"12 GiB workstation: half of RAM", 12 * gib, 0, 6 * gib, "half of RAM (12 GiB)"},
		{"odd RAM rounds down to whole GiB", 7*gib + 512<<20, 0, 3 * gib, "half of RAM"},
		{"container limit below RAM", 512 * gib, 4 * gib, 2 * gib, "half of this cgroup's memory limit (4 GiB)"},
		{"limit above RAM is ignored", 8 * gib, 64 * gib, 4 * gib, "half of RAM"},
		{"tiny machine: NCCL's 1 GiB minimum", 1 * gib, 0, 1 * gib, "more than half of RAM"},
		{"unknown memory: the cap", 0, 0, 8 * gib, "many times over"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := RecommendSize(tt.ram, tt.cgroup)
			if a.Bytes != tt.want || !strings.Contains(a.Reason, tt.reason) {
				t.Errorf("RecommendSize(%d, %d) = %d %q; want %d %q", tt.ram, tt.cgroup, a.Bytes, a.Reason, tt.want, tt.reason)
			}
			if a.Bytes%gib != 0 || a.Option() != SizeOption(a.Bytes) || a.GiB()*gib != a.Bytes {
				t.Errorf("not whole GiB or inconsistent: %+v %s", a, a.Option())
			}
		})
	}
}

// shm.mount's advice names the recommended size, in the same words and
// number the fixes use, read through the host seam (meminfo and cgroup).
func TestMountAdviceNamesTheRecommendedSize(t *testing.T) {
	h := ft.Tree(t, map[string]any{
		"/proc/self/mountinfo":          "25 22 0:23 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,size=65536k\n",
		"/proc/meminfo":                 "MemTotal:       12582912 kB\n",
		"/proc/self/cgroup":             "0::/job\n",
		"/sys/fs/cgroup/job/memory.max": "max\n",
		"/dev/shm":                      nil,
	}, host.FixtureSpec{UID: 1000, Statfs: map[string]host.StatFS{"/dev/shm": ft.StatfsTmpfs(64<<20, 60<<20)}})
	fs, err := runMount(t.Context(), h)
	if err != nil {
		t.Fatal(err)
	}
	want := RecommendSize(12<<30, 0)
	found := false
	for _, f := range fs {
		if strings.Contains(f.Detail, "ncclwiz recommends 6 GiB (half of RAM (12 GiB)") && strings.Contains(f.Detail, "--shm-size=6g") &&
			strings.Contains(f.Detail, "sizeLimit: 6Gi") && !strings.Contains(f.Detail, "cannot be resized from inside") {
			found = true
		}
	}
	if !found || fs[0].Evidence["recommended_size_bytes"] != want.Bytes {
		t.Errorf("advice lacks the recommended size %d:\n%+v", want.Bytes, fs)
	}
}
