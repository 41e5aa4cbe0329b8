package hang

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// Stack is the Python stack py-spy printed for one rank, or why there is none.
type Stack struct {
	Rank   int    `json:"rank"`
	PID    int    `json:"pid"`
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
}

// PySpyTargets are the suspect ranks py-spy can be asked about: on this
// machine, alive and not stopped (py-spy would wait on a stopped one).
func PySpyTargets(r *Report) []RankSample {
	suspect := map[int]bool{}
	for _, s := range r.Suspects {
		suspect[s] = true
	}
	var out []RankSample
	for _, s := range r.Samples {
		if suspect[s.Rank] && !s.Gone && !s.Stopped() {
			out = append(out, s)
		}
	}
	return out
}

// ErrNoPySpy: py-spy is not installed.
var ErrNoPySpy = errors.New("py-spy is not installed: `pip install py-spy` (or your distribution's package), then run again")

// PySpyDump runs `py-spy dump --pid PID`: it attaches with ptrace and
// pauses the process while it reads the stack. Call it only after the
// user agreed.
func PySpyDump(ctx context.Context, h *host.Host, s RankSample) Stack {
	st := Stack{Rank: s.Rank, PID: s.PID}
	if h.Simulated {
		st.Error = "a practice server has no process to attach to"
		return st
	}
	res, err := h.Run(ctx, 30*time.Second, "py-spy", "dump", "--pid", strconv.Itoa(s.PID))
	switch {
	case errors.Is(err, host.ErrCommandNotFound):
		st.Error = ErrNoPySpy.Error()
	case err != nil:
		st.Error = textsafe.Clean(err.Error())
	case res.ExitCode != 0:
		st.Error = fmt.Sprintf("py-spy exited with %d: %s", res.ExitCode, textsafe.Clean(strings.TrimSpace(string(res.Stderr))))
	default:
		st.Output = textsafe.SanitizeMultiline(textsafe.RedactText(string(res.Stdout)))
	}
	return st
}
