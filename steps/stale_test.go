package steps

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/scenario"
)

// Issue 13 item 7: proc.stale's preview shows the GPU memory NVML reports
// for the PID (the same number gpu.processes shows), through the host's
// NVML: the watchdog-timeout scenario's rank 3 (pid 90214) holds 30 GiB.
func TestStalePreviewShowsGPUMemory(t *testing.T) {
	s, err := scenario.Build("watchdog-timeout")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	fx, ok := ByID(PlanFor(context.Background(), s.Host, nil, []string{"proc.stale"}), "proc.stale")
	if !ok {
		t.Fatal("proc.stale not planned for the scenario's leftover rank")
	}
	preview := strings.Join(fx.Steps[0].Lines, "\n")
	if !strings.Contains(preview, "kill -TERM 90214") || !strings.Contains(preview, "holds 30 GiB of GPU memory") {
		t.Errorf("preview:\n%s", preview)
	}
	if strings.Contains(preview, "no GPU memory") {
		t.Errorf("preview denies the GPU memory:\n%s", preview)
	}
}

// proc.stale judges again right before signalling: a rank that started
// working between the preview and the yes, or whose launcher turns out to
// be alive, is left alone.
func TestStaleApplyRejudges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, h *host.Host, stop <-chan struct{})
	}{
		{"it works again", func(t *testing.T, h *host.Host, stop <-chan struct{}) {
			// CPU time grows while the apply samples it.
			go func() {
				for i := 1; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
					st := strings.Replace(staleStat, " 0 0 0 0 20 0 1 0 424242", fmt.Sprintf(" %d 0 0 0 20 0 1 0 424242", i), 1)
					// write and rename, so a reader never sees half a file
					tmp := h.Path("/proc/777/stat.tmp")
					if os.WriteFile(tmp, []byte(st), 0o644) == nil {
						_ = os.Rename(tmp, h.Path("/proc/777/stat"))
					}
				}
			}()
		}},
		{"its parent is a running launcher", func(t *testing.T, h *host.Host, _ <-chan struct{}) {
			files := map[string]string{
				"/proc/700/stat":    "700 (torchrun) S 1 700 700 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 400000 0 0 0",
				"/proc/700/cmdline": "/venv/bin/python\x00/venv/bin/torchrun\x00t.py\x00",
				"/proc/777/stat":    strings.Replace(staleStat, "(python) S 1 ", "(python) S 700 ", 1),
			}
			for p, c := range files {
				if err := os.MkdirAll(filepath.Dir(h.Path(p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(h.Path(p), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := fixtureHost(t)
			h.Act.Signal = func(pid int, _ syscall.Signal) error { t.Errorf("signalled pid %d", pid); return nil }
			ctx := context.Background()
			fx, ok := ByID(PlanFor(ctx, h, nil, []string{"proc.stale"}), "proc.stale")
			if !ok {
				t.Fatal("not planned")
			}
			stop := make(chan struct{})
			defer close(stop)
			tc.change(t, h, stop)
			out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true, Grace: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			// Left alone, saying how it is judged now.
			if skipped := strings.Join(out.Skipped, "\n"); len(out.Changed) != 0 || !strings.Contains(skipped, "pid 777: judged ") || !strings.Contains(skipped, "left alone") {
				t.Errorf("outcome %+v", out)
			}
		})
	}
}

// On a real orphan (idle, torchrun's variables, re-parented to the
// machine's init; the clock ten minutes ahead so it is old enough): the
// apply judges it again on the real machine, finds the same process still
// left over and ends it by PID.
func TestStaleApplyRealOrphan(t *testing.T) {
	pid := startStaleRank(t)
	h := localHost(t.TempDir())
	h.Clock = func() time.Time { return time.Now().Add(10 * time.Minute) }
	ctx := context.Background()
	mine := targetsOf(ctx, t, h, pid)
	if len(mine) != 1 || !strings.Contains(mine[0].Reason, "launcher gone") || !strings.Contains(mine[0].Reason, "no CPU used") {
		t.Fatalf("orphan %d not judged a leftover: %+v", pid, mine)
	}
	out, err := staleFix(h, mine, nil).Apply(ctx, h, ApplyOptions{Yes: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Changed) != 1 || !strings.Contains(out.Changed[0], fmt.Sprintf("pid %d ended after SIGTERM", pid)) {
		t.Errorf("outcome %+v", out)
	}
	if alive(pid) {
		t.Errorf("orphan %d still runs", pid)
	}
}

// TestStaleFixRedactsCommandLine (issue 14 item 7): a real leftover rank
// whose command line carries --pw, --hf_token and --aws_secret_access_key is
// judged with the clock two minutes' worth ahead; the fix preview, the dry
// run and the exported script name its PID but none of the secrets.
func TestStaleFixRedactsCommandLine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("ends a process re-parented to PID 1 (CI runs as root)")
	}
	pid := startOrphan(t, "TORCHELASTIC_RUN_ID=ncclwiz-secrets", `RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 TORCHELASTIC_RUN_ID=ncclwiz-secrets exec -a python3 /usr/bin/python3 -c 'import time;time.sleep(600)' --pw pwSecret7731 --hf_token hfSecret7731 --aws_secret_access_key awsSecret7731`)
	h := localHost(t.TempDir())
	h.Clock = func() time.Time { return time.Now().Add(10 * time.Minute) }
	ctx := context.Background()
	mine := targetsOf(ctx, t, h, pid)
	if len(mine) != 1 {
		t.Fatalf("rank %d not among proc.stale's targets", pid)
	}
	fx := *staleFix(h, mine, nil)
	dry, err := fx.Apply(ctx, h, ApplyOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	if err := ExportScript(ctx, &script, h, []Fix{fx}, nil, "test"); err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"preview": strings.Join(fx.Preview(), "\n"),
		"dry run": strings.Join(dry.Changed, "\n"),
		"script":  script.String(),
	}
	for name, text := range outputs {
		if !strings.Contains(text, strconv.Itoa(pid)) || !strings.Contains(text, "--pw [redacted]") {
			t.Errorf("%s does not show the rank with its redacted command line:\n%s", name, text)
		}
		for _, s := range []string{"pwSecret7731", "hfSecret7731", "awsSecret7731"} {
			if strings.Contains(text, s) {
				t.Errorf("%s leaks %s", name, s)
			}
		}
	}
}

// proc.stale's preview and progress lines shorten a long CJK command line
// between characters, by terminal cells.
func TestClipTextCJK(t *testing.T) {
	cmd := "python /数据/训练.py" + strings.Repeat(" --名称=实验", 20)
	got := clipText(cmd, 60)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "...") || ansi.StringWidth(got) > 60 || !strings.HasPrefix(cmd, strings.TrimSuffix(got, "...")) {
		t.Fatalf("clipText = %q (%d cells)", got, ansi.StringWidth(got))
	}
}

// A rank that SIGTERM did not end because it sits in uninterruptible sleep
// (D) is asked about with that said — SIGKILL may not end it either — and
// a SIGKILL that leaves it running is never reported as a kill.
func TestStaleUninterruptible(t *testing.T) {
	t.Parallel()
	h := fixtureHost(t)
	ctx := context.Background()
	fx, ok := ByID(PlanFor(ctx, h, nil, []string{"proc.stale"}), "proc.stale")
	if !ok {
		t.Fatal("not planned")
	}
	var sent []syscall.Signal
	h.Act.Signal = func(pid int, sig syscall.Signal) error {
		sent = append(sent, sig)
		// It enters D on the way out (an NFS close, say) and stays.
		if err := os.WriteFile(h.Path("/proc/777/wchan"), []byte("nfs_wait_bit_killable"), 0o644); err != nil {
			t.Error(err)
		}
		return os.WriteFile(h.Path("/proc/777/stat"), []byte(strings.Replace(staleStat, "(python) S ", "(python) D ", 1)), 0o644)
	}
	var asked string
	out, err := fx.Apply(ctx, h, ApplyOptions{Yes: true, Grace: 100 * time.Millisecond, Confirm: func(q string) bool { asked = q; return true }})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"did not end", "uninterruptible sleep (D)", "an NFS server (in nfs_wait_bit_killable)", "acts on no signal until that wait returns", "only if the wait is killable"} {
		if !strings.Contains(asked, want) {
			t.Errorf("question lacks %q: %s", want, asked)
		}
	}
	skipped := strings.Join(out.Skipped, "\n")
	if fmt.Sprint(sent) != "[terminated killed]" || len(out.Changed) != 0 || !strings.Contains(skipped, "pid 777 still running 1 s after SIGKILL: it is in uninterruptible sleep (D)") {
		t.Errorf("signals %v, outcome %+v", sent, out)
	}
}
