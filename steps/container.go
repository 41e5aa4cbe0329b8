package steps

import (
	"context"
	"fmt"

	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/checks/sysinfo"
	"github.com/ncclwiz/ncclwiz/host"
)

// ContainerSnippets returns how to give a container a /dev/shm of the
// recommended size (shm.RecommendedSize: the same number shm.remount and
// the guides use), for the detected runtime first and then the others.
func ContainerSnippets(runtime string, size shm.SizeAdvice) []Step {
	g := size.GiB()
	docker := Step{Comment: "docker: start the container with a bigger /dev/shm (--ipc=host shares the host's instead, with less isolation)",
		Lines: []string{
			fmt.Sprintf("docker run --gpus all --shm-size=%dg --ulimit memlock=-1 IMAGE COMMAND", g),
			"docker run --gpus all --ipc=host --ulimit memlock=-1 IMAGE COMMAND",
		}}
	compose := Step{Comment: "docker compose: in the service's definition",
		Lines: []string{fmt.Sprintf("shm_size: \"%dgb\"", g), "# or: ipc: host"}}
	podman := Step{Comment: "podman",
		Lines: []string{fmt.Sprintf("podman run --device nvidia.com/gpu=all --shm-size=%dg IMAGE COMMAND", g), "podman run --device nvidia.com/gpu=all --ipc=host IMAGE COMMAND"}}
	nerdctl := Step{Comment: "containerd (nerdctl)",
		Lines: []string{fmt.Sprintf("nerdctl run --gpus all --shm-size=%dg IMAGE COMMAND", g)}}
	k8s := Step{Comment: "Kubernetes: pods get 64 MiB at /dev/shm unless a memory-backed emptyDir is mounted there; in the pod spec",
		Lines: []string{
			"spec:",
			"  volumes:",
			"    - name: dshm",
			fmt.Sprintf("      emptyDir: {medium: Memory, sizeLimit: %dGi}", g),
			"  containers:",
			"    - name: trainer",
			"      volumeMounts:",
			"        - {name: dshm, mountPath: /dev/shm}",
			"# emptyDir memory counts against the container's memory limit: keep resources.limits.memory above it",
		}}
	apptainer := Step{Comment: "Apptainer/Singularity: containers share the host's /dev/shm unless started with --contain/--containall; resize it on the host (shm.remount) and leave those flags out",
		Lines: []string{"apptainer exec --nv IMAGE.sif torchrun --nproc_per_node=8 train.py"}}
	system := Step{Comment: "LXC/Incus and systemd-nspawn system containers mount their own /dev/shm from the container's init: as the container's root, remount it (shm.remount) and persist it in the container's /etc/fstab",
		Lines: []string{fmt.Sprintf("mount -o remount,size=%s /dev/shm", size.Option())}}
	byRuntime := map[string]Step{
		sysinfo.RuntimeDocker: docker, sysinfo.RuntimePodman: podman, sysinfo.RuntimeKubernetes: k8s,
		sysinfo.RuntimeApptainer: apptainer, sysinfo.RuntimeContainerd: nerdctl, sysinfo.RuntimeLXC: system, sysinfo.RuntimeNspawn: system,
	}
	var out []Step
	first, ok := byRuntime[runtime]
	if ok {
		out = append(out, first)
		if runtime == sysinfo.RuntimeDocker {
			out = append(out, compose)
		}
	}
	for _, s := range []Step{docker, compose, k8s, podman, nerdctl, apptainer} {
		dup := false
		for _, o := range out {
			dup = dup || o.Comment == s.Comment
		}
		if !dup {
			out = append(out, s)
		}
	}
	return out
}

func planContainer(ctx context.Context, h *host.Host, r *request) *Fix {
	c := sysinfo.DetectContainer(ctx, h)
	size := shm.RecommendedSize(h)
	where := "ncclwiz runs outside any container here; if the training itself runs in one, these are the settings for docker, compose, Kubernetes, podman, containerd and Apptainer."
	title := fmt.Sprintf("If training runs in a container: start it with a bigger /dev/shm (%s)", shm.Human(size.Bytes))
	if c.InContainer() {
		where = fmt.Sprintf("ncclwiz runs in a %s container (%s); its setting comes first.", c.Runtime, firstOr(c.Evidence, "detected"))
		title = fmt.Sprintf("Start the container with a bigger /dev/shm (%s)", shm.Human(size.Bytes))
	}
	return &Fix{
		ID:    "container.shm",
		Title: title,
		Summary: fmt.Sprintf("A container's /dev/shm is set when it starts — 64 MiB by default in Docker and Kubernetes, which holds about six of NCCL's "+
			"~9.2 MiB segments. %s Restart it with a /dev/shm of %s — %s (ncclwiz's rule: %s) — or share the host's with --ipc=host. "+
			"Its pages count against the container's memory limit, which must stay above it. %s",
			resizeInside(h, c), shm.Human(size.Bytes), size.Reason, shm.SizeRule, where),
		Guide: "container-shm", Risk: RiskNone, Manual: true,
		Steps: ContainerSnippets(c.Runtime, size),
	}
}

// resizeInside is sysinfo.ResizeInside for this machine.
func resizeInside(h *host.Host, c sysinfo.Container) string {
	if !c.InContainer() {
		return "From inside a container it can be grown only with CAP_SYS_ADMIN, and only until the container restarts."
	}
	return sysinfo.ResizeInside(sysinfo.CanRemount(h))
}

func firstOr(xs []string, def string) string {
	if len(xs) > 0 {
		return xs[0]
	}
	return def
}
