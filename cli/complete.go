package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/scenario"
	"github.com/ncclwiz/ncclwiz/steps"
	"github.com/ncclwiz/ncclwiz/steps/envsnippet"
	"github.com/ncclwiz/ncclwiz/validate"
)

// registerCompletions gives the value flags their shell completions. Values
// come from the packages that own them, so a new check, fix or scenario is
// offered without touching this file.
func registerCompletions(root *cobra.Command) {
	// Persistent flags of root are registered on root.
	_ = root.RegisterFlagCompletionFunc("scenario", completeScenarios)
	_ = root.RegisterFlagCompletionFunc("lang", oneOf(guides.Languages...))
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "check", "cluster":
			registerOn(cmd, "only", completeCheckIDs)
		case "fix":
			registerOn(cmd, "apply", listValues(steps.IDs))
		case "env":
			registerOn(cmd, "shell", oneOf(envsnippet.Formats...))
		case "test":
			registerOn(cmd, "backend", oneOf(validate.BackendAuto, validate.BackendTorchrun, validate.BackendNCCLTests))
			registerOn(cmd, "rungs", fixedValues(validate.RungSingle, validate.RungAll, validate.RungSHM, validate.RungNet, validate.RungFix))
		}
		// cluster check is a subcommand of cluster.
		for _, sub := range cmd.Commands() {
			if sub.Flags().Lookup("only") != nil {
				registerOn(sub, "only", completeCheckIDs)
			}
		}
	}
}

type completeFunc = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)

func registerOn(cmd *cobra.Command, flag string, f completeFunc) {
	if cmd.Flags().Lookup(flag) == nil {
		return
	}
	_ = cmd.RegisterFlagCompletionFunc(flag, f)
}

// oneOf completes a flag that takes one of vals.
func oneOf(vals ...string) completeFunc {
	return cobra.FixedCompletions(vals, cobra.ShellCompDirectiveNoFileComp)
}

// fixedValues completes a comma-separated list of vals.
func fixedValues(vals ...string) completeFunc {
	return listValues(func() []string { return vals })
}

// listValues completes one item of a comma-separated list: what was typed
// before the last comma is kept as the prefix of every suggestion.
func listValues(vals func() []string) completeFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return commaList(vals(), toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

func commaList(vals []string, toComplete string) []string {
	prefix := ""
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		prefix = toComplete[:i+1]
	}
	done := map[string]bool{}
	for _, v := range strings.Split(prefix, ",") {
		done[v] = true
	}
	var out []string
	for _, v := range vals {
		if !done[v] && strings.HasPrefix(prefix+v, toComplete) {
			out = append(out, prefix+v)
		}
	}
	return out
}

func completeScenarios(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	list, err := scenario.List()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	out := make([]string, 0, len(list))
	for _, s := range list {
		if strings.HasPrefix(s.Name, toComplete) {
			out = append(out, s.Name+"\t"+s.Title)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeCheckIDs offers check IDs and categories, as --only accepts both.
func completeCheckIDs(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	reg, err := all.Registry()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var vals []string
	seen := map[string]bool{}
	for _, c := range reg.All() {
		if !seen[c.Category] {
			seen[c.Category] = true
			vals = append(vals, c.Category)
		}
		vals = append(vals, c.ID)
	}
	return commaList(vals, toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}
