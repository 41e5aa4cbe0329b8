package steps

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/polltest"
	"github.com/ncclwiz/ncclwiz/internal/realjob"
)

// Issue 23 on real leftovers: torchrun's ranks (torch 1.13) whose launcher
// was SIGKILLed, each with a store thread spinning on its closed socket,
// and mpirun's ranks whose mpirun was SIGKILLed. The judgement calls both
// leftovers — the same way in every run — and `fix --apply proc.stale
// --yes` acts on exactly the processes of the last preview: a leftover
// that appeared since is left alone and said, a previewed one that ended
// meanwhile is said. The clock runs ten minutes ahead (the ranks must be
// two minutes old); only this test's own processes are ever signalled.
func TestStaleOnRealLeftovers(t *testing.T) {
	torch := realjob.Start(t, realjob.Spec{Launcher: realjob.TorchrunStatic, Behave: map[int]realjob.Behaviour{1: realjob.Sleep}})
	mpi := realjob.Start(t, realjob.Spec{Launcher: realjob.MPI, Behave: map[int]realjob.Behaviour{2: realjob.Sleep}})
	torch.WaitReady(4 * time.Minute)
	mpi.WaitReady(4 * time.Minute)
	torch.KillLauncher()
	mine := map[int]bool{}
	for _, pid := range torch.Ranks() {
		mine[pid] = true
	}
	h := localHost(t.TempDir())
	h.Env = append(h.Env, "XDG_STATE_HOME="+t.TempDir())
	h.Clock = func() time.Time { return time.Now().Add(10 * time.Minute) }
	ctx := context.Background()

	// Judged three times: the same answer, and the spinning store thread
	// is named as what it is.
	for run := 0; run < 3; run++ {
		as, err := procs.Assess(ctx, h, procs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range as {
			if !mine[a.PID] {
				continue
			}
			n++
			if a.Verdict != procs.Stale || !strings.Contains(a.Reason(), "maps ") {
				t.Fatalf("run %d: torch orphan %d judged %s: %s", run, a.PID, a.Verdict, a.Reason())
			}
			if a.Progress != nil && a.Progress.CPUTicks > 5 && !strings.Contains(a.Reason(), "CLOSE-WAIT") {
				t.Errorf("run %d: orphan %d used CPU but its spinning store thread is not named: %s", run, a.PID, a.Reason())
			}
		}
		if n != 3 {
			t.Fatalf("run %d: %d of the 3 torch orphans judged", run, n)
		}
	}

	// The preview the user saw: this job's orphans.
	previewed := targetsIn(ctx, t, h, mine)
	if len(previewed) != 3 {
		t.Fatalf("previewed %d of 3 orphans: %+v", len(previewed), previewed)
	}
	if err := RecordPreview(h, []Fix{*staleFix(h, previewed, nil)}); err != nil {
		t.Fatal(err)
	}
	// Then mpirun dies too (new leftovers nobody previewed), and one
	// previewed rank ends by itself.
	mpi.KillLauncher()
	for _, pid := range mpi.Ranks() {
		mine[pid] = true
	}
	keep0, keep1, gone := torch.Rank(0), torch.Rank(1), torch.Rank(2)
	if err := torch.Signal(gone, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	polltest.Until(10*time.Second, func() bool { return !alive(gone) })
	// A process that just lost its launcher may still stir (its pipes to
	// mpirun close); a leftover is judged minutes later. Wait until the
	// judgement has them, then ask it to hold three times in a row.
	var all []rank
	for i, held := 0, 0; i < 30 && held < 3; i++ {
		if all = targetsIn(ctx, t, h, mine); len(all) == 5 {
			held++
		} else {
			held = 0
		}
	}
	if len(all) != 5 {
		as, _ := procs.Assess(ctx, h, procs.Options{})
		for _, a := range as {
			if mine[a.PID] {
				t.Logf("pid %d: %s: %s", a.PID, a.Verdict, a.Reason())
			}
		}
		t.Fatalf("%d leftovers of this test now, want 2 torch + 3 mpirun: %+v", len(all), all)
	}
	pv, why := LastPreview(h)
	if pv == nil {
		t.Fatalf("no preview: %s", why)
	}
	// Only this test's processes are among the targets: a bug in the
	// restriction cannot reach anyone else's.
	out, err := staleFix(h, all, nil).Apply(ctx, h, ApplyOptions{Yes: true, Preview: pv, Grace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{keep0, keep1} {
		if !polltest.Until(10*time.Second, func() bool { return !alive(pid) }) {
			t.Errorf("previewed orphan %d still runs: %+v", pid, out)
		}
	}
	skipped := strings.Join(out.Skipped, "\n")
	mpiRanks := mpi.Ranks()
	if len(mpiRanks) != 3 {
		t.Fatalf("mpirun ranks now: %v", mpiRanks)
	}
	for r, pid := range mpiRanks {
		if !alive(pid) {
			t.Errorf("mpirun rank %d (pid %d), never previewed, was ended", r, pid)
		}
		if !strings.Contains(skipped, fmt.Sprintf("pid %d (", pid)) || !strings.Contains(skipped, "not in the preview you saw") {
			t.Errorf("mpirun rank %d (pid %d) not said to be outside the preview:\n%s", r, pid, skipped)
		}
	}
	if !strings.Contains(skipped, fmt.Sprintf("pid %d (", gone)) || !strings.Contains(skipped, "it has ended") {
		t.Errorf("the previewed rank that ended (pid %d) is not said:\n%s", gone, skipped)
	}
}

// targetsIn returns proc.stale's targets among pids.
func targetsIn(ctx context.Context, t *testing.T, h *host.Host, pids map[int]bool) []rank {
	t.Helper()
	targets, _, err := staleTargets(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	var out []rank
	for _, tg := range targets {
		if pids[tg.PID] {
			out = append(out, tg)
		}
	}
	return out
}
