package steps

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/practice"
	"github.com/ncclwiz/ncclwiz/internal/shellquote"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
)

// ExportOptions tune ExportScriptWith.
type ExportOptions struct {
	// Version is ncclwiz's version, for the header.
	Version string
	// EtcDir replaces /etc in the files the script edits (fstab,
	// drop-ins); tests point it at a temporary directory. Default /etc.
	EtcDir string
	// Context are the global flags that chose the machine looked at
	// (--shm-path DIR), shell-quoted: the re-check command the script
	// prints carries them.
	Context string
}

// ExportScript writes the planned fixes as a bash script; see
// ExportScriptWith.
func ExportScript(_ context.Context, w io.Writer, h *host.Host, fixes []Fix, findings []checks.Finding, version string) error {
	return ExportScriptWith(w, h, fixes, findings, ExportOptions{Version: version})
}

// script collects the body of an exported script and the helper functions
// it needs.
type script struct {
	b       strings.Builder
	helpers map[string]bool
	nvars   int
	// etc is set when a step writes under $ETC: only then does the script
	// define it (an unused variable is shellcheck's SC2034).
	etc bool
}

func (s *script) use(names ...string) {
	for _, n := range names {
		s.helpers[n] = true
		for _, d := range helperDeps[n] {
			s.use(d)
		}
	}
}

func (s *script) printf(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

// comment writes text as comment lines, sanitised (no control bytes, no
// newlines from the machine) and wrapped.
func (s *script) comment(text string) {
	for _, l := range textwrap.Lines(oneLine(text), 76) {
		s.b.WriteString("# " + l + "\n")
	}
}

// literal precedes a line that single-quotes text holding $ or a
// backtick: shellcheck would ask whether an expansion was meant, and here
// it is not (a file name, a command line shown as text).
func (s *script) literal(text string) {
	if strings.ContainsAny(text, "$`") {
		s.b.WriteString("# shellcheck disable=SC2016 # a literal name, not an expansion\n")
	}
}

// say writes a line that prints msg (sanitised, quoted) when the script runs.
func (s *script) say(msg string) {
	ind := msg[:len(msg)-len(strings.TrimLeft(msg, " "))]
	s.b.WriteString("say " + shellquote.Quote(ind+oneLine(msg)) + "\n")
}

// PracticeName is the scenario a simulated host was built from ("" for a
// real machine): everything exported from it carries PracticeMarker.
func PracticeName(h *host.Host) string {
	if h == nil || !h.Simulated {
		return ""
	}
	if n := oneLine(h.Name); n != "" {
		return n
	}
	return "simulation"
}

// PracticeMarker is the line that marks a script or snippet exported from
// a practice scenario; tests and users can grep for it.
func PracticeMarker(name string) string { return practice.Marker(name) }

func oneLine(s string) string { return textsafe.Clean(strings.Join(strings.Fields(s), " ")) }

// ExportScriptWith writes a bash script that applies the fixes as planned
// (the same segments, PIDs, sizes and lines the preview showed):
// set -euo pipefail, a dry run unless given --apply, user steps and root
// steps in labelled sections, each step re-checking its precondition when
// it runs, idempotent (a second run changes nothing). It never ends a
// process by name and never removes a glob: files by path and inode,
// processes by PID and start time. Names with control bytes are never
// written into it.
func ExportScriptWith(w io.Writer, h *host.Host, fixes []Fix, findings []checks.Finding, opt ExportOptions) error {
	etc := opt.EtcDir
	if etc == "" {
		etc = "/etc"
	}
	version := opt.Version
	if version == "" {
		version = "(dev)"
	}
	var user, root []Fix
	for _, f := range fixes {
		if f.NeedsRoot && f.Impossible == "" && !f.Manual {
			root = append(root, f)
		} else {
			user = append(user, f)
		}
	}
	body := &script{helpers: map[string]bool{}}
	section := func(fs []Fix) {
		for _, f := range fs {
			exportFix(body, f)
		}
	}
	section(user)
	userBody := body.b.String()
	body.b.Reset()
	section(root)
	rootBody := body.b.String()

	var b strings.Builder
	b.WriteString("#!/usr/bin/env bash\n")
	practice := PracticeName(h)
	if practice != "" {
		fmt.Fprintf(&b, "# %s\n", PracticeMarker(practice))
		b.WriteString(`#
# PRACTICE SCRIPT. It was exported from a simulated server, so its steps
# (segments, PIDs, sizes, files) describe the simulation, not this machine.
# It is for reading: it runs none of them, and with --apply it refuses and
# exits 3 before any action. For this machine: ncclwiz fix --export fix.sh
# (without --scenario).
`)
	}
	fmt.Fprintf(&b, "# ncclwiz fix script for %s, written by ncclwiz %s on %s.\n", oneLine(h.Name), oneLine(version), h.Now().UTC().Format("2006-01-02 15:04 UTC"))
	if practice == "" {
		b.WriteString(howToRun)
	} else {
		b.WriteString("#\n# (A real machine's script says here how to run it; this one does not run.)\n#\n")
	}
	b.WriteString("# Findings it answers:\n")
	seen := map[string]bool{}
	n := 0
	for _, f := range findings {
		key := f.Check + "\x00" + f.Title
		if !f.Severity.IsProblem() || f.Title == "" || seen[key] || !answered(f, fixes) {
			continue
		}
		seen[key] = true
		n++
		fmt.Fprintf(&b, "#   [%s] %s: %s\n", f.Severity, f.Check, clipText(oneLine(f.Title), 100))
	}
	if n == 0 {
		b.WriteString("#   (none with warnings or errors; the fixes were asked for by name)\n")
	}
	b.WriteString("#\n# Fixes:\n")
	for _, f := range fixes {
		who := "user"
		switch {
		case f.Impossible != "":
			who = "n/a "
		case f.Manual:
			who = "info"
		case f.NeedsRoot:
			who = "root"
		}
		fmt.Fprintf(&b, "#   %-18s %s  %s\n", f.ID, who, clipText(oneLine(f.Title), 90))
	}
	b.WriteString("\nset -euo pipefail\nexport LC_ALL=C\n")
	if body.etc {
		fmt.Fprintf(&b, "ETC=%s\n", shellquote.Quote(etc))
	}
	fmt.Fprintf(&b, "NCCLWIZ_PRACTICE=%s\n", shellquote.Quote(practice))
	b.WriteString(scriptPrelude)
	b.WriteString(practiceGuard)
	for _, name := range helperOrder {
		if body.helpers[name] {
			b.WriteString("\n" + helperText[name])
		}
	}
	b.WriteString("\nsection 'user steps (as '\"$(id -un)\"')'\n")
	if len(user) == 0 {
		b.WriteString("say '  none'\n")
	}
	b.WriteString(userBody)
	b.WriteString("\nsection 'steps that need root'\n")
	if len(root) == 0 {
		b.WriteString("say '  none'\n")
	} else {
		var ids []string
		for _, f := range root {
			ids = append(ids, f.ID)
		}
		fmt.Fprintf(&b, "if [ \"$APPLY\" = 1 ] && ! is_root; then\n  say \"  skipped, they need root: %s. Run: sudo bash $0 --apply\"\n  SKIPPED=$((SKIPPED + %d))\nelse\n",
			strings.Join(ids, ", "), len(root))
		b.WriteString(indent(rootBody))
		b.WriteString("fi\n")
	}
	recheck := "ncclwiz check"
	if opt.Context != "" {
		recheck += " " + opt.Context
	}
	b.WriteString(strings.Replace(scriptFooter, "RECHECK", shellquote.Quote("Re-check with: "+recheck), 1))
	_, err := io.WriteString(w, b.String())
	return err
}

// howToRun is the header of a real machine's script.
const howToRun = `#
# Review it, then run:
#   bash THIS_SCRIPT            a dry run: says what it would do, changes nothing
#   bash THIS_SCRIPT --apply    does it; the root steps need: sudo bash THIS_SCRIPT --apply
#
# Every step re-checks its precondition right before it acts, and does
# nothing when there is nothing left to do, so it is safe to run again.
# Files are named by path and checked by inode, processes by PID and start
# time; nothing is matched by a name pattern and nothing is killed with -9.
#
`

// answered reports whether one of the fixes names the finding's check or
// is named by the finding.
func answered(f checks.Finding, fixes []Fix) bool {
	for _, x := range fixes {
		for _, id := range f.Fixes {
			if id == x.ID {
				return true
			}
		}
	}
	return false
}

func indent(s string) string {
	var out []string
	inHeredoc := ""
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		switch {
		case inHeredoc != "":
			if l == inHeredoc {
				inHeredoc = ""
			}
			out = append(out, l) // a here-document's lines stay as they are
			continue
		case l == "":
			out = append(out, l)
		default:
			out = append(out, "  "+l)
		}
		if m := heredocStart.FindStringSubmatch(l); m != nil {
			inHeredoc = m[1]
		}
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

func exportFix(s *script, f Fix) {
	who := "user"
	if f.NeedsRoot {
		who = "root"
	}
	s.printf("\n# --- %s: %s [%s]\n", f.ID, oneLine(f.Title), who)
	s.comment(f.Summary)
	for _, w := range f.Warnings {
		s.comment("left alone: " + w)
	}
	s.printf("step %s %s\n", shellquote.Quote(f.ID), shellquote.Quote(oneLine(f.Title)))
	switch {
	case f.Impossible != "":
		s.say("  not possible here: " + f.Impossible)
		s.say("  instead: " + f.Alternative)
	case f.Manual || f.script == nil:
		s.comment("Nothing to run on this machine; what to do:")
		for _, l := range f.Preview() {
			s.b.WriteString(strings.TrimRight("#   "+textsafe.Sanitize(textsafe.RedactText(l)), " ") + "\n")
		}
		s.say("  nothing to run here: see the comments of " + f.ID + " in this script (or: ncclwiz fix)")
	default:
		f.script(s)
	}
}

// ---- per-fix script bodies --------------------------------------------

func scriptCleanup(s *script, cands []shm.Segment, skipped []string) {
	s.use("remove_unused")
	for _, c := range cands {
		if !textsafe.IsClean(c.Path) || strings.ContainsAny(c.Path, "\n\r") {
			s.comment("skipped (name has control bytes): " + textsafe.Sanitize(c.Path))
			continue
		}
		s.literal(c.Path)
		s.printf("remove_unused %s %d   # %s\n", shellquote.Quote(c.Path), c.Ino, shm.Human(uint64(c.Allocated)))
	}
}

func scriptStale(s *script, targets []rank) {
	s.use("stop_rank")
	for _, t := range targets {
		desc := clipText(t.Command, 60)
		s.literal(desc)
		s.printf("stop_rank %d %d %s\n", t.PID, t.Start, shellquote.Quote(desc))
	}
}

func scriptRemount(s *script, dir string, size uint64) {
	s.use("remount_shm")
	s.printf("remount_shm %s %s %d\n", shellquote.Quote(dir), sizeOption(size), size)
}

func scriptPersist(s *script, mountpoint, size, opts string) {
	s.use("fstab_set")
	s.etc = true
	s.printf("fstab_set \"$ETC/fstab\" %s %s %s\n", shellquote.Quote(mountpoint), shellquote.Quote(size), shellquote.Quote(opts))
}

func scriptDropIn(s *script, d dropIn) {
	s.use("put_file")
	s.etc = true
	s.nvars++
	v := fmt.Sprintf("content_%d", s.nvars)
	s.printf("IFS= read -r -d '' %s <<'NCCLWIZ_EOF' || true\n%sNCCLWIZ_EOF\n", v, d.content)
	p := "\"$ETC\"" + shellquote.Quote(strings.TrimPrefix(d.path, "/etc"))
	if len(d.restart) > 0 {
		s.printf("if put_file %s \"$%s\"; then act %s; fi\n", p, v, strings.Join(d.restart, " "))
		return
	}
	s.printf("put_file %s \"$%s\" || true\n", p, v)
	s.say("  " + d.effect)
}
