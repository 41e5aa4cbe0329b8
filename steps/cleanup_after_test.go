package steps

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

// TestCleanupPreviewAfterStaleIsConditional: the cleanup planned beside
// proc.stale includes the segments only the ranks proc.stale would end
// hold (issue 25 item 3), but proc.stale runs only when it is chosen too:
// `ncclwiz fix --apply shm.cleanup --yes` alone, or the wizard with only
// the cleanup ticked, then keeps them. The preview the user consents to
// said "Removes 2 files that nothing has open or mapped" and "after
// proc.stale ends pid N (it runs first)" whether or not proc.stale was
// chosen; it must say what holds in both cases.
func TestCleanupPreviewAfterStaleIsConditional(t *testing.T) {
	shmtest.RequireRoot(t)
	dir := shmtest.MountTmpfs(t, "8M")
	shmtest.MakeSegment(t, dir, "nccl-after-orphan", 4096, time.Hour)
	held := shmtest.MakeSegment(t, dir, "nccl-after-held", 8192, time.Hour)
	f, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "300")
	holder.ExtraFiles = []*os.File{f}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })

	h := localHost(dir)
	r := &request{findings: map[string][]checks.Finding{"shm.cleanup": wantCleanup()}, want: map[string]bool{},
		notes: map[string]string{}, ending: []int{holder.Process.Pid}}
	var fx *Fix
	for range 50 { // the holder's descriptor shows in /proc once it runs
		if fx = planCleanup(context.Background(), h, r); fx != nil && len(fx.Steps) == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fx == nil || len(fx.Steps) != 2 {
		t.Fatalf("no cleanup with a step for the held segment: %+v", fx)
	}
	pid := strconv.Itoa(holder.Process.Pid)
	if !strings.Contains(fx.Summary, "Removes 1 file (4 KiB) that nothing has open or mapped") {
		t.Errorf("the summary counts the held segment as unused: %q", fx.Summary)
	}
	if !strings.Contains(fx.Summary, "only if proc.stale ends that rank first") {
		t.Errorf("the summary does not say the held segment depends on proc.stale: %q", fx.Summary)
	}
	if !strings.Contains(fx.Title, "if proc.stale ends") {
		t.Errorf("the title does not say the held segment depends on proc.stale: %q", fx.Title)
	}
	if c := fx.Steps[1].Comment; !strings.Contains(c, "only if proc.stale ends pid "+pid) || strings.Contains(c, "(it runs first)") {
		t.Errorf("the held segment's step says proc.stale runs: %q", c)
	}
}
