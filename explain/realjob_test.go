package explain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/gobin"
	"github.com/ncclwiz/ncclwiz/internal/realjob"
)

// realFailure is one real failing job: what the ranks do, and what
// `ncclwiz explain` must say about the job's real output.
type realFailure struct {
	name string
	spec realjob.Spec
	// root is the root diagnosis's id ("consequence:ID" when the report
	// has only consequences); alt is another accepted one.
	root, alt string
	// culprit is the rank it must name; -1: the output need not say which
	// rank failed: it names none (and then says) or the true one (1), never
	// notRank.
	culprit int
	notRank int
	// says is a phrase the plain report must contain.
	says string
}

// realFailures are the jobs of the real-failure matrix: torch 1.13 (gloo)
// under torchrun, mp.spawn, a custom subprocess launcher and Open MPI's
// mpirun, one rank (rank 1, never rank 0, so that "the first rank" is
// never right by accident) misbehaving.
func realFailures() []realFailure {
	one := func(b realjob.Behaviour) map[int]realjob.Behaviour { return map[int]realjob.Behaviour{1: b} }
	short := 5 * time.Second
	detail := map[string]string{"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}
	// Two ranks where two show it (each rank imports torch: CPU time); a
	// mismatch needs a third to single out the odd one.
	cases := []realFailure{
		// torchrun --tee 2: the ranks' stderr carries [defaultN]: on one node.
		{name: "torchrun-raise-tee2", spec: realjob.Spec{Tee: 2, Behave: one(realjob.Raise)}, root: "python-exception", culprit: 1},
		// @record: the failure summary holds rank 1's own traceback, while
		// its "first observed failure" is rank 0's knock-on.
		{name: "torchrun-raise-record", spec: realjob.Spec{Record: true, Behave: one(realjob.Raise)}, root: "python-exception", culprit: 1},
		// Unprefixed tracebacks and a summary without them: nothing says
		// which rank raised; the lowest failed rank is no answer. (With two
		// ranks torchrun ends the other itself and its summary lists rank
		// 1 alone: then it is the answer.)
		{name: "torchrun-raise-unprefixed", spec: realjob.Spec{Ranks: 3, Behave: one(realjob.Raise)}, root: "python-exception", culprit: -1, notRank: 0, says: "--tee 3"},
		{name: "torchrun-sigkill", spec: realjob.Spec{Behave: one(realjob.SigKill)}, root: "host-oom-kill", culprit: 1},
		{name: "torchrun-sigsegv", spec: realjob.Spec{Behave: one(realjob.SigSegv)}, root: "segfault", culprit: 1},
		{name: "torchrun-loader-killed", spec: realjob.Spec{Record: true, Behave: one(realjob.LoaderKilled)}, root: "dataloader-worker-died", culprit: 1},
		{name: "torchrun-sleep", spec: realjob.Spec{Behave: one(realjob.Sleep), Timeout: short}, root: "gloo-timeout", culprit: 1},
		// Without DETAIL the log cannot show a mismatch: the advice says how
		// to see it.
		{name: "torchrun-mismatch", spec: realjob.Spec{Behave: one(realjob.Mismatch), Timeout: short}, root: "gloo-timeout", culprit: -2, says: "TORCH_DISTRIBUTED_DEBUG=DETAIL"},
		{name: "torchrun-mismatch-detail", spec: realjob.Spec{Behave: one(realjob.Mismatch), Env: detail, Timeout: short}, root: "collective-desync", culprit: 1},
		{name: "torchrun-absent", spec: realjob.Spec{Behave: one(realjob.Absent), Timeout: short}, root: "store-rendezvous-timeout", culprit: 1},
		{name: "torchrun-port-occupied", spec: realjob.Spec{Rendezvous: realjob.Occupied, Timeout: short}, root: "master-port-in-use", culprit: -2},
		{name: "spawn-sigkill", spec: realjob.Spec{Launcher: realjob.Spawn, Behave: one(realjob.SigKill)}, root: "host-oom-kill", culprit: 1},
		{name: "spawn-unreachable", spec: realjob.Spec{Launcher: realjob.Spawn, Rendezvous: realjob.Unreachable, Timeout: short}, root: "store-rendezvous-timeout", culprit: -2, says: "could not reach the rendezvous store at 192.0.2.1"},
		// A custom launcher prints nothing of its own: the peers' errors are
		// all there is, and they are no all-clear.
		{name: "subprocess-sigkill", spec: realjob.Spec{Launcher: realjob.Subprocess, Behave: one(realjob.SigKill)}, root: "peer-closed", alt: "consequence:peer-closed", culprit: -1, notRank: 0},
		{name: "mpirun-sigsegv", spec: realjob.Spec{Launcher: realjob.MPI, Behave: one(realjob.SigSegv)}, root: "segfault", culprit: 1},
	}
	for i := range cases {
		if cases[i].spec.Ranks == 0 && cases[i].spec.Behave[1] != realjob.Mismatch {
			cases[i].spec.Ranks = 2
		}
	}
	return cases
}

// TestRealFailures runs real failing jobs from the shared test bed
// (internal/realjob), pipes their real output through `ncclwiz explain
// --json -` and checks the root cause and the rank it blames.
func TestRealFailures(t *testing.T) {
	if raceEnabled {
		t.Skip("real jobs: the corpus tests cover the code under the race detector")
	}
	realjob.Require(t, realjob.Spec{Launcher: realjob.MPI})
	realjob.Require(t, realjob.Spec{Launcher: realjob.TorchrunStatic})
	bin := gobin.Ncclwiz(t, false)
	var mu sync.Mutex
	matrix := map[string]string{}
	t.Cleanup(func() {
		var rows []string
		for k, v := range matrix {
			rows = append(rows, fmt.Sprintf("%-28s %s", k, v))
		}
		sort.Strings(rows)
		t.Logf("real-failure matrix:\n%s", strings.Join(rows, "\n"))
	})
	// The jobs run four at a time, more than -parallel allows on two
	// cores: most of their time is spent waiting (a gloo timeout, a
	// launcher's poll), the rest importing torch.
	cases := realFailures()
	outs := make([]string, len(cases))
	errs := make([]error, len(cases))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func(i int, c realFailure) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			j := realjob.Start(t, c.spec)
			_, errs[i] = j.Wait(2 * time.Minute)
			outs[i] = j.Output()
		}(i, c)
	}
	wg.Wait()
	for i, c := range cases {
		out, err := outs[i], errs[i]
		t.Run(c.name, func(t *testing.T) {
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "explain", "--json", "-")
			cmd.Stdin = strings.NewReader(out)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			_ = cmd.Run() // exit 1: a failure found
			var rep struct {
				Diagnoses []struct {
					ID        string   `json:"id"`
					RootCause bool     `json:"root_cause"`
					Culprit   *int     `json:"culprit_rank"`
					Advice    []string `json:"advice"`
					Title     string   `json:"title"`
				} `json:"diagnoses"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("explain --json: %v\n%s\n%s", err, stdout.String(), stderr.String())
			}
			got, culprit := "(all-clear)", -1
			text := ""
			for i, d := range rep.Diagnoses {
				if !d.RootCause && i < len(rep.Diagnoses)-1 {
					continue
				}
				// The root, or (none) the first consequence.
				if !d.RootCause {
					d = rep.Diagnoses[0]
					got = "consequence:" + d.ID
				} else {
					got = d.ID
				}
				if d.Culprit != nil {
					culprit = *d.Culprit
				}
				text = d.Title + "\n" + strings.Join(d.Advice, "\n")
				break
			}
			ok := got == c.root || c.alt != "" && got == c.alt
			switch {
			case c.culprit >= 0:
				ok = ok && culprit == c.culprit
			case c.culprit == -1:
				// Unknown, or rank 1 when the output did show it (a loaded
				// machine lets torchrun end the others before they fail,
				// and its summary then lists rank 1 alone); never another.
				ok = ok && culprit != c.notRank && (culprit == -1 || culprit == 1)
			}
			if c.says != "" && culprit == -1 && !strings.Contains(text, c.says) {
				ok = false
			}
			mark := "ok"
			if !ok {
				mark = "MISS"
			}
			mu.Lock()
			matrix[c.name] = fmt.Sprintf("%-4s root %s, rank %d", mark, got, culprit)
			mu.Unlock()
			if !ok {
				t.Errorf("%s: root %s rank %d, want %s rank %d (says %q)\n%s\n--- job output (%s, torch 1.13 printed it) ---\n%s",
					c.name, got, culprit, c.root, c.culprit, c.says, text, c.spec.Launcher, out)
			}
		})
	}
}
