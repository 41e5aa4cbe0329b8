// Command ncclwiz diagnoses and fixes NCCL / multi-GPU PyTorch failures.
package main

import (
	"os"

	"github.com/ncclwiz/ncclwiz/cli"
	"github.com/ncclwiz/ncclwiz/internal/contain"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	// The collective test re-executes this binary as the keeper of its
	// processes (see internal/contain); that mode never returns.
	contain.Main()
	app := &cli.App{
		Version: version,
		Stdin:   os.Stdin,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
		Env:     os.Environ(),
	}
	os.Exit(cli.ExitCode(cli.Execute(app, os.Args[1:])))
}
