package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/realjob"
	"github.com/ncclwiz/ncclwiz/scenario"
)

// On every practice server the hang entry reads the scenario's own process
// table (the host seam): a scenario without ranks says plainly that there
// is no live job; one with ranks is inspected without asking any real RAS
// port, and the report renders.
func TestWizardHangOnPracticeServers(t *testing.T) {
	list, err := scenario.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range list {
		t.Run(sc.Name, func(t *testing.T) {
			a := &App{Stdin: strings.NewReader(""), Scenario: sc.Name}
			ctx := context.Background()
			jobs, err := wizardHangJobs(ctx, a)
			if err != nil {
				if !strings.Contains(err.Error(), "practice scenario: there is no live job") {
					t.Fatalf("error %q does not say there is no live job", err)
				}
				return
			}
			if len(jobs) == 0 {
				t.Fatal("no jobs and no message")
			}
			var said []string
			r, err := wizardInspectHang(ctx, a, jobs[0].ID, func(s string) { said = append(said, s) })
			if err != nil {
				t.Fatalf("inspect %d: %v", jobs[0].ID, err)
			}
			if len(said) == 0 || strings.Contains(strings.Join(said, " "), "RAS") {
				t.Errorf("progress %q (a practice server has no RAS port to ask)", said)
			}
			if out := r.Render(80, false); !strings.Contains(out, "NCCL RAS:") || !strings.Contains(out, "Verdict:") {
				t.Errorf("report:\n%s", out)
			}
		})
	}
}

// The wizard's cluster check is the CLI's: a node whose name does not
// resolve is a finding named in the summary and the table, never a gap.
func TestWizardClusterCheckNamesUnreachableNode(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh not installed (CI installs openssh-client)")
	}
	a := &App{Stdin: strings.NewReader("")}
	var said []string
	r, err := wizardClusterCheck(context.Background(), a, "ncclwiz-wiz-nosuch.invalid", func(s string) { said = append(said, s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(said) == 0 || !strings.Contains(said[0], "1 node") {
		t.Errorf("progress %q", said)
	}
	if len(r.Suspects) != 1 || r.Suspects[0] != "ncclwiz-wiz-nosuch.invalid" || !strings.Contains(r.Summary, "1 not reachable") {
		t.Errorf("summary %q suspects %v", r.Summary, r.Suspects)
	}
	if out := r.Render(80); !strings.Contains(out, "ncclwiz-wiz-nosuch.invalid") {
		t.Errorf("table:\n%s", out)
	}
	if _, err := wizardClusterCheck(context.Background(), a, "bad host;rm", func(string) {}); err == nil {
		t.Error("a hostile node list was accepted")
	}
}

// Issue 23: the wizard's "My job is hanging" runs the same discovery and
// judgement as `ncclwiz hang`: on a real job (torch 1.13, rank 1 asleep
// before its all_reduce) both name the same verdict and suspect.
func TestWizardHangAgreesWithHangOnARealJob(t *testing.T) {
	j := realjob.Start(t, realjob.Spec{Launcher: realjob.Subprocess, Behave: map[int]realjob.Behaviour{1: realjob.Sleep}})
	j.WaitReady(4 * time.Minute)
	a := &App{Stdin: strings.NewReader("")}
	ctx := context.Background()
	jobs, err := wizardHangJobs(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, jb := range jobs {
		found = found || jb.ID == j.Launchers()[0]
	}
	if !found {
		t.Fatalf("the wizard's list lacks job %d: %+v", j.Launchers()[0], jobs)
	}
	w, err := wizardInspectHang(ctx, a, j.Launchers()[0], func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, nil, "hang", "--json", "--pid", strconv.Itoa(j.Launchers()[0]))
	var r struct {
		Verdict  string `json:"verdict"`
		Suspects []int  `json:"suspects"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d: %v\n%s%s", code, err, out, errOut)
	}
	if w.Verdict != "suspect" || fmt.Sprint(w.Suspects) != "[1]" || r.Verdict != w.Verdict || fmt.Sprint(r.Suspects) != fmt.Sprint(w.Suspects) {
		t.Fatalf("wizard %s %v, hang %s %v", w.Verdict, w.Suspects, r.Verdict, r.Suspects)
	}
	if view := w.Render(80, false); !strings.Contains(view, "Verdict: suspect") {
		t.Errorf("the wizard's report:\n%s", view)
	}
}
