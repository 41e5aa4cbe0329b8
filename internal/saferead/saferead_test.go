package saferead

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The reader's own cases, quick enough for the race detector (the
// hostile-input suites, internal/hostiletest, attack it through every
// reader in child processes).
func TestFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if b, err := File(ctx, p, Options{Limit: 5}); err != nil || string(b) != "hello" {
		t.Errorf("regular: %q %v", b, err)
	}
	if _, err := File(ctx, p, Options{Limit: 4}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	link := filepath.Join(dir, "l")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := File(ctx, link, Options{}); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlink: %v", err)
	}
	if b, err := File(ctx, link, Options{FollowLinks: true}); err != nil || string(b) != "hello" {
		t.Errorf("symlink followed: %q %v", b, err)
	}
	fifo := filepath.Join(dir, "p")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := File(ctx, fifo, Options{}); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("FIFO: %v", err)
	}
	// A pipe asked for: read until the writer stops, or ctx ends.
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // keeps a writer so reads wait
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write([]byte("gpu01\n")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := File(cctx, fifo, Options{Pipes: true, Limit: 1 << 20}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a pipe that never ends: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the read ended %s after its deadline", d)
	}
	if _, err := File(ctx, dir, Options{}); !strings.Contains(fmtErr(err), "directory") {
		t.Errorf("directory: %v", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
