package shm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
)

// Issue 13 item 7: another user's orphans were a warning while the user's
// own orphans were still there and info once those were cleaned up, since
// the severity counted everyone's bytes. Each group is now judged on its
// own bytes (fillsTmpfs), so the other user's finding reads the same before
// and after the user's cleanup. Needs root to own files as another user.
func TestOtherUsersOrphansSameBeforeAndAfterCleanup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a segment to another user (CI runs as root)")
	}
	for _, tt := range []struct {
		name        string
		mine, their int64
		want        checks.Severity
	}{
		{"theirs small, mine large", 60 << 20, 10 << 20, checks.Info},
		{"theirs fill half", 10 << 20, 70 << 20, checks.Warn},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := world{segs: map[string]int64{"nccl-mine01": tt.mine, "nccl-their1": tt.their}, statTotal: 128 << 20}.build(t)
			if err := os.Chown(filepath.Join(h.Root, "dev/shm/nccl-their1"), 4242, 4242); err != nil {
				t.Fatal(err)
			}
			theirs := func() checks.Finding {
				fs, err := runSegments(context.Background(), h)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range fs {
					if strings.Contains(f.Title, "of other users") {
						return f
					}
				}
				t.Fatalf("no finding for the other user's orphan: %+v", fs)
				return checks.Finding{}
			}
			before := theirs()
			if err := os.Remove(filepath.Join(h.Root, "dev/shm/nccl-mine01")); err != nil {
				t.Fatal(err)
			}
			after := theirs()
			if before.Severity != tt.want || after.Severity != tt.want {
				t.Errorf("before %s, after %s; want %s both times", before.Severity, after.Severity, tt.want)
			}
		})
	}
}
