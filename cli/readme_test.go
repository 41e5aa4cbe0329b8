package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks/all"
)

// docs/checks.md's check table names every check that runs, and only those.
func TestReadmeChecksTableListsEveryCheck(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "checks.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "# Checks\n")
	if !ok {
		t.Fatal("docs/checks.md has no # Checks section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	listed := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if id, ok := strings.CutPrefix(line, "| `"); ok {
			id, _, _ = strings.Cut(id, "`")
			listed[id] = true
		}
	}
	reg, err := all.Registry()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range reg.All() {
		if !listed[c.ID] {
			t.Errorf("README's check table lacks %s (%s)", c.ID, c.Title)
		}
		delete(listed, c.ID)
	}
	for id := range listed {
		t.Errorf("README's check table lists %s, which is not a registered check", id)
	}
}

// Counts read as English when they are 1: "1 input, 1 line", "1 process on
// each of 2 nodes".
func TestOneIsSingular(t *testing.T) {
	log := filepath.Join(t.TempDir(), "one.log")
	if err := os.WriteFile(log, []byte("NCCL WARN Call to connect returned Connection refused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, _ := runCLI(t, nil, "explain", log)
	if !strings.Contains(out, "1 input, 1 line,") {
		t.Errorf("explain header: %q %s", strings.SplitN(out, "\n", 2)[0], errOut)
	}
	_, errOut, code := runCLI(t, nil, "fallback", "--", "torchrun", "--nnodes", "2", "--nproc_per_node", "1", "train.py")
	if code != 0 || !strings.Contains(errOut, "The job ran 1 process on each of 2 nodes") {
		t.Errorf("fallback: exit %d: %s", code, errOut)
	}
}
