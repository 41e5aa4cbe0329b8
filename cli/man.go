package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
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
