// Package fixturetest builds small fixture hosts in temporary directories
// for table tests: a map of host paths to file contents, plus a spec.
package fixturetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/host"
)

// Symlink marks a file entry as a symlink to the given target.
type Symlink string

// Tree writes files (host path → string content, Symlink, or nil for a
// directory) under a temp root and returns a fixture host rooted there.
func Tree(t testing.TB, files map[string]any, spec host.FixtureSpec) *host.Host {
	t.Helper()
	root := t.TempDir()
	for p, v := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		switch x := v.(type) {
		case nil:
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
		case string:
			if err := os.WriteFile(full, []byte(x), 0o644); err != nil {
				t.Fatal(err)
			}
		case Symlink:
			if err := os.Symlink(string(x), full); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("fixture %s: unsupported %T", p, v)
		}
	}
	h, err := host.FromSpec(root, spec)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// StatfsTmpfs returns a tmpfs statfs answer of the given size and use.
func StatfsTmpfs(total, used uint64) host.StatFS {
	const bs = 4096
	return host.StatFS{Type: host.TmpfsMagic, Bsize: bs, Blocks: total / bs, Bfree: (total - used) / bs,
		Bavail: (total - used) / bs, Files: 1 << 20, Ffree: 1<<20 - 10}
}

// Lines joins lines with newlines and a trailing newline.
func Lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
