// Package saferead is the one way ncclwiz reads a file whose name someone
// else may control (flight-recorder dumps in /tmp, --from-json reports,
// NCCL config files, startup files, hostfiles): the name is opened without
// following a final symlink and without blocking (a FIFO swapped in cannot
// hang the open), the opened descriptor — not the name — is checked to be
// a regular file, and the read is bounded and cancellable. Checking the
// name first and opening it afterwards is the race this package removes.
package saferead

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrTooLarge is returned (wrapped) when the file holds more than the limit.
var ErrTooLarge = errors.New("too large")

// ErrNotRegular is returned (wrapped) when the name is not a regular file
// (a symlink, FIFO, socket, device or directory).
var ErrNotRegular = errors.New("not a regular file")

// KindError says what the name turned out to be instead of a regular file.
type KindError struct {
	Path string
	// Kind is "a symbolic link", "a FIFO (named pipe)", "a character
	// device", "a block device", "a socket" or "a directory".
	Kind string
}

func (e *KindError) Error() string {
	if e.Kind == "a symbolic link" {
		return e.Path + " is a symbolic link; not followed"
	}
	return e.Path + " is " + e.Kind + ", not a regular file; not read"
}

// Unwrap makes errors.Is(err, ErrNotRegular) true.
func (e *KindError) Unwrap() error { return ErrNotRegular }

// Options bound one read.
type Options struct {
	// Limit is the most bytes accepted; a longer file is ErrTooLarge.
	Limit int64
	// Pipes accepts a FIFO or pipe the user named on purpose (a hostfile
	// given as <(…)): it is read until EOF, the limit or ctx.
	Pipes bool
	// FollowLinks follows a final symlink (a path the user typed
	// themselves, never one found in a shared directory).
	FollowLinks bool
}

// File reads path under o. Errors name the path and say why.
func File(ctx context.Context, path string, o Options) ([]byte, error) {
	return At(ctx, unix.AT_FDCWD, path, path, o)
}

// At reads name relative to the directory dirfd (AT_FDCWD for a path);
// shown is the name errors use.
func At(ctx context.Context, dirfd int, name, shown string, o Options) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK
	if !o.FollowLinks {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) && !o.FollowLinks {
			// O_NOFOLLOW's answer for a final symlink (it may have been
			// swapped away again by now, so it is not looked at twice).
			return nil, &KindError{Path: shown, Kind: "a symbolic link"}
		}
		return nil, &os.PathError{Op: "open", Path: shown, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: shown, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if o.Limit > 0 && st.Size > o.Limit {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("%s holds %d bytes, more than the %s this reader accepts: %w", shown, st.Size, human(o.Limit), ErrTooLarge)
		}
		return readRegular(ctx, fd, shown, o.Limit, st.Size)
	case unix.S_IFIFO, unix.S_IFSOCK:
		if o.Pipes {
			return readPipe(ctx, fd, shown, o.Limit)
		}
	}
	_ = unix.Close(fd)
	return nil, &KindError{Path: shown, Kind: kind(st.Mode)}
}

// KindOf names what a non-regular file is, for messages ("a FIFO (named
// pipe)", "a symbolic link", …).
func KindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "not a regular file"
}

func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO (named pipe)"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return "not a regular file"
}

// chunk is one read; ctx is checked between chunks.
const chunk = 256 << 10

// readRegular reads a regular file in chunks up to limit+1 bytes. A read
// from a regular file cannot be interrupted (a hung network filesystem), so
// it runs beside the caller, who stops waiting when ctx ends; the
// descriptor is closed when the read returns.
func readRegular(ctx context.Context, fd int, shown string, limit, size int64) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer unix.Close(fd)
		// Sized from fstat (a file that grows meanwhile still stops at
		// the limit), so a big dump is not copied over and over.
		capN := max(size, 0)
		if limit > 0 {
			capN = min(capN, limit)
		}
		b := make([]byte, 0, capN+1)
		buf := make([]byte, chunk)
		for {
			if ctx.Err() != nil {
				done <- result{nil, ctx.Err()}
				return
			}
			n, err := unix.Read(fd, buf)
			if n > 0 {
				b = append(b, buf[:n]...)
				if limit > 0 && int64(len(b)) > limit {
					done <- result{nil, fmt.Errorf("%s holds more than the %s this reader accepts: %w", shown, human(limit), ErrTooLarge)}
					return
				}
			}
			switch {
			case errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN):
				continue
			case err != nil:
				done <- result{nil, &os.PathError{Op: "read", Path: shown, Err: err}}
				return
			case n == 0:
				done <- result{b, nil}
				return
			}
		}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("read %s: %w", shown, ctx.Err())
	}
}

// readPipe reads a FIFO or pipe through Go's poller (the descriptor is
// non-blocking), so ctx ends the read at once.
func readPipe(ctx context.Context, fd int, shown string, limit int64) ([]byte, error) {
	f := os.NewFile(uintptr(fd), shown)
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	r := io.Reader(f)
	if limit > 0 {
		r = io.LimitReader(f, limit+1)
	}
	b, err := io.ReadAll(r)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("read %s: %w", shown, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", shown, err)
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s holds more than the %s this reader accepts: %w", shown, human(limit), ErrTooLarge)
	}
	return b, nil
}

func human(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
