package validate

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/contain"
)

// argvAlive lists live processes whose command line holds marker (the
// linger fake puts it in every argv; the environment marker is cleared by
// the grandchild, so it is not what this looks at).
func argvAlive(marker string) []string { return argvScan(marker, strings.Contains) }

// grandchildUp reports whether the linger fake's grandchild runs (its
// argv[0] is set once it has exec'd sleep).
func grandchildUp(marker string) bool {
	return len(argvScan(marker+"-grandchild", strings.HasPrefix)) > 0
}

// argvScan lists the live processes whose command line matches marker; an
// unreadable /proc is listed as such, never as "none".
func argvScan(marker string, match func(s, sub string) bool) []string {
	procs, err := liveProcs(host.Local(host.LocalOptions{NoNVML: true}))
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, p := range procs {
		if c := contain.Cmdline(p.PID); match(c, marker) {
			out = append(out, strconv.Itoa(p.PID)+" "+c)
		}
	}
	return out
}

// The collective test's processes cannot outlive it: the linger fake
// starts a rank in the launcher's group and a grandchild that double
// forks, calls setsid, clears NCCLWIZ_RUN_ID and ignores SIGTERM, SIGHUP
// and SIGINT. On timeout, on cancellation (Ctrl-C) and at a normal end that
// leaves the grandchild behind, under each containment mode, the
// grandchild is reported (PID and command) and nothing with the marker in
// its argv is alive afterwards, and the private temporary directory is
// gone.
func TestContainedRunLeavesNothing(t *testing.T) {
	bin, err := filepath.Abs("testdata/linger")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{contain.ModeNamespace, contain.ModeSubreaper} {
		for _, how := range []string{"timeout", "cancel", "done"} {
			t.Run(mode+"/"+how, func(t *testing.T) {
				if err := contain.Available(mode); err != nil {
					t.Skipf("%s is not available here: %v", mode, err)
				}
				tmp := t.TempDir()
				t.Setenv("TMPDIR", tmp)
				marker := "ncclwiz-linger-" + newRunID()
				linger := "hang"
				if how == "done" {
					linger = "done"
				}
				f := newFakeMachineBin(t, bin, "FAKE_ARGV_MARKER="+marker, "FAKE_LINGER="+linger)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				timeout := time.Minute
				if how == "timeout" {
					timeout = time.Second
				}
				if how == "cancel" {
					// Ctrl-C once the grandchild is up.
					go func() {
						for ctx.Err() == nil && !grandchildUp(marker) {
							time.Sleep(20 * time.Millisecond)
						}
						cancel()
					}()
				}
				res, err := Run(ctx, f.h, Options{
					GPUs: h100(1), Rungs: []string{RungSingle}, Timeout: timeout, Grace: 300 * time.Millisecond, Contain: mode,
				})
				if err != nil {
					t.Fatal(err)
				}
				r := rung(t, res, RungSingle)
				var found bool
				for _, p := range r.Survivors {
					if p.Why == "descendant" && strings.Contains(p.Command, marker+"-grandchild") {
						found = true
					}
				}
				if !found {
					t.Errorf("the setsid grandchild should be reported as killed, got %+v", r.Survivors)
				}
				if !hasNote(r.Notes, marker+"-grandchild") {
					t.Errorf("the verdict's notes should name it: %q", r.Notes)
				}
				switch how {
				case "timeout":
					if !r.TimedOut {
						t.Errorf("want a timeout: %+v", r.Reasons)
					}
				case "done":
					if r.TimedOut || r.Canceled || r.ExitCode != 0 {
						t.Errorf("want a normal end: exit %d %v", r.ExitCode, r.Reasons)
					}
				}
				wantMode := "PID namespace"
				if mode == contain.ModeSubreaper {
					wantMode = "subreaper"
				}
				if !strings.Contains(res.Containment, wantMode) {
					t.Errorf("containment %q, want %s", res.Containment, wantMode)
				}
				if alive := argvAlive(marker); len(alive) > 0 {
					t.Errorf("processes of the run survived: %q", alive)
				}
				left, _ := filepath.Glob(filepath.Join(tmp, contain.TmpPrefix+"*"))
				if len(left) > 0 {
					t.Errorf("temporary directories left: %v", left)
				}
			})
		}
	}
}
