// Package sysinfo holds the host-level checks: which container runtime (if
// any) ncclwiz runs in, and the IPC, NUMA, limits and memory settings that
// decide whether NCCL's shared-memory transport can work.
package sysinfo

import (
	"context"
	"fmt"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// Checks returns the host.* checks of this package.
func Checks() []checks.Check {
	return []checks.Check{
		{ID: "host.container", Title: "Container runtime", Category: "host", Tier: checks.Quick, Run: runContainer},
		{ID: "host.ipc", Title: "IPC, NUMA and limits", Category: "host", Tier: checks.Quick, Run: runIPC},
	}
}

// Runtimes, as reported in Container.Runtime.
const (
	RuntimeNone       = "none"
	RuntimeDocker     = "docker"
	RuntimePodman     = "podman"
	RuntimeKubernetes = "kubernetes"
	RuntimeLXC        = "lxc"
	RuntimeApptainer  = "apptainer"
	RuntimeContainerd = "containerd"
	RuntimeNspawn     = "systemd-nspawn"
)

// Container says whether ncclwiz runs inside a container and which one.
type Container struct {
	Runtime string
	// Evidence lists what was seen, e.g. "/.dockerenv exists".
	Evidence []string
	// HostPIDNamespace is true when this process is in the initial PID
	// namespace, so every process on the machine is visible in /proc.
	HostPIDNamespace bool
}

// InContainer reports whether a runtime was detected.
func (c Container) InContainer() bool { return c.Runtime != RuntimeNone }

// DetectContainer looks for the marks each runtime leaves. Kubernetes wins
// over the engine underneath it because its fix (an emptyDir) differs.
func DetectContainer(ctx context.Context, h *host.Host) Container {
	c := Container{Runtime: RuntimeNone}
	found := map[string]bool{}
	add := func(rt, why string) {
		found[rt] = true
		c.Evidence = append(c.Evidence, why)
	}
	if exists(h, "/.dockerenv") {
		add(RuntimeDocker, "/.dockerenv exists")
	}
	if exists(h, "/run/.containerenv") {
		add(RuntimePodman, "/run/.containerenv exists")
	}
	if v := h.Getenv("KUBERNETES_SERVICE_HOST"); v != "" {
		add(RuntimeKubernetes, "KUBERNETES_SERVICE_HOST is set")
	}
	if exists(h, "/var/run/secrets/kubernetes.io") {
		add(RuntimeKubernetes, "/var/run/secrets/kubernetes.io exists")
	}
	for _, k := range []string{"APPTAINER_CONTAINER", "SINGULARITY_CONTAINER", "APPTAINER_NAME", "SINGULARITY_NAME"} {
		if h.Getenv(k) != "" {
			add(RuntimeApptainer, k+" is set")
			break
		}
	}
	if exists(h, "/.singularity.d") {
		add(RuntimeApptainer, "/.singularity.d exists")
	}
	if env, ok := proctab.Environ(ctx, h, 1, "container"); ok {
		switch env["container"] {
		case "lxc":
			add(RuntimeLXC, "PID 1 has container=lxc")
		case "podman":
			add(RuntimePodman, "PID 1 has container=podman")
		case "systemd-nspawn":
			add(RuntimeNspawn, "PID 1 has container=systemd-nspawn")
		case "docker":
			add(RuntimeDocker, "PID 1 has container=docker")
		}
	}
	if b, err := h.ReadFile("/proc/1/cgroup"); err == nil {
		s := string(b)
		switch {
		case strings.Contains(s, "kubepods"):
			add(RuntimeKubernetes, "/proc/1/cgroup mentions kubepods")
		case strings.Contains(s, "/docker/") || strings.Contains(s, "docker-"):
			add(RuntimeDocker, "/proc/1/cgroup mentions docker")
		case strings.Contains(s, "libpod"):
			add(RuntimePodman, "/proc/1/cgroup mentions libpod")
		case strings.Contains(s, "/lxc/") || strings.Contains(s, "lxc.payload"):
			add(RuntimeLXC, "/proc/1/cgroup mentions lxc")
		case strings.Contains(s, "containerd"):
			add(RuntimeContainerd, "/proc/1/cgroup mentions containerd")
		}
	}
	for _, rt := range []string{RuntimeKubernetes, RuntimeApptainer, RuntimePodman, RuntimeLXC, RuntimeNspawn, RuntimeDocker, RuntimeContainerd} {
		if found[rt] {
			c.Runtime = rt
			break
		}
	}
	c.HostPIDNamespace = hostPIDNamespace(h)
	return c
}

// hostPIDNamespace reads this process's NSpid: more than one PID means it
// sits in a nested PID namespace (Linux >= 4.1); none means unknown.
func hostPIDNamespace(h *host.Host) bool {
	self, err := proctab.Self(h)
	return err == nil && len(self.NSpid) == 1
}

func exists(h *host.Host, p string) bool {
	_, err := h.Lstat(p)
	return err == nil
}

// DockerDefaultShm is Docker's and Kubernetes' default /dev/shm size (64 MiB).
const DockerDefaultShm = 64 << 20

func runContainer(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	c := DetectContainer(ctx, h)
	ev := map[string]any{"runtime": c.Runtime, "signs": c.Evidence, "host_pid_namespace": c.HostPIDNamespace}
	var shmTotal uint64
	if st, err := h.Statfs(h.ShmLogical()); err == nil {
		shmTotal = st.Total()
		ev["shm_size_bytes"] = shmTotal
	}
	if !c.InContainer() {
		f := checks.Finding{Severity: checks.OK, Title: "Bare host (no container detected)", Evidence: ev}
		if !c.HostPIDNamespace {
			f.Severity = checks.Info
			f.Title = "No container runtime detected, but this process is in a nested PID namespace"
			f.Detail = "Processes outside this namespace are invisible to ncclwiz, so shared-memory segments they hold cannot be proven in use."
		}
		return []checks.Finding{f}, nil
	}
	// shm.mount judges the size; this finding says why it is that size and
	// where it must be fixed, so the same problem is not counted twice.
	canRemount := CanRemount(h)
	if has, known := CapSysAdmin(h); known {
		ev["cap_sys_admin"] = has
	}
	ev["can_remount"] = canRemount.OK
	f := checks.Finding{Severity: checks.Info, Title: fmt.Sprintf("Running inside a %s container", c.Runtime), Evidence: ev, Guide: "container-shm",
		Detail: "Inside a container, /dev/shm and memory limits are set by whoever started it: " +
			"a lasting change needs a new container (docker --shm-size or --ipc=host, a Kubernetes emptyDir with medium: Memory). " + ResizeInside(canRemount)}
	if shmTotal > 0 && shmTotal <= DockerDefaultShm {
		f.Title = fmt.Sprintf("Running inside a %s container with the %s default /dev/shm of %s", c.Runtime, runtimeDefaultName(c.Runtime), human(shmTotal))
		f.Detail = runtimeDefaultName(c.Runtime) + " gives containers a 64 MiB /dev/shm unless told otherwise. One NCCL shared-memory " +
			"receive buffer is about 9.2 MiB with default settings, so a few local ranks fill it and NCCL fails with " +
			"'failed to extend /dev/shm/nccl-…' (or a Bus error on NCCL 2.12-2.18). The fix is to restart it with a bigger /dev/shm " +
			"(--shm-size, --ipc=host, or a memory-backed emptyDir). " + ResizeInside(canRemount)
		f.Fixes = []string{"container.shm"}
	}
	fs := []checks.Finding{f}
	return fs, nil
}

func runtimeDefaultName(rt string) string {
	if rt == RuntimeKubernetes {
		return "Kubernetes"
	}
	if rt == RuntimePodman {
		return "Podman"
	}
	return "Docker"
}

// human formats bytes with binary units.
func human(b uint64) string { return units.Bytes(b) }
