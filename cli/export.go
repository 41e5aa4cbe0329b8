package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/internal/safefile"
	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// writeExport writes a script the user asked for at path (fix --export,
// the wizard's e): through safefile (never through a symlink, never half
// written), and never over an existing file unless replace says so (the
// user was asked, or gave --yes). An unwritable place is said with its
// directory and somewhere that takes it (issue 25 item 7, issue 22 item 1).
func writeExport(a *App, path string, data []byte, replace bool) error {
	err := safefile.WriteWith(path, data, safefile.Options{Perm: 0o755, NoReplace: !replace})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		return existsError{path: path}
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS):
		dir := filepath.Dir(path)
		if abs, aerr := filepath.Abs(dir); aerr == nil {
			dir = abs
		}
		alt := exportAlternative(a, filepath.Base(path))
		return unwritableError{dir: dir, alt: alt, err: err}
	}
	return err
}

// exportAlternative is a place the user can write to: their home, else
// the temporary directory.
func exportAlternative(a *App, base string) string {
	for _, d := range []string{termio.Getenv(a.Env, "HOME"), os.TempDir()} {
		if d != "" && unix.Access(d, unix.W_OK) == nil {
			return filepath.Join(d, base)
		}
	}
	return ""
}

// existsError: something is already at the export's path.
type existsError struct{ path string }

func (e existsError) Error() string {
	return textsafe.Sanitize(e.path) + " already exists; ncclwiz does not replace a file without asking"
}
func (existsError) Unwrap() error { return fs.ErrExist }

// unwritableError: the export's directory does not take the file.
type unwritableError struct {
	dir, alt string
	err      error
}

func (e unwritableError) Error() string {
	msg := fmt.Sprintf("cannot write in %s (%v)", textsafe.Sanitize(e.dir), errors.Unwrap(e.err))
	if e.alt != "" {
		msg += "; try " + textsafe.Sanitize(e.alt)
	}
	return msg
}
func (e unwritableError) Unwrap() error { return e.err }

// Alternative is the path to offer instead (the wizard pre-fills it).
func (e unwritableError) Alternative() string { return e.alt }
