package cli

import (
	"os"
	"testing"

	"github.com/ncclwiz/ncclwiz/internal/contain"
	"github.com/ncclwiz/ncclwiz/internal/shmtest"
)

// TestMain lets this test binary serve as the ncclwiz CLI (for tests that
// signal a real process), as a segment holder and as the containment keeper
// of the collective test, as the ncclwiz binary does.
func TestMain(m *testing.M) {
	// The keeper is re-executed from a CLI run and inherits its environment,
	// so it must be recognised first.
	contain.Main()
	if os.Getenv(envRunCLI) != "" {
		app := &App{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Env: os.Environ()}
		os.Exit(ExitCode(Execute(app, os.Args[1:])))
	}
	shmtest.Main()
	os.Exit(m.Run())
}
