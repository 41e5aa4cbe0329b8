package tui

import (
	"slices"

	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// history is the way the user came to the current stage: the stages left
// behind, oldest first. Esc returns to the last one, so a guide opened from
// Findings goes back to Findings and one opened from a log result goes
// back to that result, whatever the stage order of the flow says.
type history []flow.Stage

// visit records the move from one stage to another. Arriving at a stage
// already on the way back there cuts the way at it (shift+tab, or a
// screen's own "back" key), so the history never loops and Esc never
// returns to a stage twice.
func (h history) visit(from, to flow.Stage) history {
	if i := slices.Index(h, to); i >= 0 {
		return slices.Clip(h[:i])
	}
	if from == to {
		return h
	}
	return append(slices.Clip(h), from)
}

// returning reports whether going to s goes back along the history (the
// screen there keeps its state: cursor, open guide, log result).
func (h history) returning(s flow.Stage) bool { return slices.Contains(h, s) }

// back is where Esc goes; ok is false at the start of the way.
func (h history) back() (s flow.Stage, ok bool) {
	if len(h) == 0 {
		return "", false
	}
	return h[len(h)-1], true
}
