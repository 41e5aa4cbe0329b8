package validate

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/internal/contain"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// MarkerVar is put into the environment of every launcher ncclwiz starts;
// descendants inherit it, so a process of the run is recognised even
// outside the keeper's tree (handed to another parent). A process that
// clears it is still found through the containment (see internal/contain).
const MarkerVar = "NCCLWIZ_RUN_ID"

// procSpec is one launcher run.
type procSpec struct {
	Path    string
	Args    []string
	Env     []string
	Dir     string
	Marker  string // value of MarkerVar in Env
	Timeout time.Duration
	Grace   time.Duration
	// TmpDir is the run's private directory, removed even if ncclwiz dies.
	TmpDir string
	// Contain forces a containment mode (contain.ModeAuto: the strongest).
	Contain string
	// OnLine receives every output line (stdout and stderr interleaved),
	// at most maxLine bytes of it.
	OnLine func(string)
}

// procResult is what happened.
type procResult struct {
	ExitCode  int
	Signal    string
	TimedOut  bool
	Canceled  bool
	Duration  time.Duration
	Survivors []Proc
	// Leftover lists processes that could not be ended (should be empty).
	Leftover []Proc
	// Containment says how the run's processes were kept together.
	Containment string
	Notes       []string
}

const maxLine = 64 << 10

// runProcess starts the launcher under contain (its own PID namespace
// where allowed, else below a subreaper; in its own cgroup where one can
// be made) and waits for it. On timeout or cancellation the launcher's
// group gets SIGTERM, then everything of the run SIGKILL after the grace
// period. Whatever way the launcher ended, every process of the run still
// alive is listed (Survivors) and ended before runProcess returns; if
// ncclwiz itself dies meanwhile, the keeper ends them and removes TmpDir.
func runProcess(ctx context.Context, spec procSpec) (procResult, error) {
	var res procResult
	pr, pw, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("pipe: %w", err)
	}
	start := time.Now()
	run, err := contain.Start(contain.Spec{
		Path: spec.Path, Args: spec.Args, Env: spec.Env, Dir: spec.Dir, Output: pw,
		Marker: MarkerVar + "=" + spec.Marker, TmpDir: spec.TmpDir, Mode: spec.Contain,
		Name: contain.TmpPrefix + spec.Marker + "-" + strconv.FormatInt(start.UnixNano(), 36),
	})
	pw.Close()
	if err != nil {
		pr.Close()
		return res, err
	}
	// A panic below (a caller's OnLine, say) still ends the run here; if
	// the process dies instead, the keeper does.
	defer run.End(killBound)
	res.Containment = run.Describe()

	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		readLines(pr, spec.OnLine)
	}()

	timer := time.NewTimer(spec.Timeout)
	defer timer.Stop()
	select {
	case <-run.Exited():
	case <-timer.C:
		res.TimedOut = true
	case <-ctx.Done():
		res.Canceled = true
	}
	if res.TimedOut || res.Canceled {
		run.Terminate()
		select {
		case <-run.Exited():
		case <-time.After(spec.Grace):
		}
	}
	res.Duration = time.Since(start)

	rep := run.End(killBound)
	for _, p := range rep.Ended {
		if p.Why != "launcher" {
			res.Survivors = append(res.Survivors, procOf(p))
		}
	}
	for _, p := range rep.Leftover {
		q := procOf(p)
		if p.Why == "launcher" {
			q.Why = "launcher did not die after SIGKILL"
		}
		res.Leftover = append(res.Leftover, q)
	}
	res.Notes = run.Notes()

	select {
	case <-readDone:
	case <-time.After(2 * time.Second):
		// A process we could not end still holds the pipe.
	}
	pr.Close()
	<-readDone

	ws, ok := run.Status()
	switch {
	case !ok:
		res.ExitCode, res.Signal = -int(syscall.SIGKILL), "SIGKILL"
	case ws.Signaled():
		res.ExitCode = -int(ws.Signal())
		res.Signal = unix.SignalName(ws.Signal())
	default:
		res.ExitCode = ws.ExitStatus()
	}
	return res, nil
}

func procOf(p contain.Proc) Proc {
	// A command line may carry a token (--hf_token X): redacted here, so
	// that the JSON result is too.
	return Proc{PID: p.PID, Comm: p.Comm, Command: textsafe.RedactText(p.Command), Why: p.Why}
}

// killBound is how long ending the run may take before ncclwiz reports
// what is left instead of waiting (a process stuck in a GPU driver call).
const killBound = 15 * time.Second

// readLines splits r into lines, keeping at most maxLine bytes of each, so
// that a binary blob or a huge line neither stalls nor exhausts memory.
func readLines(r io.Reader, on func(string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var cur []byte
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if !over {
				room := maxLine - len(cur)
				if len(chunk) > room {
					cur = append(cur, chunk[:room]...)
					over = true
				} else {
					cur = append(cur, chunk...)
				}
			}
			if chunk[len(chunk)-1] == '\n' {
				if on != nil {
					on(strings.TrimRight(string(cur), "\r\n"))
				}
				cur, over = cur[:0], false
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if len(cur) > 0 && on != nil {
				on(strings.TrimRight(string(cur), "\r\n"))
			}
			return
		}
	}
}
