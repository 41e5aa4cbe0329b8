package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/checks/sysinfo"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/shellquote"
	"github.com/ncclwiz/ncclwiz/steps/fstab"
)

// RecommendSize is shm.RecommendedSize (the one size rule, shm.SizeRule)
// for a tmpfs of the current size: 0 when it is already as big.
func RecommendSize(h *host.Host, current uint64) (uint64, string) {
	a := shm.RecommendedSize(h)
	if a.Bytes <= current {
		return 0, ""
	}
	return a.Bytes, a.Reason
}

// sizeOption writes bytes the way mount's size= takes them.
func sizeOption(b uint64) string { return shm.SizeOption(b) }

// shmTarget is what shm.remount and shm.persist plan from.
type shmTarget struct {
	mount     shm.Mount
	size      uint64
	why       string
	container sysinfo.Container
	problem   string // why the mount cannot be resized at all
}

func planShmTarget(ctx context.Context, h *host.Host) shmTarget {
	m, err := shm.ReadMount(ctx, h)
	t := shmTarget{mount: m, container: sysinfo.DetectContainer(ctx, h)}
	switch {
	case err != nil:
		t.problem = "cannot read the mount: " + err.Error()
	case !m.Found:
		t.problem = m.Path + " " + m.Problem
	case !m.StatfsOK:
		t.problem = "cannot read its size: " + m.StatfsErr
	case !m.IsTmpfs:
		t.problem = m.Path + " is " + m.FSType + ", not a tmpfs; remounting with size= does not apply"
	case m.Unlimited:
		t.problem = m.Path + " is a tmpfs without a size limit already"
	default:
		t.size, t.why = RecommendSize(h, m.Total)
		if t.size == 0 {
			t.problem = fmt.Sprintf("%s is already %s", m.Path, shm.Human(m.Total))
		}
	}
	return t
}

// keptOptions are the per-mount options an fstab entry for the tmpfs
// should carry over from the running mount.
func keptOptions(m shm.Mount) []string {
	out := []string{"rw"}
	for _, o := range []string{"nosuid", "nodev", "noexec"} {
		if slices.Contains(m.Options, o) {
			out = append(out, o)
		}
	}
	if len(out) == 1 {
		out = append(out, "nosuid", "nodev") // systemd's options for /dev/shm
	}
	return out
}

func planRemount(ctx context.Context, h *host.Host, r *request) *Fix {
	t := planShmTarget(ctx, h)
	if t.problem != "" {
		return r.note("shm.remount", t.problem)
	}
	m, size := t.mount, t.size
	line := fmt.Sprintf("mount -o remount,size=%s %s", sizeOption(size), shellquote.Quote(m.Path))
	f := &Fix{
		ID:    "shm.remount",
		Title: fmt.Sprintf("Grow %s from %s to %s (remount)", m.Path, shm.Human(m.Total), shm.Human(size)),
		Summary: fmt.Sprintf("Remounts the tmpfs with size=%s — %s. Files in it and the other mount options stay; it takes effect at once "+
			"and lasts until reboot (shm.persist writes it to /etc/fstab).", sizeOption(size), t.why),
		Guide: "shm-no-space", Risk: RiskMedium, NeedsRoot: true,
		Steps:   []Step{{Lines: []string{line}, Root: true}},
		Recheck: []string{"shm.mount"},
	}
	if c := t.container; c.InContainer() {
		if rp := sysinfo.CanRemount(h); !rp.OK {
			f.Impossible = fmt.Sprintf("ncclwiz runs inside a %s container. %s", c.Runtime, sysinfo.ResizeInside(rp))
			f.Alternative = fmt.Sprintf("start the container with a %s /dev/shm: fix container.shm", shm.Human(size))
		} else {
			f.Summary += fmt.Sprintf(" %s Fix container.shm makes it permanent.", sysinfo.ResizeInside(rp))
		}
	}
	dir := h.ShmReal()
	f.apply = func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
		cur, err := shm.ReadMount(ctx, h)
		if err != nil || !cur.Found || !cur.IsTmpfs || !cur.StatfsOK {
			return Outcome{}, fmt.Errorf("%s is no longer a tmpfs of known size; not remounted", m.Path)
		}
		out := Outcome{Before: map[string]any{"size_bytes": cur.Total, "size_option": cur.SizeOption}}
		if cur.Total >= size {
			out.Summary = fmt.Sprintf("%s is already %s; nothing to do", m.Path, shm.Human(cur.Total))
			out.After = out.Before
			return out, nil
		}
		if o.DryRun {
			out.Changed = []string{"would run: " + line}
			out.Summary = fmt.Sprintf("would grow %s from %s to %s; nothing changed", m.Path, shm.Human(cur.Total), shm.Human(size))
			return out, nil
		}
		if h.Act.Remount == nil {
			return out, errors.New("this host cannot remount")
		}
		if err := h.Act.Remount(dir, size, cur.Options); err != nil {
			return out, err
		}
		o.progress("remounted %s with size=%s", m.Path, sizeOption(size))
		after, err := shm.ReadMount(ctx, h)
		if err != nil {
			return out, err
		}
		out.After = map[string]any{"size_bytes": after.Total, "size_option": after.SizeOption}
		out.Changed = []string{fmt.Sprintf("remounted %s with size=%s", m.Path, sizeOption(size))}
		out.Summary = fmt.Sprintf("%s grew from %s to %s", m.Path, shm.Human(cur.Total), shm.Human(after.Total))
		return out, nil
	}
	f.script = func(s *script) { scriptRemount(s, m.Path, size) }
	return f
}

func planPersist(ctx context.Context, h *host.Host, r *request) *Fix {
	if !r.wanted("shm.persist") && !r.wanted("shm.remount") {
		return nil
	}
	t := planShmTarget(ctx, h)
	m := t.mount
	size := t.size
	if t.problem != "" {
		if !m.Found || !m.IsTmpfs || !m.StatfsOK || m.Unlimited {
			return r.note("shm.persist", t.problem)
		}
		size = m.Total // already big: persist what is mounted now
	}
	if c := t.container; c.InContainer() {
		if !r.want["shm.persist"] && len(r.findings["shm.persist"]) == 0 {
			return r.note("shm.persist", "inside a container /etc/fstab does not decide "+m.Path)
		}
		return &Fix{ID: "shm.persist", Title: "Keep the bigger /dev/shm after reboot (/etc/fstab)", Guide: "shm-no-space", Risk: RiskMedium, NeedsRoot: true,
			Summary:     "Writes size= for " + m.Path + " to /etc/fstab.",
			Impossible:  fmt.Sprintf("inside a %s container /etc/fstab does not decide %s; the container's run options do", c.Runtime, m.Path),
			Alternative: "fix container.shm (the --shm-size / emptyDir setting the container starts with)"}
	}
	opt := sizeOption(size)
	fpath := h.Path("/etc/fstab")
	old, err := os.ReadFile(fpath)
	if err != nil && !os.IsNotExist(err) {
		return r.note("shm.persist", "cannot read /etc/fstab: "+err.Error())
	}
	_, ch, perr := fstab.SetOption(old, m.Path, "size", opt, keptOptions(m))
	if perr == nil && !ch.Changed {
		return r.note("shm.persist", "/etc/fstab already sets size="+opt+" for "+m.Path)
	}
	return persistFix(m, size, t.why, ch, perr)
}

// persistFix builds shm.persist for the mount m at size; ch is what the
// edit of /etc/fstab would change, perr why it cannot be edited.
func persistFix(m shm.Mount, size uint64, why string, ch fstab.Change, perr error) *Fix {
	opt := sizeOption(size)
	f := &Fix{
		ID:    "shm.persist",
		Title: fmt.Sprintf("Keep %s at %s after reboot (/etc/fstab)", m.Path, shm.Human(size)),
		Guide: "shm-no-space", Risk: RiskMedium, NeedsRoot: true,
		Recheck: nil,
	}
	var lines []string
	switch {
	case perr != nil:
		f.Impossible = "ncclwiz does not edit /etc/fstab it cannot parse: " + perr.Error()
		f.Alternative = fmt.Sprintf("add or change the %s entry by hand: tmpfs %s tmpfs %s,size=%s 0 0", m.Path, m.Path, strings.Join(keptOptions(m), ","), opt)
	case ch.Added:
		lines = []string{"# /etc/fstab gets a new entry:", "#   " + ch.NewLine}
	default:
		lines = []string{"# /etc/fstab, the " + m.Path + " entry changes from/to:", "#   " + ch.OldLine, "#   " + ch.NewLine}
	}
	lines = append(lines, "# a backup /etc/fstab.ncclwiz-<time>.bak is written first; the file is replaced atomically")
	f.Steps = []Step{{Lines: lines, Root: true}}
	f.Summary = fmt.Sprintf("Sets size=%s on the %s entry of /etc/fstab (adding one if there is none; %s). Only that entry's options change; "+
		"a backup is written first, the file is replaced atomically with its mode and owner, and nothing happens if it already says so. "+
		"It applies at the next boot; `sudo mount -o remount %s` applies the fstab options now.", opt, m.Path, orWhy(why), m.Path)
	newOpts := keptOptions(m)
	f.apply = func(ctx context.Context, h *host.Host, o ApplyOptions) (Outcome, error) {
		p := h.Path("/etc/fstab")
		if o.DryRun {
			cur, err := os.ReadFile(p)
			if err != nil && !os.IsNotExist(err) {
				return Outcome{}, err
			}
			_, ch, err := fstab.SetOption(cur, m.Path, "size", opt, newOpts)
			if err != nil {
				return Outcome{}, fmt.Errorf("refusing to edit /etc/fstab: %w", err)
			}
			out := Outcome{Summary: "/etc/fstab already says so; nothing to do"}
			if ch.Changed {
				out.Changed = []string{"would write to /etc/fstab: " + ch.NewLine}
				out.Summary = "would set size=" + opt + " in /etc/fstab; nothing changed"
			}
			return out, nil
		}
		ch, err := fstab.Edit(p, m.Path, "size", opt, newOpts, h.Now())
		if err != nil {
			return Outcome{}, err
		}
		out := Outcome{Before: map[string]any{"line": ch.OldLine}, After: map[string]any{"line": ch.NewLine}}
		if !ch.Changed {
			out.Summary = "/etc/fstab already sets size=" + opt + " for " + m.Path
			return out, nil
		}
		bak := strings.TrimPrefix(ch.Backup, strings.TrimSuffix(h.Root, "/"))
		out.Changed = []string{"/etc/fstab: " + ch.NewLine}
		if bak != "" {
			out.Changed = append(out.Changed, "backup: "+bak)
		}
		if bak != "" {
			o.progress("updated /etc/fstab (backup %s)", bak)
		} else {
			o.progress("created /etc/fstab")
		}
		// Proof: the file parses and says what was written.
		b, err := os.ReadFile(p)
		if err == nil {
			if _, again, err2 := fstab.SetOption(b, m.Path, "size", opt, newOpts); err2 == nil && !again.Changed {
				out.Verdict = VerdictPassed
				out.Proof = "/etc/fstab was read back: it parses and sets size=" + opt + " for " + m.Path
			}
		}
		out.Summary = "/etc/fstab now sets size=" + opt + " for " + m.Path + "; it applies at boot (or now: sudo mount -o remount " + m.Path + ")"
		return out, nil
	}
	f.script = func(s *script) { scriptPersist(s, m.Path, opt, strings.Join(newOpts, ",")) }
	return f
}

func orWhy(why string) string {
	if why == "" {
		return "the size it has now"
	}
	return why
}
