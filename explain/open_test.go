package explain

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// deadline bounds every wait in these tests; it is generous, and reaching
// it means the reader ignored its context (not that it was slow).
const deadline = 20 * time.Second

func readInput(t *testing.T, in Input) (string, error) {
	t.Helper()
	rc, err := in.Open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// A FIFO whose writer wrote and exited: checked without opening, opened
// once, read in full.
func TestPathInputFIFOWriterExits(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log.fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err == nil {
			_, _ = f.WriteString("line one\nline two\n")
			_ = f.Close()
		}
	}()
	in, err := PathInput(context.Background(), p, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readInput(t, in)
	if err != nil || got != "line one\nline two\n" {
		t.Errorf("read %q, %v", got, err)
	}
}

// Cancelling ends the wait for a FIFO's writer, a read that waits for
// data (the writer holds the FIFO open), and a non-file reader's read.
func TestCancelEndsWaits(t *testing.T) {
	dir := t.TempDir()
	noWriter := filepath.Join(dir, "nowriter.fifo")
	held := filepath.Join(dir, "held.fifo")
	for _, p := range []string{noWriter, held} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"open without a writer", func(ctx context.Context) error {
			in, err := PathInput(ctx, noWriter, noWriter, 0)
			if err != nil {
				return err
			}
			_, err = readInput(t, in)
			return err
		}},
		{"read from a silent writer", func(ctx context.Context) error {
			// O_RDWR opens without waiting and keeps a writer.
			w, err := os.OpenFile(held, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer w.Close()
			in, err := PathInput(ctx, held, held, 0)
			if err != nil {
				return err
			}
			_, err = readInput(t, in)
			return err
		}},
		{"stdin pipe that never writes", func(ctx context.Context) error {
			r, w, err := os.Pipe()
			if err != nil {
				return err
			}
			defer w.Close()
			defer r.Close()
			_, err = readInput(t, StreamInput(ctx, "<stdin>", r, 0))
			return err
		}},
		{"blocking stdin pipe (as a shell passes it)", func(ctx context.Context) error {
			// syscall.Pipe's fds are blocking: os.NewFile cannot poll
			// them, so the read runs in a goroutine.
			var fds [2]int
			if err := syscall.Pipe(fds[:]); err != nil {
				return err
			}
			r, w := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "w")
			defer w.Close()
			_, err := readInput(t, StreamInput(ctx, "<stdin>", r, 0))
			return err
		}},
		{"reader that never returns", func(ctx context.Context) error {
			r, w := io.Pipe()
			defer w.Close()
			_, err := readInput(t, StreamInput(ctx, "<stdin>", r, 0))
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tt.run(ctx) }()
			time.Sleep(50 * time.Millisecond) // let it block (not an assertion)
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
			case <-time.After(deadline):
				t.Fatal("still waiting after the context was cancelled")
			}
		})
	}
}

// /dev/zero never ends: it is read up to the bound, which the error names.
func TestPathInputBoundsDevices(t *testing.T) {
	in, err := PathInput(context.Background(), "/dev/zero", "/dev/zero", 1<<20)
	if err != nil {
		t.Skipf("no /dev/zero: %v", err)
	}
	got, err := readInput(t, in)
	var le *LimitError
	if !errors.As(err, &le) || len(got) != 1<<20 {
		t.Fatalf("read %d bytes, err %v; want 1 MiB and a LimitError", len(got), err)
	}
	if msg := err.Error(); !strings.Contains(msg, "read its first 1 MiB; the rest was not read") {
		t.Errorf("message %q", msg)
	}
	// The whole explainer: the bound ends up in the report's warnings.
	in, _ = PathInput(context.Background(), "/dev/zero", "/dev/zero", 1<<20)
	rep, err := Analyze(context.Background(), []Input{in}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(rep.Warnings, "\n"), "the rest was not read") {
		t.Errorf("warnings %q", rep.Warnings)
	}
}

func TestPathInputErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ path, want string }{
		{filepath.Join(dir, "missing.log"), "missing.log: no such file"},
		{dir, "is a directory; pass the log files in it"},
		{"/proc/self/mem/x", "not a directory"},
	}
	for _, tt := range tests {
		_, err := PathInput(context.Background(), tt.path, tt.path, 0)
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("PathInput(%s) = %v, want an InputError with %q", tt.path, err, tt.want)
		}
	}
}
