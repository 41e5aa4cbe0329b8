package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/termio"
	"github.com/ncclwiz/ncclwiz/tui"
)

// runWizard starts the interactive wizard on the terminal.
func runWizard(cmd *cobra.Command, a *App) error {
	h, err := a.Host()
	if err != nil {
		return err
	}
	reg, err := all.Registry()
	if err != nil {
		return fmt.Errorf("build check registry: %w", err)
	}
	var quick []checks.Check
	for _, c := range reg.All() {
		if c.Tier != checks.Deep {
			quick = append(quick, c)
		}
	}
	deps := wizardDeps(a, reg, quick)
	deps.Host = h
	if a.scenario != nil {
		deps.SuggestedLog = a.scenario.LogPath
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	opt := tui.Options{ASCII: termio.NoColor(a.Env, a.NoColor) || !termio.UnicodeOK(a.Env), Lang: a.Lang}
	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithEnvironment(a.Env)}
	if f, ok := a.Stdin.(*os.File); ok {
		popts = append(popts, tea.WithInput(f))
	}
	popts = append(popts, tea.WithOutput(a.Stdout))
	if termio.NoColor(a.Env, a.NoColor) {
		// colorprofile alone ignores NO_COLOR values that are not booleans.
		popts = append(popts, tea.WithColorProfile(colorprofile.Ascii))
	}
	model := tui.New(ctx, deps, opt)
	final, err := tea.NewProgram(model, popts...).Run()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("wizard: %w", err)
	}
	if fm, ok := final.(tui.Model); ok {
		line, code := fm.ExitSummary()
		if line != "" {
			fmt.Fprintln(a.Stdout, line)
		}
		if code != 0 {
			return ExitError{Code: code}
		}
	}
	return nil
}

// wizardDeps connects the wizard to the rest of ncclwiz.
func wizardDeps(a *App, reg *checks.Registry, quick []checks.Check) tui.Deps {
	_ = context.Background
	return tui.Deps{Checks: quick}
}
