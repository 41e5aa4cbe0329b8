// Package fstab edits /etc/fstab for one mount point: it sets the options
// of an existing entry or appends one, keeps every other line byte for
// byte, refuses files it cannot parse, makes a backup, writes atomically
// and changes nothing when the file already says what is wanted.
package fstab

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Entry is one fstab line's fields.
type Entry struct {
	Spec, File, VFSType, Options, Freq, Passno string
}

func (e Entry) String() string {
	return strings.Join([]string{e.Spec, e.File, e.VFSType, e.Options, e.Freq, e.Passno}, "\t")
}

// Parse checks every non-comment line has 4 to 6 fields.
func Parse(b []byte) ([]Entry, error) {
	var out []Entry
	for i, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Fields(t)
		if len(f) < 4 || len(f) > 6 {
			return nil, fmt.Errorf("line %d has %d fields (want 4 to 6): %q", i+1, len(f), t)
		}
		if !(strings.HasPrefix(f[1], "/") || f[1] == "none" || f[1] == "swap") {
			return nil, fmt.Errorf("line %d: mount point %q is not a path", i+1, f[1])
		}
		for _, n := range f[4:] {
			if strings.Trim(n, "0123456789") != "" {
				return nil, fmt.Errorf("line %d: %q is not a number", i+1, n)
			}
		}
		for len(f) < 6 {
			f = append(f, "0")
		}
		out = append(out, Entry{f[0], f[1], f[2], f[3], f[4], f[5]})
	}
	return out, nil
}

// SetOption returns content with mountpoint's entry carrying option
// key=value (added or replaced), or a new tmpfs entry appended.
func SetOption(content []byte, mountpoint, key, value string) ([]byte, bool, error) {
	if _, err := Parse(content); err != nil {
		return nil, false, fmt.Errorf("refusing to edit: %w", err)
	}
	lines := strings.Split(string(content), "\n")
	found := false
	changed := false
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Fields(t)
		if f[1] != mountpoint {
			continue
		}
		if found {
			return nil, false, fmt.Errorf("refusing to edit: %s is listed more than once", mountpoint)
		}
		found = true
		opts := strings.Split(f[3], ",")
		var out []string
		set := false
		for _, o := range opts {
			if k, _, _ := strings.Cut(o, "="); k == key {
				if !set {
					out = append(out, key+"="+value)
					set = true
				}
				continue
			}
			if o == "defaults" && len(opts) > 1 {
				out = append(out, o)
				continue
			}
			out = append(out, o)
		}
		if !set {
			out = append(out, key+"="+value)
		}
		newOpts := strings.Join(out, ",")
		if newOpts != f[3] {
			f[3] = newOpts
			lines[i] = strings.Join(f, "\t")
			changed = true
		}
	}
	if !found {
		entry := Entry{"tmpfs", mountpoint, "tmpfs", "defaults," + key + "=" + value, "0", "0"}
		// Keep the final newline where it is.
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = append(lines[:len(lines)-1], "# added by ncclwiz: shared memory for NCCL's SHM transport", entry.String(), "")
		} else {
			lines = append(lines, "# added by ncclwiz: shared memory for NCCL's SHM transport", entry.String())
		}
		changed = true
	}
	return []byte(strings.Join(lines, "\n")), changed, nil
}

// Result says what Edit did.
type Result struct {
	Changed bool
	Backup  string
}

// Edit applies SetOption to the file at path: backup next to it, write to a
// temporary file in the same directory, fsync, rename.
func Edit(path, mountpoint, key, value string, now time.Time) (Result, error) {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return Result{}, fmt.Errorf("read %s: %w", path, err)
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	updated, changed, err := SetOption(old, mountpoint, key, value)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	if !changed || bytes.Equal(updated, old) {
		return Result{}, nil
	}
	res := Result{Changed: true}
	if old != nil {
		res.Backup = fmt.Sprintf("%s.ncclwiz-%s.bak", path, now.UTC().Format("20060102T150405Z"))
		if err := os.WriteFile(res.Backup, old, mode); err != nil {
			return Result{}, fmt.Errorf("backup %s: %w", path, err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fstab.ncclwiz-*")
	if err != nil {
		return Result{}, fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(updated); err != nil {
		tmp.Close()
		return Result{}, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return Result{}, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return Result{}, err
	}
	if err := tmp.Close(); err != nil {
		return Result{}, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return Result{}, fmt.Errorf("replace %s: %w", path, err)
	}
	return res, nil
}
