// Package cli defines ncclwiz's commands (cobra). main.go only builds an App
// from the process and calls Execute; everything else is testable here with
// buffers instead of a terminal.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/shellquote"
	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/scenario"
)

// App carries the process's streams, environment and global flags.
type App struct {
	Version string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Env     []string

	// Global flags.
	NoColor  bool
	Debug    bool // --debug: print the commands run on other nodes
	ShmPath  string
	Scenario string
	Lang     string
	// FixtureDir points the checks at a fixture tree (hidden; for tests and demos).
	FixtureDir string
	// ClockAhead judges ages as if the clock were this far ahead (hidden;
	// for end-to-end tests, which cannot wait the two minutes a leftover
	// rank or an orphaned segment must be old).
	ClockAhead time.Duration
	// Peer is HOST:PORT for net.rendezvous to test (check --peer).
	Peer string
	// Python is --python: the interpreter of the user's training.
	Python string

	// hostCache lets several phases of one command share a host.
	hostCache *host.Host
	scenario  *scenario.Scenario
	cleanups  []func()
}

// DebugWriter is where --debug (or NCCLWIZ_DEBUG set and not 0) prints the
// commands run on other nodes; nil when off.
func (a *App) DebugWriter() io.Writer {
	if v := termio.Getenv(a.Env, "NCCLWIZ_DEBUG"); a.Debug || (v != "" && v != "0") {
		return a.Stderr
	}
	return nil
}

// ExitError carries an exit code without a message (the command already
// printed what it had to say).
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode maps an error returned by Execute to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 2
}

// Out describes stdout for rendering.
func (a *App) Out() termio.Output { return termio.New(a.Stdout, a.Env, a.NoColor) }

// StdinTTY reports whether stdin is an interactive terminal.
func (a *App) StdinTTY() bool {
	f, ok := a.Stdin.(*os.File)
	return ok && termio.IsTerminal(f)
}

// StdoutTTY reports whether stdout is an interactive terminal.
func (a *App) StdoutTTY() bool {
	f, ok := a.Stdout.(*os.File)
	return ok && termio.IsTerminal(f)
}

// Host returns the machine to diagnose: a simulated scenario, a fixture
// tree, or the real machine (with --shm-path applied).
func (a *App) Host() (*host.Host, error) {
	if a.hostCache != nil {
		return a.hostCache, nil
	}
	var h *host.Host
	switch {
	case a.Scenario != "":
		s, err := scenarioHost(a)
		if err != nil {
			return nil, err
		}
		h = s
	case a.FixtureDir != "":
		f, err := host.LoadFixture(a.FixtureDir)
		if err != nil {
			return nil, err
		}
		h = f
	default:
		h = host.Local(host.LocalOptions{ShmDir: a.ShmPath})
		h.Env = a.Env
	}
	if a.ShmPath != "" && a.Scenario == "" {
		h.ShmDir = a.ShmPath
	}
	if a.Peer != "" {
		if _, _, err := host.SplitPeer(a.Peer); err != nil {
			return nil, usageError{err}
		}
		h.Peer = a.Peer
	}
	h.Python = a.Python
	if a.ClockAhead != 0 && !h.Simulated {
		ahead := a.ClockAhead
		h.Clock = func() time.Time { return time.Now().Add(ahead) }
	}
	a.hostCache = h
	return h, nil
}

// scenarioHost builds the simulated practice server named by --scenario;
// its private copy is removed when the command ends.
func scenarioHost(a *App) (*host.Host, error) {
	// The guard is in place before the copy exists, so no moment is left
	// where a signal kills the process with the copy on disk.
	closeCopy := make(chan func() error, 1)
	stop := guardScenario(closeCopy)
	s, err := scenario.Build(a.Scenario)
	if err != nil {
		stop()
		return nil, usageError{err}
	}
	closeCopy <- s.Close
	a.scenario = s
	a.cleanups = append(a.cleanups, func() { stop(); _ = s.Close() })
	return s.Host, nil
}

// closeCopyWithin waits up to d for the copy's Close.
func closeCopyWithin(ch <-chan func() error, d time.Duration) <-chan func() error {
	out := make(chan func() error, 1)
	go func() {
		select {
		case c := <-ch:
			out <- c
		case <-time.After(d):
		}
		close(out)
	}()
	return out
}

// scenarioGrace is how long a command that got SIGHUP, SIGTERM or SIGINT
// has to return (and remove its copy as usual) before the guard does.
const scenarioGrace = 2 * time.Second

// guardScenario removes the scenario's private copy when a signal ends the
// command: a command that handles the signal returns within scenarioGrace
// and cleans up as usual; one that does not (SIGHUP during `check`) would
// have died with its copy left in /tmp, so the guard removes the copy and
// then ends the process with that signal. (A SIGKILL cannot be caught: the
// next scenario run sweeps such copies, scenario.Build.) The returned
// function stops the guard.
func guardScenario(closeCopy <-chan func() error) func() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case sig := <-sigs:
			select {
			case <-done:
				return
			case <-time.After(scenarioGrace):
			}
			select {
			case c := <-closeCopy:
				_ = c()
			default: // the signal came while the copy was being made
				if c, ok := <-closeCopyWithin(closeCopy, scenarioGrace); ok {
					_ = c()
				}
			}
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
			time.Sleep(time.Second)
			os.Exit(128 + int(sig.(syscall.Signal)))
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
		})
	}
}

// Context is the global flags that chose the machine a command looks at
// (--scenario NAME or --shm-path DIR), quoted for a shell: every command
// ncclwiz suggests afterwards (the wizard's hints, the exported script's
// re-check) carries them, so it looks at the same place.
func (a *App) Context() string {
	switch {
	case a.Scenario != "":
		return "--scenario " + shellquote.Quote(a.Scenario)
	case a.ShmPath != "":
		return "--shm-path " + shellquote.Quote(a.ShmPath)
	}
	return ""
}

// Command is `ncclwiz SUB` as the user should type it next: with the
// global flags that chose the machine looked at (Context).
func (a *App) Command(sub string) string {
	if c := a.Context(); c != "" {
		return "ncclwiz " + sub + " " + c
	}
	return "ncclwiz " + sub
}

// usageError marks errors that come from what the user typed.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// Close runs the cleanups of resources the command created.
func (a *App) Close() {
	for i := len(a.cleanups) - 1; i >= 0; i-- {
		a.cleanups[i]()
	}
	a.cleanups = nil
}
