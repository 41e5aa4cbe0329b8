package sysinfo

import (
	"context"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

const limitsNormal = `Limit                     Soft Limit           Hard Limit           Units     
Max stack size            8388608              unlimited            bytes     
Max open files            1048576              1048576              files     
Max locked memory         8388608              8388608              bytes     
`

func find(fs []checks.Finding, sub string) *checks.Finding {
	for i := range fs {
		if strings.Contains(fs[i].Title, sub) {
			return &fs[i]
		}
	}
	return nil
}

func TestDetectContainer(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]any
		env     map[string]string
		want    string
		hostPID bool
	}{
		{"bare host", map[string]any{"/proc/1/cgroup": "0::/init.scope\n", "/proc/self/status": "NSpid:\t4242\n"}, nil, RuntimeNone, true},
		{"docker", map[string]any{"/.dockerenv": "", "/proc/1/cgroup": "0::/\n", "/proc/self/status": "NSpid:\t4242\t7\n"}, nil, RuntimeDocker, false},
		{"docker by cgroup v1", map[string]any{"/proc/1/cgroup": "4:memory:/docker/0123abcd\n"}, nil, RuntimeDocker, false},
		{"podman", map[string]any{"/run/.containerenv": ""}, nil, RuntimePodman, false},
		{"kubernetes over containerd", map[string]any{"/proc/1/cgroup": "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-1.scope\n"},
			map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, RuntimeKubernetes, false},
		{"apptainer", nil, map[string]string{"APPTAINER_CONTAINER": "/scratch/pytorch.sif"}, RuntimeApptainer, false},
		{"lxc", map[string]any{"/proc/1/environ": "PATH=/bin\x00container=lxc\x00"}, nil, RuntimeLXC, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ft.Tree(t, tt.files, host.FixtureSpec{Env: tt.env})
			c := DetectContainer(context.Background(), h)
			if c.Runtime != tt.want {
				t.Errorf("runtime = %s, want %s (evidence %v)", c.Runtime, tt.want, c.Evidence)
			}
			if tt.want != RuntimeNone && len(c.Evidence) == 0 {
				t.Error("no evidence recorded")
			}
			if c.HostPIDNamespace != tt.hostPID {
				t.Errorf("HostPIDNamespace = %v, want %v", c.HostPIDNamespace, tt.hostPID)
			}
		})
	}
}

func TestContainerCheckCallsOutDockerDefaultShm(t *testing.T) {
	spec := host.FixtureSpec{Statfs: map[string]host.StatFS{"/dev/shm": ft.StatfsTmpfs(64<<20, 1<<20)}}
	h := ft.Tree(t, map[string]any{"/.dockerenv": "", "/dev/shm": nil}, spec)
	fs, err := runContainer(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	f := find(fs, "64 MiB")
	// shm.mount counts the problem; this check explains it without counting it twice.
	if f == nil || f.Severity != checks.Info || !strings.Contains(f.Title, "Docker default") || f.Guide != "container-shm" || len(f.Fixes) == 0 || f.Fixes[0] != "container.shm" {
		t.Fatalf("want the 64 MiB docker default called out with the container.shm fix, got %+v", fs)
	}
	// A big /dev/shm in a container is fine.
	spec.Statfs["/dev/shm"] = ft.StatfsTmpfs(16<<30, 0)
	h = ft.Tree(t, map[string]any{"/.dockerenv": "", "/dev/shm": nil}, spec)
	fs, _ = runContainer(context.Background(), h)
	if _, w := checks.Problems(fs); w != 0 || find(fs, "64 MiB") != nil {
		t.Errorf("16 GiB shm in docker flagged: %+v", fs)
	}
}

func TestRemoveIPC(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]any
		want, def bool
		source    string
	}{
		{"default yes", map[string]any{"/etc/systemd/logind.conf": "[Login]\n#RemoveIPC=yes\n"}, true, true, ""},
		{"set no", map[string]any{"/etc/systemd/logind.conf": "[Login]\nRemoveIPC=no\n"}, false, false, "/etc/systemd/logind.conf"},
		{"drop-in wins", map[string]any{
			"/etc/systemd/logind.conf":                   "[Login]\nRemoveIPC=yes\n",
			"/etc/systemd/logind.conf.d/10-ncclwiz.conf": "# keep shm\n[Login]\nRemoveIPC=no\n",
		}, false, false, "/etc/systemd/logind.conf.d/10-ncclwiz.conf"},
		{"later drop-in name wins", map[string]any{
			"/etc/systemd/logind.conf.d/10-a.conf": "[Login]\nRemoveIPC=no\n",
			"/run/systemd/logind.conf.d/20-b.conf": "[Login]\nRemoveIPC=yes\n",
		}, true, false, "/run/systemd/logind.conf.d/20-b.conf"},
		{"other section ignored", map[string]any{"/etc/systemd/logind.conf": "[Other]\nRemoveIPC=no\n"}, true, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ReadRemoveIPC(ft.Tree(t, tt.files, host.FixtureSpec{}))
			if r.Value != tt.want || r.Default != tt.def || r.Source != tt.source || !r.Logind {
				t.Errorf("got %+v, want value=%v default=%v source=%q", r, tt.want, tt.def, tt.source)
			}
		})
	}
}

func TestIPCFindings(t *testing.T) {
	base := map[string]any{
		"/proc/sys/kernel/shmmax": "18446744073692774399\n",
		"/proc/sys/kernel/shmmni": "4096\n",
		"/proc/sys/kernel/shmall": "18446744073692774399\n",
		"/proc/sysvipc/shm": "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime        rss       swap\n" +
			"         0          1   600                524288  1000  1000      0  1000  1000  1000  1000          0          0 1700000000          0          0\n",
		"/proc/meminfo":                          "MemTotal:       65536000 kB\nMemAvailable:   60000000 kB\n",
		"/proc/self/limits":                      limitsNormal,
		"/proc/self/cgroup":                      "0::/user.slice\n",
		"/sys/devices/system/node/node0/meminfo": "Node 0 MemTotal:       32768000 kB\n",
		"/sys/devices/system/node/node0/cpulist": "0-15\n",
		"/sys/devices/system/node/node1/meminfo": "Node 1 MemTotal:       32768000 kB\n",
		"/sys/devices/system/node/node1/cpulist": "16-31\n",
		"/etc/systemd/logind.conf":               "[Login]\n",
		"/dev/shm":                               nil,
	}
	with := func(over map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range over {
			m[k] = v
		}
		return m
	}
	shm := map[string]host.StatFS{"/dev/shm": ft.StatfsTmpfs(32<<30, 0)}
	tests := []struct {
		name     string
		files    map[string]any
		uid      int
		env      map[string]string
		title    string
		sev      checks.Severity
		guide    string
		problems int
	}{
		{"healthy root", base, 0, nil, "2 NUMA nodes", checks.OK, "", 0},
		{"regular user sees RemoveIPC note", with(map[string]any{"/run/systemd/seats": nil}), 1000, nil, "RemoveIPC=yes (systemd's default)", checks.Info, "shm-removeipc", 0},
		{"logind seen as a process", with(map[string]any{"/proc/612/stat": "612 (systemd-logind) S 1 612 612 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n"}), 1000, nil, "RemoveIPC=yes (systemd's default)", checks.Info, "shm-removeipc", 0},
		// Issue 13 item 7: a container image ships logind.conf, but logind
		// does not run there, so RemoveIPC removes nothing.
		{"container: logind.conf without logind", with(map[string]any{"/.dockerenv": "", "/proc/1/stat": "1 (torchrun) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n"}), 1000, nil,
			"systemd-logind does not run here", checks.OK, "", 0},
		// A memoryless node no GPU allocates on is not NCCL's business
		// (numa_test.go has the layouts where it is).
		{"memoryless numa node, no GPU", with(map[string]any{"/sys/devices/system/node/node1/meminfo": "Node 1 MemTotal:       0 kB\n"}), 0, nil,
			"no GPU NCCL could use was found", checks.OK, "", 0},
		{"low nofile", with(map[string]any{"/proc/self/limits": strings.Replace(limitsNormal, "1048576              1048576", "1024                 4096   ", 1)}), 0, nil,
			"open files soft limit is 1024", checks.Warn, "fd-exhaustion", 1},
		{"cgroup smaller than shm", with(map[string]any{"/sys/fs/cgroup/user.slice/memory.max": "8589934592\n"}), 0, nil,
			"larger than this cgroup's memory limit", checks.Warn, "container-shm", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ft.Tree(t, tt.files, host.FixtureSpec{UID: tt.uid, Env: tt.env, Statfs: shm})
			fs, err := runIPC(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			f := find(fs, tt.title)
			if f == nil {
				t.Fatalf("no finding titled %q in %+v", tt.title, fs)
			}
			if f.Severity != tt.sev || f.Guide != tt.guide {
				t.Errorf("got severity %s guide %q, want %s %q", f.Severity, f.Guide, tt.sev, tt.guide)
			}
			e, w := checks.Problems(fs)
			if e+w != tt.problems {
				t.Errorf("%d problems, want %d: %+v", e+w, tt.problems, fs)
			}
		})
	}
}

func TestHuman(t *testing.T) {
	for in, want := range map[uint64]string{512: "512 B", 64 << 20: "64 MiB", 1536 << 20: "1.5 GiB", 24684092 << 10: "23.5 GiB"} {
		if got := human(in); got != want {
			t.Errorf("human(%d) = %s, want %s", in, got, want)
		}
	}
}
