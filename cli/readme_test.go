package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks/all"
)

// README's check table names every check that runs, and only those.
func TestReadmeChecksTableListsEveryCheck(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Checks\n")
	if !ok {
		t.Fatal("README has no ## Checks section")
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
