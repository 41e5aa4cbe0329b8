package shm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
)

// TestSegmentNamesTellApart (issue 22 item 19): a segment literally named
// `nccl-\x1b` and one whose name holds the ESC byte are listed as two
// different names by shm.segments.
func TestSegmentNamesTellApart(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for _, n := range []string{"nccl-\x1b", `nccl-\x1b`} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	h := host.Local(host.LocalOptions{ShmDir: dir, NoNVML: true})
	fs, err := runSegments(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fs {
		segs, _ := f.Evidence["segments"].([]map[string]any)
		for _, s := range segs {
			names[fmt.Sprint(s["name"])] = true
		}
	}
	if len(names) != 2 || !names[`nccl-\x1b`] || !names[`nccl-\\x1b`] {
		t.Errorf("names shown: %v", names)
	}
	for n := range names {
		if strings.ContainsRune(n, 0x1b) {
			t.Errorf("a raw ESC reached the output: %q", n)
		}
	}
}
