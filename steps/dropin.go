package steps

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks/sysinfo"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/safefile"
)

// dropIn is a configuration file ncclwiz owns entirely.
type dropIn struct {
	id, path, content string
	// restart makes the file take effect; nil when it applies to new
	// sessions only.
	restart []string
	// effect says when and how it takes effect.
	effect string
}

var removeIPCDropIn = dropIn{
	id:   "systemd.removeipc",
	path: "/etc/systemd/logind.conf.d/90-ncclwiz-removeipc.conf",
	content: "# Written by ncclwiz (fix systemd.removeipc).\n" +
		"# Keep users' /dev/shm files and SysV segments when their last login session\n" +
		"# ends, so jobs started outside a session (mpirun, Slurm, nohup) keep NCCL's\n" +
		"# shared-memory segments. See logind.conf(5), RemoveIPC=.\n" +
		"[Login]\nRemoveIPC=no\n",
	restart: []string{"systemctl", "restart", "systemd-logind"},
	effect:  "systemd-logind reads it when it restarts, which the fix does (a reboot does too)",
}

var memlockDropIn = dropIn{
	id:   "limits.memlock",
	path: "/etc/security/limits.d/90-ncclwiz-memlock.conf",
	content: "# Written by ncclwiz (fix limits.memlock).\n" +
		"# InfiniBand/RoCE register (pin) memory; with a small locked-memory limit NCCL\n" +
		"# fails with \"Call to ibv_reg_mr failed\" (NCCL docs, networking troubleshooting).\n" +
		"# See limits.conf(5); pam_limits applies it to new login sessions.\n" +
		"*\tsoft\tmemlock\tunlimited\n*\thard\tmemlock\tunlimited\n",
	effect: "pam_limits applies it to new login sessions, so log out and in again. Services get their limit from systemd " +
		"(LimitMEMLOCK=infinity in a drop-in for the unit, e.g. slurmd, then restart it) and containers from their runtime (docker run --ulimit memlock=-1)",
}

func (d dropIn) lines() []string {
	lines := []string{fmt.Sprintf("install -D -m 0644 /dev/stdin %s <<'EOF'", d.path)}
	lines = append(lines, strings.Split(strings.TrimRight(d.content, "\n"), "\n")...)
	lines = append(lines, "EOF")
	if len(d.restart) > 0 {
		lines = append(lines, strings.Join(d.restart, " "))
	}
	return lines
}

func planDropIn(h *host.Host, r *request, d dropIn, title, summary, guide string, recheck []string) *Fix {
	if b, err := os.ReadFile(h.Path(d.path)); err == nil && string(b) == d.content {
		return r.note(d.id, d.path+" is already in place")
	}
	f := &Fix{
		ID: d.id, Title: title, Summary: summary + " " + capitalize(d.effect) + ". A different file of the same name is backed up first.",
		Guide: guide, Risk: RiskMedium, NeedsRoot: true,
		Steps:   []Step{{Lines: d.lines(), Root: true}},
		Recheck: recheck,
	}
	f.apply = func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
		return applyDropIn(ctx, h, d, o)
	}
	f.script = func(s *script) { scriptDropIn(s, d) }
	return f
}

func applyDropIn(ctx context.Context, h *host.Host, d dropIn, o ApplyOptions) (Outcome, error) {
	p := h.Path(d.path)
	old, err := os.ReadFile(p)
	switch {
	case err == nil && string(old) == d.content:
		return Outcome{Summary: d.path + " is already in place; nothing to do"}, nil
	case err != nil && !os.IsNotExist(err):
		return Outcome{}, fmt.Errorf("read %s: %w", d.path, err)
	}
	if o.DryRun {
		out := Outcome{Changed: []string{"would write " + d.path}, Summary: "would write " + d.path + "; nothing changed"}
		if len(d.restart) > 0 {
			out.Changed = append(out.Changed, "would run: "+strings.Join(d.restart, " "))
		}
		return out, nil
	}
	out := Outcome{}
	if err == nil {
		bak := fmt.Sprintf("%s.ncclwiz-%s.bak", p, h.Now().UTC().Format("20060102T150405Z"))
		if err := os.WriteFile(bak, old, 0o644); err != nil {
			return out, fmt.Errorf("backup %s: %w", d.path, err)
		}
		out.Changed = append(out.Changed, "backup of the previous file: "+strings.TrimPrefix(bak, strings.TrimSuffix(h.Root, "/")))
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return out, err
	}
	if err := safefile.WriteWith(p, []byte(d.content), safefile.Options{Perm: 0o644, ExactPerm: true, Chown: true}); err != nil {
		return out, err
	}
	out.Changed = append(out.Changed, "wrote "+d.path)
	o.progress("wrote %s", d.path)
	out.Summary = "wrote " + d.path + "; " + d.effect
	if len(d.restart) > 0 {
		cmd := strings.Join(d.restart, " ")
		if h.Simulated {
			// A simulation's services are not this machine's: never run it.
			out.Skipped = append(out.Skipped, "simulation: "+cmd+" not run")
			return out, nil
		}
		switch res, err := h.Run(ctx, 0, d.restart[0], d.restart[1:]...); {
		case err != nil:
			out.Skipped = append(out.Skipped, cmd+": "+err.Error()+"; run it by hand (or reboot)")
		case res.ExitCode != 0:
			out.Skipped = append(out.Skipped, fmt.Sprintf("%s exited %d: %s; run it by hand (or reboot)", cmd, res.ExitCode, strings.TrimSpace(string(res.Stderr))))
		default:
			out.Changed = append(out.Changed, "ran "+cmd)
			o.progress("ran %s", cmd)
		}
	}
	return out, nil
}

func planRemoveIPC(_ context.Context, h *host.Host, r *request) *Fix {
	rip := sysinfo.ReadRemoveIPC(h)
	if !rip.Logind {
		return r.note("systemd.removeipc", "systemd-logind is not installed here (no logind.conf), so nothing removes users' shared memory at logout")
	}
	if !rip.Running {
		return r.note("systemd.removeipc", "systemd-logind does not run here ("+rip.RunningWhy+"), so nothing removes users' shared memory at logout")
	}
	if !rip.Value {
		return r.note("systemd.removeipc", "RemoveIPC is already off ("+rip.Source+")")
	}
	return planDropIn(h, r, removeIPCDropIn, "Stop systemd-logind from deleting users' shared memory at logout (RemoveIPC=no)",
		"Writes a logind.conf.d drop-in with RemoveIPC=no, so the /dev/shm segments of jobs that outlive a login session (mpirun, Slurm, nohup) are not deleted under them.",
		"shm-removeipc", []string{"host.ipc"})
}

func planMemlock(_ context.Context, h *host.Host, r *request) *Fix {
	return planDropIn(h, r, memlockDropIn, "Let RDMA pin memory: memlock unlimited (limits.d)",
		"Writes a limits.d file raising the locked-memory limit that InfiniBand/RoCE memory registration needs.",
		"memlock", nil)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
