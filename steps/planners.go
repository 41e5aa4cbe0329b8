package steps

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/checks/sysinfo"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/steps/envsnippet"
	"github.com/ncclwiz/ncclwiz/steps/fstab"
)

// ---- env.export -------------------------------------------------------

// EnvFrom collects the environment the findings recommend, with reasons.
func EnvFrom(findings []checks.Finding) []envsnippet.Var {
	var out []envsnippet.Var
	for _, f := range findings {
		rec := toStringMap(f.Evidence["recommended_env"])
		why := toStringMap(f.Evidence["recommended_env_reason"])
		for k, v := range rec {
			out = append(out, envsnippet.Var{Name: k, Value: v, Reason: why[k]})
		}
	}
	return envsnippet.Sorted(out)
}

func toStringMap(v any) map[string]string {
	switch m := v.(type) {
	case map[string]string:
		return m
	case map[string]any:
		out := map[string]string{}
		for k, x := range m {
			if s, ok := x.(string); ok {
				out[k] = s
			}
		}
		return out
	}
	return nil
}

func planEnv(_ context.Context, _ *host.Host, w wanted) *Fix {
	vars := EnvFrom(w["env.export"])
	if len(vars) == 0 || envsnippet.Validate(vars) != nil {
		return nil
	}
	snippet, err := envsnippet.Render("bash", vars)
	if err != nil {
		return nil
	}
	var names []string
	for _, v := range vars {
		names = append(names, v.Name+"="+v.Value)
	}
	return &Fix{
		ID: "env.export", Title: "Set " + strings.Join(names, " "),
		Summary: "Environment for the next run, each with its reason. ncclwiz cannot change the environment of your shell or job; " +
			"source the snippet before launching, or print it for fish, Python, dotenv, Slurm, docker or Kubernetes with `ncclwiz env --shell X`.",
		Answers: answers(w["env.export"]), Risk: RiskNone, Manual: true,
		Steps: []Step{{Comment: "add to your job script (or: ncclwiz env --shell bash > nccl.env && source nccl.env)", Lines: trimLines(snippet)}},
	}
}

func trimLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if !strings.HasPrefix(l, "# NCCL settings suggested") {
			out = append(out, l)
		}
	}
	return out
}

func answers(fs []checks.Finding) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range fs {
		if f.Check != "user" && !seen[f.Check] {
			seen[f.Check] = true
			out = append(out, f.Check)
		}
	}
	sort.Strings(out)
	return out
}

// ---- launch.single-gpu ---------------------------------------------------

func planSingleGPU(_ context.Context, _ *host.Host, w wanted) *Fix {
	if !w.has("launch.single-gpu") {
		return nil
	}
	return &Fix{
		ID: "launch.single-gpu", Title: "Run on one GPU for now",
		Summary: "While the multi-GPU problem is being fixed, training can continue on one GPU: no NCCL communication is needed. " +
			"`ncclwiz fallback -- <your launch command>` rewrites torchrun, accelerate launch, deepspeed or python into a one-GPU run " +
			"and says what changes (the global batch shrinks; raise gradient accumulation to keep it).",
		Answers: answers(w["launch.single-gpu"]), Risk: RiskNone, Manual: true,
		Steps: []Step{{Lines: []string{"ncclwiz fallback -- torchrun --nproc_per_node=8 train.py   # your own command here"}}},
	}
}

// ---- container.shm -------------------------------------------------------

// ContainerSnippets returns the ways to give a container a bigger /dev/shm,
// the detected runtime's first.
func ContainerSnippets(runtime string) []Step {
	docker := Step{Comment: "docker: restart the container with a bigger /dev/shm (or share the host's with --ipc=host)",
		Lines: []string{"docker run --shm-size=1g --ulimit memlock=-1 … IMAGE …", "docker run --ipc=host … IMAGE …"}}
	compose := Step{Comment: "docker compose: in the service", Lines: []string{"shm_size: \"1gb\"", "# or: ipc: host"}}
	podman := Step{Comment: "podman", Lines: []string{"podman run --shm-size=1g … IMAGE …", "podman run --ipc=host … IMAGE …"}}
	k8s := Step{Comment: "Kubernetes: mount a memory-backed emptyDir at /dev/shm (pods get 64 MiB otherwise)",
		Lines: []string{"volumes:", "  - name: dshm", "    emptyDir: {medium: Memory, sizeLimit: 1Gi}",
			"containers:", "  - volumeMounts:", "      - {name: dshm, mountPath: /dev/shm}"}}
	apptainer := Step{Comment: "Apptainer/Singularity bind the host's /dev by default, so /dev/shm is the host's: resize it on the host (shm.remount) and avoid --contain/--containall, which give a private /dev",
		Lines: []string{"apptainer exec --nv IMAGE.sif torchrun …"}}
	all := map[string]Step{sysinfo.RuntimeDocker: docker, sysinfo.RuntimePodman: podman, sysinfo.RuntimeKubernetes: k8s, sysinfo.RuntimeApptainer: apptainer}
	var out []Step
	if s, ok := all[runtime]; ok {
		out = append(out, s)
	}
	for _, s := range []Step{docker, compose, k8s, podman, apptainer} {
		if len(out) > 0 && s.Comment == out[0].Comment {
			continue
		}
		out = append(out, s)
	}
	return out
}

func planContainer(ctx context.Context, h *host.Host, w wanted) *Fix {
	if !w.has("container.shm") {
		return nil
	}
	c := sysinfo.DetectContainer(ctx, h)
	where := "the container runtime"
	if c.InContainer() {
		where = c.Runtime
	}
	return &Fix{
		ID: "container.shm", Title: "Give the container a bigger /dev/shm",
		Summary: "A container's /dev/shm is fixed when it starts (64 MiB by default in Docker and Kubernetes); it cannot be resized from inside. " +
			"Restart it with the setting for " + where + " below. 1 GiB covers typical 8-GPU jobs (each SHM connection needs about 9.2 MiB); --ipc=host shares the host's /dev/shm instead.",
		Answers: answers(w["container.shm"]), Risk: RiskNone, Manual: true,
		Steps: ContainerSnippets(c.Runtime),
	}
}

// ---- shm.remount / shm.persist ------------------------------------------

// RecommendSize proposes a /dev/shm size: the kernel's own tmpfs default
// (half of RAM), and never less than 1 GiB or than what is there now.
func RecommendSize(h *host.Host, current uint64) (uint64, string) {
	memTotal := uint64(0)
	if b, err := h.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				memTotal = kb * 1024
			}
		}
	}
	target := memTotal / 2
	why := "half of RAM, the kernel's default size for a tmpfs"
	if target < 1<<30 {
		target, why = 1<<30, "1 GiB, enough for the shared-memory segments of a typical 8-GPU job (~9.2 MiB per connection)"
	}
	target = target / (1 << 30) * (1 << 30) // whole GiB
	if target <= current {
		return 0, ""
	}
	return target, why
}

func sizeOption(b uint64) string {
	if b%(1<<30) == 0 {
		return fmt.Sprintf("%dg", b>>30)
	}
	return fmt.Sprintf("%dk", b>>10)
}

func remountPlan(ctx context.Context, h *host.Host) (shm.Mount, uint64, string, string) {
	m, err := shm.ReadMount(ctx, h)
	if err != nil || !m.Found || !m.IsTmpfs || !m.StatfsOK {
		return m, 0, "", ""
	}
	size, why := RecommendSize(h, m.Total)
	impossible := ""
	// Inside a container /dev/shm belongs to the container's run options;
	// only a privileged one (CAP_SYS_ADMIN) can remount it, and then only
	// until it restarts.
	if c := sysinfo.DetectContainer(ctx, h); c.InContainer() && !hasCapSysAdmin(h) {
		impossible = fmt.Sprintf("ncclwiz runs inside a %s container without CAP_SYS_ADMIN: its /dev/shm is set when the container starts", c.Runtime)
	}
	return m, size, why, impossible
}

func planRemount(ctx context.Context, h *host.Host, w wanted) *Fix {
	if !w.has("shm.remount") {
		return nil
	}
	m, size, why, impossible := remountPlan(ctx, h)
	if size == 0 {
		return nil
	}
	f := &Fix{
		ID: "shm.remount", Title: fmt.Sprintf("Grow %s from %s to %s", m.Path, shm.Human(m.Total), shm.Human(size)),
		Summary: fmt.Sprintf("Remounts the tmpfs with size=%s (%s). Files in it are kept; the other mount options stay as they are. "+
			"It lasts until reboot; shm.persist writes it to /etc/fstab.", sizeOption(size), why),
		Answers: answers(w["shm.remount"]), Risk: RiskMedium, NeedsRoot: true,
		Steps:   []Step{{Lines: []string{fmt.Sprintf("mount -o remount,size=%s %s", sizeOption(size), ShellQuote(m.Path))}, Root: true}},
		Recheck: []string{"shm.mount"},
		apply: func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
			cur, err := shm.ReadMount(ctx, h)
			if err != nil || !cur.IsTmpfs {
				return Outcome{}, fmt.Errorf("%s is no longer a tmpfs", m.Path)
			}
			if cur.Total >= size {
				return Outcome{Summary: fmt.Sprintf("%s is already %s", m.Path, shm.Human(cur.Total))}, nil
			}
			if h.Act.Remount == nil {
				return Outcome{}, fmt.Errorf("this host cannot remount")
			}
			if err := h.Act.Remount(h.ShmReal(), size, cur.Options); err != nil {
				return Outcome{}, err
			}
			after, _ := shm.ReadMount(ctx, h)
			o.progress("remounted %s with size=%s", m.Path, sizeOption(size))
			return Outcome{Summary: fmt.Sprintf("%s grew from %s to %s", m.Path, shm.Human(cur.Total), shm.Human(after.Total)),
				Changed: []string{fmt.Sprintf("remounted %s size=%s", m.Path, sizeOption(size))},
				Before:  map[string]any{"size_bytes": cur.Total}, After: map[string]any{"size_bytes": after.Total}}, nil
		},
	}
	if impossible != "" {
		f.Impossible, f.Alternative = impossible, "restart the container with a bigger /dev/shm (fix container.shm)"
	}
	return f
}

func planPersist(ctx context.Context, h *host.Host, w wanted) *Fix {
	if !w.has("shm.remount") && !w.has("shm.persist") {
		return nil
	}
	m, size, why, impossible := remountPlan(ctx, h)
	if size == 0 {
		return nil
	}
	line := fmt.Sprintf("tmpfs %s tmpfs defaults,size=%s 0 0", m.Path, sizeOption(size))
	f := &Fix{
		ID: "shm.persist", Title: "Keep the bigger /dev/shm after reboot (/etc/fstab)",
		Summary: fmt.Sprintf("Sets size=%s on the %s line of /etc/fstab (adds one if there is none; %s). A backup is made next to it, the file is replaced atomically, "+
			"nothing changes if it already says so, and a file ncclwiz cannot parse is left untouched.", sizeOption(size), m.Path, why),
		Answers: answers(append(w["shm.remount"], w["shm.persist"]...)), Risk: RiskMedium, NeedsRoot: true,
		Steps: []Step{{Comment: "in /etc/fstab", Lines: []string{line}, Root: true}},
		apply: func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
			p := h.Path("/etc/fstab")
			if h.Simulated {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return Outcome{}, err
				}
			}
			r, err := fstab.Edit(p, m.Path, "size", sizeOption(size), []string{"rw", "nosuid", "nodev"}, h.Now())
			if err != nil {
				return Outcome{}, err
			}
			if !r.Changed {
				return Outcome{Summary: "/etc/fstab already sets size=" + sizeOption(size)}, nil
			}
			o.progress("updated /etc/fstab (backup %s)", r.Backup)
			return Outcome{Summary: "/etc/fstab now sets size=" + sizeOption(size) + " for " + m.Path,
				Changed: []string{"edited /etc/fstab", "backup: " + strings.TrimPrefix(r.Backup, strings.TrimSuffix(h.Root, "/"))}}, nil
		},
	}
	if impossible != "" {
		f.Impossible, f.Alternative = impossible, "the container's /dev/shm comes from its run options (fix container.shm)"
	}
	return f
}

// hasCapSysAdmin reads CapEff from /proc/self/status (CAP_SYS_ADMIN is bit 21).
func hasCapSysAdmin(h *host.Host) bool {
	b, err := h.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "CapEff:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			return err == nil && v&(1<<21) != 0
		}
	}
	return false
}

// ---- systemd.removeipc / limits.memlock ----------------------------------

// dropIn is a configuration file ncclwiz owns entirely.
type dropIn struct {
	path, content string
	after         []string // command to make it take effect
	note          string
}

var removeIPCDropIn = dropIn{
	path:    "/etc/systemd/logind.conf.d/90-ncclwiz-removeipc.conf",
	content: "# Written by ncclwiz: keep users' /dev/shm files and SysV segments when their last session ends,\n# so jobs started by mpirun/SLURM/nohup do not lose NCCL's segments (logind.conf(5) RemoveIPC).\n[Login]\nRemoveIPC=no\n",
	after:   []string{"systemctl", "restart", "systemd-logind"},
	note:    "takes effect when systemd-logind restarts",
}

var memlockDropIn = dropIn{
	path:    "/etc/security/limits.d/90-ncclwiz-memlock.conf",
	content: "# Written by ncclwiz: RDMA (InfiniBand/RoCE) needs to pin memory; NCCL fails with\n# 'Call to ibv_reg_mr failed' when memlock is small (limits.conf(5)).\n* soft memlock unlimited\n* hard memlock unlimited\n",
	note:    "applies to new login sessions; services and containers need their own limit (LimitMEMLOCK=, docker --ulimit memlock=-1)",
}

func planDropIn(id, title, summary string, d dropIn, w wanted, recheck []string) *Fix {
	if !w.has(id) {
		return nil
	}
	lines := []string{fmt.Sprintf("install -D -m 0644 /dev/stdin %s <<'EOF'", d.path)}
	lines = append(lines, strings.Split(strings.TrimRight(d.content, "\n"), "\n")...)
	lines = append(lines, "EOF")
	if len(d.after) > 0 {
		lines = append(lines, strings.Join(d.after, " "))
	}
	return &Fix{
		ID: id, Title: title, Summary: summary + " It " + d.note + ".",
		Answers: answers(w[id]), Risk: RiskMedium, NeedsRoot: true,
		Steps:   []Step{{Lines: lines, Root: true}},
		Recheck: recheck,
		apply: func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
			return applyDropIn(ctx, h, d, o)
		},
	}
}

func applyDropIn(ctx context.Context, h *host.Host, d dropIn, o ApplyOptions) (Outcome, error) {
	p := h.Path(d.path)
	if old, err := os.ReadFile(p); err == nil && string(old) == d.content {
		return Outcome{Summary: d.path + " already in place"}, nil
	}
	if err := writeAtomic(p, []byte(d.content), 0o644); err != nil {
		return Outcome{}, err
	}
	out := Outcome{Changed: []string{"wrote " + d.path}, Summary: "wrote " + d.path + "; it " + d.note}
	o.progress("wrote %s", d.path)
	if len(d.after) > 0 && !h.Simulated {
		res, err := h.Run(ctx, 0, d.after[0], d.after[1:]...)
		switch {
		case err != nil:
			out.Skipped = append(out.Skipped, strings.Join(d.after, " ")+": "+err.Error())
		case res.ExitCode != 0:
			out.Skipped = append(out.Skipped, fmt.Sprintf("%s exited %d: %s", strings.Join(d.after, " "), res.ExitCode, strings.TrimSpace(string(res.Stderr))))
		default:
			out.Changed = append(out.Changed, "ran "+strings.Join(d.after, " "))
		}
	}
	return out, nil
}

func writeAtomic(p string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+path.Base(p)+".ncclwiz-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

func planRemoveIPC(_ context.Context, _ *host.Host, w wanted) *Fix {
	return planDropIn("systemd.removeipc", "Stop systemd-logind from deleting users' shared memory (RemoveIPC=no)",
		"Writes a logind.conf.d drop-in with RemoveIPC=no, so NCCL segments of jobs that outlive a login session are not deleted under them.",
		removeIPCDropIn, w, []string{"host.ipc"})
}

func planMemlock(_ context.Context, _ *host.Host, w wanted) *Fix {
	return planDropIn("limits.memlock", "Allow RDMA to lock memory (memlock unlimited)",
		"Writes a limits.d file raising the locked-memory limit that InfiniBand/RoCE registration needs.",
		memlockDropIn, w, nil)
}
