package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	readmeCode  = regexp.MustCompile("`(ncclwiz[^`]*)`")
	readmeFlag  = regexp.MustCompile(`(?:^|[\s\[|(])(--?[a-z][a-z0-9-]*)`)
	goDirective = regexp.MustCompile(`(?m)^go (\d+\.\d+(?:\.\d+)?)$`)
)

// TestReadmeStatementsHold: every ncclwiz command line README shows names
// a command and flags it has; the install section's claims match the
// repository (install.sh and the module path exist, the Go version is
// go.mod's).
func TestReadmeStatementsHold(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	root := testRoot()
	seen := 0
	for _, m := range readmeCode.FindAllStringSubmatch(readme, -1) {
		line := m[1]
		fields := strings.Fields(strings.NewReplacer("[", " ", "]", " ", "|", " ", "\\", " ").Replace(line))
		if len(fields) < 1 || fields[0] != "ncclwiz" || strings.Contains(line, "@latest") || strings.Contains(line, "/") && !strings.Contains(line, " ") {
			continue
		}
		var path []string
		for _, f := range fields[1:] {
			if strings.HasPrefix(f, "-") || strings.ToUpper(f) == f {
				break
			}
			path = append(path, f)
		}
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Errorf("README shows %q: %v", line, err)
			continue
		}
		seen++
		for _, fm := range readmeFlag.FindAllStringSubmatch(line, -1) {
			name := strings.TrimLeft(fm[1], "-")
			ok := false
			if strings.HasPrefix(fm[1], "--") {
				ok = cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
			} else if len(name) == 1 {
				ok = cmd.Flags().ShorthandLookup(name) != nil || cmd.InheritedFlags().ShorthandLookup(name) != nil
			} else {
				ok = true // "-" for stdin, and the like
			}
			if !ok {
				t.Errorf("README shows %q, but %q has no %s", line, cmd.CommandPath(), fm[1])
			}
		}
	}
	if seen < 15 {
		t.Fatalf("only %d ncclwiz command lines found in README", seen)
	}
	// Install section.
	if _, err := os.Stat(filepath.Join("..", "install.sh")); err != nil || !strings.Contains(readme, "releases/latest/download/install.sh | sh") {
		t.Errorf("README's install.sh route: %v", err)
	}
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	modPath := strings.Fields(strings.SplitN(string(mod), "\n", 2)[0])[1]
	if !strings.Contains(readme, "go install "+modPath+"@latest") {
		t.Errorf("README's go install line does not name the module %s", modPath)
	}
	if gm := goDirective.FindStringSubmatch(string(mod)); gm == nil || !strings.Contains(readme, "Go toolchain ("+gm[1]+"+)") {
		t.Errorf("README does not give go.mod's Go version %v", gm)
	}
}
