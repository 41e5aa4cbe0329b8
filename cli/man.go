package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/ncclwiz/ncclwiz/internal/safefile"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

func newManCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "man [DIR]",
		Short: "Write the man pages (one per command) to DIR, or ncclwiz(1) to stdout",
		Long: `Generates man pages from the commands' own help, so they never drift from it.
With DIR, writes ncclwiz.1, ncclwiz-check.1, … there (DIR is created);
without, prints the top-level page, e.g.: ncclwiz man | man -l -`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			header := &doc.GenManHeader{Title: "NCCLWIZ", Section: "1", Source: "ncclwiz", Manual: "ncclwiz manual"}
			root.DisableAutoGenTag = true
			// cobra/doc hands the help text to a markdown converter: without
			// this, NCCL_SHM_DISABLE comes out as NCCL_SHMDISABLE (the
			// underscores read as emphasis). The process ends after this
			// command, so the tree is changed in place.
			escapeHelpForMarkdown(root)
			if len(args) == 0 {
				return doc.GenMan(root, header, cmd.OutOrStdout())
			}
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return usageError{fmt.Errorf("man page directory: %w", err)}
			}
			return writeManTree(root, header, args[0])
		},
	}
}

// writeManTree writes the pages cobra's GenManTree would (ncclwiz.1,
// ncclwiz-check.1, …; hidden commands left out) through safefile: a name
// already in DIR is replaced, never written through (a planted symlink)
// or into (a hard link). A symlink or non-regular file at any page's name
// refuses the whole tree before anything is written.
func writeManTree(root *cobra.Command, header *doc.GenManHeader, dir string) error {
	var cmds []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		cmds = append(cmds, c)
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
				walk(sub)
			}
		}
	}
	walk(root)
	page := func(c *cobra.Command) string {
		return filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "-")+"."+header.Section)
	}
	var refused []string
	for _, c := range cmds {
		if err := safefile.Check(page(c)); err != nil {
			refused = append(refused, err.Error())
		}
	}
	if len(refused) > 0 {
		return usageError{fmt.Errorf("no man page written to %s: %s", textsafe.Sanitize(dir), textsafe.Sanitize(strings.Join(refused, "; ")))}
	}
	for _, c := range cmds {
		var b bytes.Buffer
		h := *header
		if err := doc.GenMan(c, &h, &b); err != nil {
			return fmt.Errorf("man page of %s: %w", c.CommandPath(), err)
		}
		if err := safefile.Write(page(c), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write man pages to %s: %w", textsafe.Sanitize(dir), err)
		}
	}
	return nil
}

// escapeHelpForMarkdown escapes what markdown would read as emphasis or an
// escape (_ * \\) in every command's short and long help and every flag's
// usage, outside `code spans`, which markdown leaves alone. Examples go into
// a code block and stay as they are.
func escapeHelpForMarkdown(c *cobra.Command) {
	c.Short = escapeMarkdown(c.Short)
	c.Long = escapeMarkdown(c.Long)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) { f.Usage = escapeMarkdown(f.Usage) })
	for _, sub := range c.Commands() {
		escapeHelpForMarkdown(sub)
	}
}

func escapeMarkdown(s string) string {
	var b strings.Builder
	code := false
	for _, r := range s {
		switch {
		case r == '`':
			code = !code
		case !code && (r == '_' || r == '*' || r == '\\'):
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
