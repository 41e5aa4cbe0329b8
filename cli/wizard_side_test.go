package cli

import (
	"context"
	"os/exec"
	"strings"
	"testing"

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
