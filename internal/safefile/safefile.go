// Package safefile writes output files the user named without trusting
// what is already at that name: a symlink is refused (never written
// through), and the content goes to a new file in the same directory that
// is renamed over the name, so an existing file is replaced, not modified,
// and its old permissions and other hard links never see the new content.
package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// ErrSymlink is returned (wrapped) when the name is a symbolic link.
var ErrSymlink = errors.New("is a symbolic link; ncclwiz does not write through links (remove it or choose another name)")

// ErrNotRegular is returned (wrapped) when the name is a directory, a
// device, a FIFO or a socket.
var ErrNotRegular = errors.New("exists and is not a regular file")

// Check reports why path cannot be written by Write: a symlink or a
// non-regular file. A missing path is fine.
func Check(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s %w", path, ErrSymlink)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %w", path, ErrNotRegular)
	}
	return nil
}

// Write puts data at path with the given permissions (mode 0600 is kept
// as is; others are narrowed by the process umask). See WriteWith.
func Write(path string, data []byte, perm fs.FileMode) error {
	return WriteWith(path, data, Options{Perm: perm})
}

// Options says what file WriteWith makes.
type Options struct {
	Perm fs.FileMode
	// ExactPerm keeps Perm as given instead of narrowing it by the umask:
	// a system file (/etc/fstab) is replaced with the mode it had.
	ExactPerm bool
	// Chown gives the new file UID and GID when running as root, so that a
	// system file keeps its owner.
	Chown    bool
	UID, GID int
	// NoReplace never replaces what is at path: when something is there
	// the write fails with an error that wraps fs.ErrExist (the file is
	// put in place with renameat2(RENAME_NOREPLACE), or link(2) where the
	// file system lacks it, so a file created meanwhile is not replaced
	// either). Output files the user names are written this way unless
	// they said to replace.
	NoReplace bool
}

// WriteWith replaces path with data, atomically and durably: the file is
// created with O_EXCL under a random name in the same directory, synced,
// renamed over path, and the directory synced so that the rename survives
// a crash. Readers see the old file or the new one, never a mix; on any
// failure the temporary file is removed. A symlink or non-regular file at
// path is refused (Check).
func WriteWith(path string, data []byte, o Options) (err error) {
	if err := Check(path); err != nil {
		return err
	}
	if o.NoReplace {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("write %s: %w", path, fs.ErrExist)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".ncclwiz-*")
	if err != nil {
		return fail(path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
			err = fail(path, err)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	perm := o.Perm
	if !o.ExactPerm {
		perm &^= umask()
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if o.Chown && os.Geteuid() == 0 {
		if err := tmp.Chown(o.UID, o.GID); err != nil {
			return err
		}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// A symlink planted after Check is replaced by the rename (rename
	// does not follow links), never written through.
	if o.NoReplace {
		if err := placeNew(tmp.Name(), path); err != nil {
			return err
		}
	} else if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is; a directory that
	// cannot be synced (some network file systems) leaves it as durable as
	// the file system makes it.
	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// placeNew moves tmp to path only if nothing is at path (a symlink or a
// file made since the check included): renameat2(RENAME_NOREPLACE), or a
// hard link and an unlink where the file system has no such rename.
func placeNew(tmp, path string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EEXIST) {
		return fs.ErrExist
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return os.Remove(tmp)
}

// fail names the path the user gave, not the temporary file.
func fail(path string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return fmt.Errorf("write %s: %w", path, err)
}

// umask reads the process umask without changing it (status's Umask
// line, Linux 4.7+, through proctab on the real /proc); 022 when it cannot
// be read.
func umask() fs.FileMode {
	if self, err := proctab.Self(&host.Host{Root: "/"}); err == nil && self.UmaskKnown {
		return self.Umask
	}
	return 0o022
}
