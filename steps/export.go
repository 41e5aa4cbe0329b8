package steps

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/textsafe"
)

// scriptHeader holds the helpers every exported script uses. The script is
// a dry run unless given --apply; each step re-checks its precondition when
// it runs, so a second run changes nothing.
const scriptHeader = `set -euo pipefail

APPLY=0
case "${1:-}" in
  --apply) APPLY=1 ;;
  ""|--dry-run) ;;
  *) echo "usage: $0 [--dry-run|--apply]" >&2; exit 2 ;;
esac

say() { printf '%s\n' "$*"; }
# act runs a command with --apply and only shows it otherwise.
act() {
  if [ "$APPLY" = 1 ]; then
    say "+ $*"
    "$@"
  else
    say "would run: $*"
  fi
}
is_root() { [ "$(id -u)" -eq 0 ]; }

# shm_unused PATH INODE: true only if PATH is still that regular file (same
# inode, not a symlink), older than two minutes, and no process has it open
# or mapped. Processes this user cannot inspect count as holders.
shm_unused() {
  local p=$1 ino=$2 owner pid fd link
  [ -f "$p" ] && [ ! -L "$p" ] || return 1
  [ "$(stat -c %i -- "$p")" = "$ino" ] || return 1
  [ "$(stat -c %h -- "$p")" = 1 ] || return 1
  [ $(( $(date +%s) - $(stat -c %Y -- "$p") )) -ge 120 ] || return 1
  owner=$(stat -c %u -- "$p")
  for pid in /proc/[0-9]*; do
    [ -d "$pid" ] || continue
    if ! ls "$pid/fd" >/dev/null 2>&1 || ! [ -r "$pid/maps" ]; then
      # Unreadable: only a problem if that process could open the file.
      [ "$(stat -c %u "$pid" 2>/dev/null || echo x)" = "$owner" ] && return 1
      continue
    fi
    for fd in "$pid"/fd/*; do
      link=$(readlink -- "$fd" 2>/dev/null) || continue
      [ "$link" = "$p" ] && return 1
    done
    grep -qF -- " $ino " "$pid/maps" 2>/dev/null && return 1
  done
  return 0
}

# same_proc PID STARTTIME: true if PID still runs the process first seen.
same_proc() {
  local pid=$1 start=$2 stat
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  set -- $stat
  [ "${20:-}" = "$start" ]
}
`

// ExportScript writes a bash script that applies the fixes on this machine
// or a copy of it. User-level steps come first; root steps are skipped with
// a message unless the script runs as root.
func ExportScript(ctx context.Context, w io.Writer, h *host.Host, fixes []Fix, findings []checks.Finding, version string) error {
	var b strings.Builder
	b.WriteString("#!/usr/bin/env bash\n")
	fmt.Fprintf(&b, "# Fix script written by ncclwiz %s on %s for %s.\n", version, h.Now().UTC().Format("2006-01-02 15:04 UTC"), textsafe.Sanitize(h.Name))
	b.WriteString("# Review it, then run: bash THIS_FILE (dry run)   and   bash THIS_FILE --apply\n#\n# Findings it answers:\n")
	seen := map[string]bool{}
	for _, f := range findings {
		if !f.Severity.IsProblem() || seen[f.Title] {
			continue
		}
		seen[f.Title] = true
		fmt.Fprintf(&b, "#   [%s] %s: %s\n", f.Severity, f.Check, oneLine(f.Title))
	}
	b.WriteString("#\n# shellcheck disable=SC2086\n")
	b.WriteString(scriptHeader)

	var user, root []Fix
	for _, f := range fixes {
		if f.NeedsRoot {
			root = append(root, f)
		} else {
			user = append(user, f)
		}
	}
	b.WriteString("\nsay \"== steps for $(id -un)\"\n")
	for _, f := range user {
		if err := exportFix(ctx, &b, h, f); err != nil {
			return err
		}
	}
	if len(root) > 0 {
		b.WriteString("\nsay \"== steps that need root\"\nif ! is_root; then\n  say \"skipped: re-run with sudo to apply these\"\nelse\n")
		for _, f := range root {
			if err := exportFix(ctx, &b, h, f); err != nil {
				return err
			}
		}
		b.WriteString("fi\n")
	}
	b.WriteString("\nif [ \"$APPLY\" = 1 ]; then say \"done; re-check with: ncclwiz check\"; else say \"dry run: nothing changed (pass --apply to act)\"; fi\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func oneLine(s string) string {
	return strings.ReplaceAll(textsafe.Clean(s), "\n", " ")
}

func exportFix(ctx context.Context, b *strings.Builder, h *host.Host, f Fix) error {
	fmt.Fprintf(b, "\n# --- %s: %s\n", f.ID, oneLine(f.Title))
	for _, l := range wrapComment(f.Summary, 76) {
		fmt.Fprintf(b, "# %s\n", l)
	}
	if f.Impossible != "" {
		fmt.Fprintf(b, "say %s\n", ShellQuote(f.ID+": not possible here: "+oneLine(f.Impossible)+"; instead: "+oneLine(f.Alternative)))
		return nil
	}
	switch f.ID {
	case "shm.cleanup":
		inv, err := shm.Scan(ctx, h)
		if err != nil {
			return err
		}
		cands, skipped := cleanupCandidates(inv, h, false)
		for _, s := range skipped {
			fmt.Fprintf(b, "# left alone: %s\n", oneLine(s))
		}
		for _, s := range cands {
			q := ShellQuote(s.Path)
			fmt.Fprintf(b, "if shm_unused %s %d; then act rm -- %s; elif [ -e %s ]; then say %s; fi\n",
				q, s.Ino, q, q, ShellQuote("kept "+s.Path+": in use, changed or too new"))
		}
	case "proc.stale":
		for _, t := range staleTargets(ctx, h) {
			fmt.Fprintf(b, "if same_proc %d %d; then act kill -TERM %d; else say %s; fi\n", t.PID, t.StartTicks, t.PID,
				ShellQuote(fmt.Sprintf("pid %d already gone", t.PID)))
		}
		b.WriteString("# If a rank ignores SIGTERM, end it by PID with kill -KILL after checking it is still the same process.\n")
	case "shm.remount":
		m, size, _, _ := remountPlan(ctx, h)
		if size == 0 {
			return nil
		}
		q := ShellQuote(m.Path)
		fmt.Fprintf(b, "if [ \"$(findmnt -no FSTYPE --target %s)\" != tmpfs ]; then say %s\n", q, ShellQuote(m.Path+" is not a tmpfs; not remounting"))
		fmt.Fprintf(b, "elif [ \"$(df --output=size -B1 %s | tail -n 1 | tr -d ' ')\" -ge %d ]; then say %s\n", q, size, ShellQuote(m.Path+" is already "+shm.Human(size)+" or more"))
		fmt.Fprintf(b, "else act mount -o remount,size=%s %s; fi\n", sizeOption(size), q)
	case "shm.persist":
		m, size, _, _ := remountPlan(ctx, h)
		if size == 0 {
			return nil
		}
		line := fmt.Sprintf("tmpfs %s tmpfs defaults,size=%s 0 0", m.Path, sizeOption(size))
		re := "^[^#]*[[:space:]]" + strings.ReplaceAll(m.Path, ".", "\\.") + "[[:space:]]"
		fmt.Fprintf(b, "if grep -qE %s /etc/fstab && grep -E %s /etc/fstab | grep -q %s; then say %s\n",
			ShellQuote(re), ShellQuote(re), ShellQuote("size="+sizeOption(size)), ShellQuote("/etc/fstab already sets size="+sizeOption(size)))
		fmt.Fprintf(b, "elif grep -qE %s /etc/fstab; then say %s\n", ShellQuote(re),
			ShellQuote("/etc/fstab has a "+m.Path+" line with another size; change it to size="+sizeOption(size)+" by hand, or run: sudo ncclwiz fix --apply shm.persist"))
		fmt.Fprintf(b, "else act cp -p /etc/fstab /etc/fstab.ncclwiz.bak; if [ \"$APPLY\" = 1 ]; then printf '%%s\\n' %s >> /etc/fstab; else say %s; fi; fi\n",
			ShellQuote(line), ShellQuote("would append to /etc/fstab: "+line))
	case "systemd.removeipc", "limits.memlock":
		d := removeIPCDropIn
		if f.ID == "limits.memlock" {
			d = memlockDropIn
		}
		q := ShellQuote(d.path)
		fmt.Fprintf(b, "want=%s\n", ShellQuote(d.content))
		fmt.Fprintf(b, "if [ -f %s ] && [ \"$(cat %s)\" = \"${want%%$'\\n'}\" ]; then say %s\n", q, q, ShellQuote(d.path+" already in place"))
		fmt.Fprintf(b, "else act mkdir -p %s; if [ \"$APPLY\" = 1 ]; then printf '%%s' \"$want\" > %s.tmp && mv -- %s.tmp %s; else say %s; fi\n",
			ShellQuote(parentDir(d.path)), q, q, q, ShellQuote("would write "+d.path))
		if len(d.after) > 0 {
			fmt.Fprintf(b, "  act %s\n", strings.Join(d.after, " "))
		}
		b.WriteString("fi\n")
	default:
		// Manual fixes: what to do, as comments, and a line saying so.
		for _, s := range f.Steps {
			if s.Comment != "" {
				fmt.Fprintf(b, "# %s\n", oneLine(s.Comment))
			}
			for _, l := range s.Lines {
				fmt.Fprintf(b, "#   %s\n", oneLine(l))
			}
		}
		fmt.Fprintf(b, "say %s\n", ShellQuote(f.ID+": nothing to run here; see the comments above in this script"))
	}
	return nil
}

func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

func wrapComment(s string, width int) []string {
	var out []string
	line := ""
	for _, w := range strings.Fields(oneLine(s)) {
		if line != "" && len(line)+1+len(w) > width {
			out = append(out, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}

// PlanFor plans the named fixes even when no finding asked for them (an
// explicit `ncclwiz fix --apply ID`), plus whatever the findings ask for.
func PlanFor(ctx context.Context, h *host.Host, findings []checks.Finding, ids []string) []Fix {
	extra := make([]checks.Finding, 0, len(ids))
	for _, id := range ids {
		extra = append(extra, checks.Finding{Check: "user", Severity: checks.Warn, Title: "requested: " + id, Fixes: []string{id}})
	}
	fs := Plan(ctx, h, append(append([]checks.Finding{}, findings...), extra...))
	sort.SliceStable(fs, func(i, j int) bool { return !fs[i].NeedsRoot && fs[j].NeedsRoot })
	return fs
}
