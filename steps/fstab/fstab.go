// Package fstab sets one option (size= for /dev/shm) on one /etc/fstab
// entry. It changes nothing but that entry's options field — every other
// byte of the file stays as it was — appends an entry when there is none,
// refuses a file it cannot parse (or one listing the mount point twice, or
// as something other than tmpfs), writes a backup first, replaces the file
// atomically (temporary file in the same directory, fsync, rename, fsync of
// the directory) keeping its mode and owner, and does nothing at all when
// the file already says what is wanted.
package fstab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/safefile"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
)

// Entry is one fstab line's fields, with octal escapes decoded.
type Entry struct {
	Spec, File, VFSType, Options string
	Freq, Passno                 int
	Line                         int // 1-based line number
}

// ErrMalformed marks content ncclwiz refuses to edit.
var ErrMalformed = errors.New("not a valid fstab")

// Parse reads fstab(5) content: blank lines and lines starting with # are
// comments; every other line has 4 to 6 whitespace-separated fields, a
// mount point that is a path (or none/swap), numeric freq and passno.
func Parse(b []byte) ([]Entry, error) {
	if bytes.IndexByte(b, 0) >= 0 {
		return nil, fmt.Errorf("%w: it contains a NUL byte", ErrMalformed)
	}
	var out []Entry
	for i, line := range strings.Split(string(b), "\n") {
		t := strings.Trim(line, " \t")
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if strings.IndexFunc(t, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) >= 0 {
			return nil, fmt.Errorf("%w: line %d holds control characters", ErrMalformed, i+1)
		}
		f := fields(t)
		if len(f) < 4 || len(f) > 6 {
			return nil, fmt.Errorf("%w: line %d has %d fields (want 4 to 6): %q", ErrMalformed, i+1, len(f), clip(t))
		}
		mp := host.UnescapeMount(f[1])
		if !(strings.HasPrefix(mp, "/") || mp == "none" || mp == "swap") {
			return nil, fmt.Errorf("%w: line %d: mount point %q is not a path", ErrMalformed, i+1, clip(f[1]))
		}
		e := Entry{Spec: host.UnescapeMount(f[0]), File: mp, VFSType: f[2], Options: f[3], Line: i + 1}
		for k, n := range f[4:] {
			v, err := strconv.Atoi(n)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("%w: line %d: %q is not a number", ErrMalformed, i+1, clip(n))
			}
			if k == 0 {
				e.Freq = v
			} else {
				e.Passno = v
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// fields splits an fstab line on blanks (spaces and tabs), as mount does.
func fields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' })
}

func clip(s string) string { return textwrap.Clip(s, 60) }

// optionSafe is what an option name or value written by SetOption may
// hold: no blanks, commas, comment signs or control bytes.
var optionSafe = regexp.MustCompile(`^[A-Za-z0-9._%+:/@-]+$`)

// Change says what SetOption did (or would do).
type Change struct {
	Changed bool
	// Added is set when a new entry was appended.
	Added bool
	// OldLine and NewLine are the entry before and after ("" when added).
	OldLine, NewLine string
	// Backup is where Edit saved the original.
	Backup string
}

// SetOption returns content with mountpoint's entry carrying key=value
// (replacing an existing key=, or added at the end of the options). With
// no entry, one is appended: "tmpfs <mountpoint> tmpfs <newOpts>,key=value 0 0".
func SetOption(content []byte, mountpoint, key, value string, newOpts []string) ([]byte, Change, error) {
	var ch Change
	for _, v := range append([]string{key, value}, newOpts...) {
		if !optionSafe.MatchString(v) {
			return nil, ch, fmt.Errorf("option text %q is not a plain mount option", v)
		}
	}
	entries, err := Parse(content)
	if err != nil {
		return nil, ch, err
	}
	want := path.Clean(mountpoint)
	idx := -1
	for i, e := range entries {
		if path.Clean(e.File) != want {
			continue
		}
		if idx >= 0 {
			return nil, ch, fmt.Errorf("%w: %s is listed twice (lines %d and %d); edit it by hand", ErrMalformed, want, entries[idx].Line, e.Line)
		}
		idx = i
	}
	kv := key + "=" + value
	if idx < 0 {
		opts := append(append([]string{}, newOpts...), kv)
		line := fmt.Sprintf("tmpfs %s tmpfs %s 0 0", host.EscapeMount(want), strings.Join(opts, ","))
		out := append([]byte{}, content...)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, "# added by ncclwiz: room for NCCL's shared-memory segments\n"+line+"\n"...)
		return out, Change{Changed: true, Added: true, NewLine: line}, nil
	}
	e := entries[idx]
	if e.VFSType != "tmpfs" {
		return nil, ch, fmt.Errorf("%s is mounted as %s in fstab (line %d), not tmpfs; ncclwiz only sets size= on a tmpfs entry", want, e.VFSType, e.Line)
	}
	lines := strings.Split(string(content), "\n")
	orig := lines[e.Line-1]
	start, end := fieldSpan(orig, 3)
	var opts []string
	set := false
	for _, o := range strings.Split(orig[start:end], ",") {
		if k, _, _ := strings.Cut(o, "="); k == key {
			if !set {
				opts = append(opts, kv)
				set = true
			}
			continue
		}
		opts = append(opts, o)
	}
	if !set {
		opts = append(opts, kv)
	}
	updated := orig[:start] + strings.Join(opts, ",") + orig[end:]
	if updated == orig {
		return content, Change{OldLine: orig, NewLine: orig}, nil
	}
	lines[e.Line-1] = updated
	return []byte(strings.Join(lines, "\n")), Change{Changed: true, OldLine: strings.Trim(orig, " \t"), NewLine: strings.Trim(updated, " \t")}, nil
}

// fieldSpan returns the byte range of the n-th (0-based) field of line.
func fieldSpan(line string, n int) (int, int) {
	i, field := 0, -1
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		start := i
		for i < len(line) && line[i] != ' ' && line[i] != '\t' {
			i++
		}
		field++
		if field == n {
			return start, i
		}
	}
	return len(line), len(line)
}

// Edit applies SetOption to the file at p: it refuses a symlink (a file
// managed elsewhere), writes the backup p.ncclwiz-<UTC time>.bak (never
// over an existing file), then replaces p atomically with the same mode
// and owner. A missing file is created (nothing to back up).
func Edit(p, mountpoint, key, value string, newOpts []string, now time.Time) (Change, error) {
	var ch Change
	fi, err := os.Lstat(p)
	switch {
	case err == nil && fi.Mode()&os.ModeSymlink != 0:
		return ch, fmt.Errorf("%s is a symlink (managed by another tool); edit its target by hand", p)
	case err == nil && !fi.Mode().IsRegular():
		return ch, fmt.Errorf("%s is not a regular file", p)
	case err != nil && !os.IsNotExist(err):
		return ch, fmt.Errorf("read %s: %w", p, err)
	}
	old, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		return ch, fmt.Errorf("read %s: %w", p, err)
	}
	updated, ch, err := SetOption(old, mountpoint, key, value, newOpts)
	if err != nil {
		return Change{}, fmt.Errorf("refusing to edit %s: %w", p, err)
	}
	if !ch.Changed || bytes.Equal(updated, old) {
		return Change{OldLine: ch.OldLine, NewLine: ch.NewLine}, nil
	}
	mode, uid, gid := os.FileMode(0o644), -1, -1
	if fi != nil {
		mode = fi.Mode().Perm()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	if old != nil {
		ch.Backup = fmt.Sprintf("%s.ncclwiz-%s.bak", p, now.UTC().Format("20060102T150405Z"))
		if err := writeNew(ch.Backup, old, mode); err != nil {
			return Change{}, fmt.Errorf("backup of %s: %w", p, err)
		}
	}
	if err := safefile.WriteWith(p, updated, safefile.Options{Perm: mode, ExactPerm: true, Chown: uid >= 0, UID: uid, GID: gid}); err != nil {
		return Change{}, err
	}
	return ch, nil
}

// writeNew creates a file that must not exist yet and syncs it.
func writeNew(p string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
