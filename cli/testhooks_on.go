//go:build testhooks

package cli

import "github.com/spf13/pflag"

// addTestHooks adds the flags only test builds have (internal/gobin builds
// with -tags testhooks). --clock-ahead moves the two-minute safety windows
// (a leftover rank's and a segment's age), so a release never has it.
func addTestHooks(pf *pflag.FlagSet, a *App) {
	pf.DurationVar(&a.ClockAhead, "clock-ahead", 0, "judge ages as if the clock were this far ahead (testing)")
	_ = pf.MarkHidden("clock-ahead")
}
