package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/ncclwiz/ncclwiz/scenario"
)

func printScenarios(a *App) error {
	list, err := scenario.List()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(a.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tWHAT IT SIMULATES")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Title)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.Stdout, "\nPractice with: ncclwiz --scenario NAME   (fixes change the simulation only)")
	return err
}
