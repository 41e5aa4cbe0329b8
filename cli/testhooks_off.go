//go:build !testhooks

package cli

import "github.com/spf13/pflag"

// addTestHooks adds nothing outside test builds: see testhooks_on.go.
func addTestHooks(*pflag.FlagSet, *App) {}
