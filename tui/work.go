package tui

import (
	"fmt"

	tea "charm.land/bubbletea/v2"
)

// workMsg is a background job's progress line, or its end (done). The job
// runs in a goroutine started by a tea.Cmd; its messages come back through
// a channel one tea.Cmd at a time, so Update never waits for it.
type workMsg struct {
	// kind routes the message to its screen; run tells a current run from
	// one the user already left (cancelled or replaced), whose end is
	// dropped.
	kind string
	run  int
	line string
	done bool
	val  any
	err  error
	ch   <-chan workMsg
}

// startWork runs fn in a goroutine. Progress lines may be dropped when the
// screen is behind (only the latest matters); the end never is.
func startWork(kind string, run int, fn func(progress func(string)) (any, error)) tea.Cmd {
	ch := make(chan workMsg, 8)
	go func() {
		defer close(ch)
		// A panic here would end the program without restoring the
		// terminal: it becomes the run's error instead.
		defer func() {
			if r := recover(); r != nil {
				ch <- workMsg{kind: kind, run: run, done: true, err: fmt.Errorf("internal error (please report it): %v", r)}
			}
		}()
		v, err := fn(func(s string) {
			select {
			case ch <- workMsg{kind: kind, run: run, line: s}:
			default:
			}
		})
		ch <- workMsg{kind: kind, run: run, done: true, val: v, err: err}
	}()
	return waitWork(ch)
}

// waitWork delivers the next message of a job.
func waitWork(ch <-chan workMsg) tea.Cmd {
	return func() tea.Msg {
		w, ok := <-ch
		if !ok {
			return nil
		}
		w.ch = ch
		return w
	}
}

// next keeps reading a job's channel until its end, whoever still cares.
func (w workMsg) next() tea.Cmd {
	if w.done || w.ch == nil {
		return nil
	}
	return waitWork(w.ch)
}
