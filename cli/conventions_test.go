package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// visible lists the commands a user sees (not hidden, not help).
func visible(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		out = append(out, c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return out
}

func testRoot() *cobra.Command {
	return NewRoot(&App{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
}

// exampleWords splits an example line the way a shell would (quotes kept
// together, a # comment and anything after | or > dropped).
func exampleWords(line string) []string {
	var out []string
	var cur strings.Builder
	in := rune(0)
	for _, r := range line {
		switch {
		case in != 0:
			if r == in {
				in = 0
				continue
			}
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			in = r
		case r == '#' && cur.Len() == 0, r == '|', r == '>':
			if cur.Len() > 0 {
				out = append(out, cur.String())
			}
			return out
		case r == ' ' || r == '\t':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// TestEveryCommandHasExamples: each visible command's help has an
// Examples: section, every line of it runs ncclwiz, and every flag it uses
// exists on that command.
func TestEveryCommandHasExamples(t *testing.T) {
	for _, c := range visible(testRoot()) {
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no Examples:", c.CommandPath())
			continue
		}
		for _, line := range strings.Split(c.Example, "\n") {
			// The segment of a pipeline that runs ncclwiz, without <( ).
			for _, seg := range strings.Split(line, "|") {
				if strings.Contains(seg, "ncclwiz") {
					line = strings.NewReplacer("<(", "", ")", "").Replace(seg)
					break
				}
			}
			ws := exampleWords(line)
			i := 0
			for i < len(ws) && ws[i] != "ncclwiz" {
				i++
			}
			if i == len(ws) {
				t.Errorf("%q example %q does not run ncclwiz", c.CommandPath(), line)
				continue
			}
			target, args, err := c.Root().Find(ws[i+1:])
			if err != nil || !strings.HasPrefix(target.CommandPath(), c.CommandPath()) {
				t.Errorf("%q example %q runs %v (%v)", c.CommandPath(), line, target.CommandPath(), err)
				continue
			}
			for _, a := range args {
				if a == "--" {
					break
				}
				name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
				var f *pflag.Flag
				switch {
				case strings.HasPrefix(a, "--"):
					f = target.Flags().Lookup(name)
				case strings.HasPrefix(a, "-") && len(name) == 1:
					f = target.Flags().ShorthandLookup(name)
				default:
					continue
				}
				if f == nil {
					t.Errorf("%q example %q uses %s, which %q does not have", c.CommandPath(), line, a, target.CommandPath())
				}
			}
		}
	}
}

// TestShortFlagsHaveOneMeaning: a short flag means the same long flag on
// every command (-v is --verbose, -o is --output, never --version or
// --ssh-option).
func TestShortFlagsHaveOneMeaning(t *testing.T) {
	meaning := map[string]map[string][]string{}
	for _, c := range visible(testRoot()) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Shorthand == "" {
				return
			}
			if meaning[f.Shorthand] == nil {
				meaning[f.Shorthand] = map[string][]string{}
			}
			meaning[f.Shorthand][f.Name] = append(meaning[f.Shorthand][f.Name], c.CommandPath())
		})
	}
	for short, longs := range meaning {
		if len(longs) > 1 {
			t.Errorf("-%s means %v", short, longs)
		}
	}
	if _, ok := meaning["v"]["verbose"]; !ok || len(meaning["v"]) != 1 {
		t.Errorf("-v: %v", meaning["v"])
	}
	if _, ok := meaning["o"]["output"]; !ok || len(meaning["o"]) != 1 {
		t.Errorf("-o: %v", meaning["o"])
	}
	out, _, code := runCLI(t, nil, "--version")
	if code != 0 || !strings.HasPrefix(out, "ncclwiz ") {
		t.Errorf("--version: %d %q", code, out)
	}
}

// TestBoolFlagsShowNoValue: pflag shows a `quoted` word of a usage as the
// flag's value name, so a boolean with one reads as if it took a value
// (hang --help once showed "--py-spy py-spy dump").
func TestBoolFlagsShowNoValue(t *testing.T) {
	for _, c := range visible(testRoot()) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); f.Value.Type() == "bool" && name != "" {
				t.Errorf("%s --%s shows a value name %q", c.CommandPath(), f.Name, name)
			}
		})
	}
}

// TestValueFlagsComplete: every flag that takes a value offers
// completions: its values, files, directories, or explicitly none.
func TestValueFlagsComplete(t *testing.T) {
	for _, c := range visible(testRoot()) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Value.Type() == "bool" || f.Name == "help" {
				return
			}
			if _, ok := c.GetFlagCompletionFunc(f.Name); ok {
				return
			}
			if _, ok := f.Annotations[cobra.BashCompFilenameExt]; ok {
				return
			}
			if _, ok := f.Annotations[cobra.BashCompSubdirsInDir]; ok {
				return
			}
			t.Errorf("%s --%s (%s) has no completion", c.CommandPath(), f.Name, f.Value.Type())
		})
	}
	// The values a shell gets for two of them.
	out, _, _ := runCLI(t, nil, cobra.ShellCompRequestCmd, "cluster", "check", "--copy", "")
	if !strings.Contains(out, "never") || !strings.Contains(out, "always") {
		t.Errorf("--copy completions:\n%s", out)
	}
	out, _, _ = runCLI(t, nil, cobra.ShellCompRequestCmd, "test", "--env", "NCCL_P2P")
	if !strings.Contains(out, "NCCL_P2P_DISABLE=") {
		t.Errorf("test --env completions:\n%s", out)
	}
}

var varName = regexp.MustCompile(`\b(?:TORCH_)?NCCL[A-Z0-9]*_[A-Z0-9_]*\*?`)

// TestManPagesKeepVariableNames: every NCCL_* / TORCH_NCCL_* name a
// command's help mentions appears, spelled the same, in its man page
// (markdown once ate the underscores: NCCL_SHM_DISABLE → NCCL_SHMDISABLE).
func TestManPagesKeepVariableNames(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runCLI(t, nil, "man", dir); code != 0 {
		t.Fatalf("man: %d %s", code, errOut)
	}
	checked := 0
	for _, c := range visible(testRoot()) {
		text := c.Short + "\n" + c.Long + "\n" + c.Example
		c.Flags().VisitAll(func(f *pflag.Flag) { text += "\n" + f.Usage })
		names := map[string]bool{}
		for _, n := range varName.FindAllString(text, -1) {
			names[strings.TrimRight(n, "_")] = true
		}
		if len(names) == 0 {
			continue
		}
		page, err := os.ReadFile(filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1"))
		if err != nil {
			t.Errorf("%s: %v", c.CommandPath(), err)
			continue
		}
		roff := strings.NewReplacer(`\-`, "-", `\\`, `\`, `\_`, "_").Replace(string(page))
		for n := range names {
			checked++
			if !strings.Contains(roff, n) {
				t.Errorf("%s.1 lacks %s", strings.ReplaceAll(c.CommandPath(), " ", "-"), n)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d variable names checked: the help texts changed, or the pattern no longer finds them", checked)
	}
	if got := string(md2man.Render([]byte(escapeMarkdown("Set NCCL_SHM_DISABLE=1 or NCCL_IB_DISABLE=1, not `NCCL_P2P_LEVEL`.") + "\n"))); !strings.Contains(got, "NCCL_SHM_DISABLE") ||
		!strings.Contains(got, "NCCL_IB_DISABLE") || !strings.Contains(got, "NCCL_P2P_LEVEL") {
		t.Errorf("escaped text still mangled:\n%s", got)
	}
}

// TestForcedColourThroughPipe: CLICOLOR_FORCE and FORCE_COLOR give colour
// on a pipe; NO_COLOR still wins.
func TestForcedColourThroughPipe(t *testing.T) {
	args := []string{"check", "--scenario", "shm-orphans", "--only", "shm.segments"}
	plain, _, _ := runCLI(t, nil, args...)
	if strings.Contains(plain, "\x1b[") {
		t.Fatalf("colour on a pipe without being asked:\n%q", plain)
	}
	for _, env := range [][]string{{"CLICOLOR_FORCE=1"}, {"FORCE_COLOR=1"}} {
		out, _, _ := runCLI(t, env, args...)
		if !strings.Contains(out, "\x1b[") {
			t.Errorf("%v: no colour:\n%s", env, out)
		}
	}
	if out, _, _ := runCLI(t, []string{"CLICOLOR_FORCE=1", "NO_COLOR=1"}, args...); strings.Contains(out, "\x1b[") {
		t.Errorf("NO_COLOR lost to CLICOLOR_FORCE")
	}
}

// TestDebugPrintsNodeCommands: --debug and NCCLWIZ_DEBUG print the ssh
// command cluster check runs, quoted so it can be pasted into a shell.
func TestDebugPrintsNodeCommands(t *testing.T) {
	args := []string{"cluster", "check", "--engine", "ssh", "--hosts", "ncclwiz-ship-none.invalid", "--connect-timeout", "1s", "--timeout", "5s"}
	for _, c := range []struct {
		env  []string
		args []string
	}{{nil, append([]string{"--debug"}, args...)}, {[]string{"NCCLWIZ_DEBUG=1"}, args}} {
		_, errOut, _ := runCLI(t, c.env, c.args...)
		if !strings.Contains(errOut, "+ ") || !strings.Contains(errOut, "BatchMode=yes") || !strings.Contains(errOut, "ncclwiz-ship-none.invalid 'sh -c ") {
			t.Errorf("%v %v: stderr lacks the ssh command:\n%s", c.env, c.args, errOut)
		}
	}
	if _, errOut, _ := runCLI(t, nil, args...); strings.Contains(errOut, "BatchMode=yes") {
		t.Errorf("commands printed without --debug:\n%s", errOut)
	}
}

// TestManDirNeverWritesThroughLinks: `ncclwiz man DIR` (root, in a
// directory someone else could plant names in) never writes through a
// symlink and never writes into an existing file: cobra's GenManTree
// opened each page with os.Create, so a planted ncclwiz-check.1 → victim
// had the victim truncated and overwritten.
func TestManDirNeverWritesThroughLinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "ncclwiz-check.1")); err != nil {
		t.Fatal(err)
	}
	// A hard link to another file stands for one whose content must not
	// change in place (its other names, its owner's permissions).
	other := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(other, []byte("other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(other, filepath.Join(dir, "ncclwiz-fix.1")); err != nil {
		t.Skipf("no hard link across temp dirs here: %v", err)
	}
	_, errOut, code := runCLI(t, nil, "man", dir)
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("written through the symlink: the victim now holds %d bytes", len(b))
	}
	if code == 0 || !strings.Contains(errOut, "ncclwiz-check.1") || !strings.Contains(errOut, "symbolic link") {
		t.Errorf("exit %d; the planted link is not named: %s", code, errOut)
	}
	// Without the link, every page is written: an existing one replaced.
	if err := os.Remove(filepath.Join(dir, "ncclwiz-check.1")); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, nil, "man", dir); code != 0 {
		t.Fatalf("man: exit %d %s", code, errOut)
	}
	if b, _ := os.ReadFile(other); string(b) != "other\n" {
		t.Errorf("an existing page was written in place: its other name now holds %d bytes", len(b))
	}
	if page, err := os.ReadFile(filepath.Join(dir, "ncclwiz-fix.1")); err != nil || !strings.Contains(string(page), ".TH") {
		t.Errorf("ncclwiz-fix.1 was not replaced by its page: %v", err)
	}
}
