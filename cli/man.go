package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
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
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("write man pages to %s: %w", args[0], err)
			}
			return nil
		},
	}
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
