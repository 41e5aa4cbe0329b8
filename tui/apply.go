package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/steps/flow"
	"github.com/ncclwiz/ncclwiz/textsafe"
)

type fixAppliedMsg struct{ res FixResult }
type fixProgressMsg struct {
	line string
	ch   <-chan any
}

type applyModel struct {
	c       *common
	started bool
	done    bool
	queue   []string
	log     []string
	results []FixResult
}

// startRun applies the chosen fixes one after another in the background;
// progress lines and results come back through a channel.
func (m *applyModel) startRun(ids []string) tea.Cmd {
	m.started, m.queue = true, ids
	if m.c.deps.ApplyFix == nil || len(ids) == 0 {
		m.done = true
		return nil
	}
	ch := make(chan any, 16)
	c := m.c
	go func() {
		defer close(ch)
		for _, id := range ids {
			ch <- fixProgressMsg{line: "applying " + id}
			res := c.deps.ApplyFix(c.ctx, id, func(s string) { ch <- fixProgressMsg{line: s} })
			res.ID = id
			ch <- fixAppliedMsg{res: res}
		}
	}()
	return waitApply(ch)
}

type applyDoneMsg struct{}

func waitApply(ch <-chan any) tea.Cmd {
	return func() tea.Msg {
		v, ok := <-ch
		if !ok {
			return applyDoneMsg{}
		}
		switch x := v.(type) {
		case fixProgressMsg:
			x.ch = ch
			return x
		case fixAppliedMsg:
			return fixAppliedWithCh{fixAppliedMsg: x, ch: ch}
		}
		return nil
	}
}

type fixAppliedWithCh struct {
	fixAppliedMsg
	ch <-chan any
}

func (m applyModel) update(msg tea.Msg) (applyModel, tea.Cmd) {
	switch msg := msg.(type) {
	case fixProgressMsg:
		m.log = append(m.log, msg.line)
		return m, waitApply(msg.ch)
	case fixAppliedWithCh:
		m.results = append(m.results, msg.res)
		return m, waitApply(msg.ch)
	case applyDoneMsg:
		m.done = true
		return m, nil
	case tea.KeyPressMsg:
		if m.done && (msg.String() == "enter" || msg.String() == "right") {
			return m, goTo(flow.Validate)
		}
	}
	return m, nil
}

// verdict says whether the fix did what it answers: OK (proven), Error
// (not done or still reported) or Info (done, but nothing here can prove
// it). Problems the re-run checks still report for other reasons (a small
// /dev/shm after a cleanup) are named, not held against this fix.
func verdict(r FixResult) (checks.Severity, string) {
	if r.Err != nil {
		return checks.Error, "failed: " + r.Err.Error()
	}
	var ids, others []string
	for _, rc := range r.Recheck {
		ids = append(ids, rc.ID)
		if rc.Worst().IsProblem() {
			others = append(others, rc.ID)
		}
	}
	also := ""
	if len(others) > 0 {
		also = "; other findings remain in " + strings.Join(others, ", ") + " (see their own fixes)"
	}
	switch r.Verdict {
	case VerdictFailed:
		return checks.Error, "re-check still reports: " + textsafe.Clean(strings.Join(r.Remaining, "; "))
	case VerdictPassed:
		if len(ids) == 0 {
			if r.Proof == "" {
				return checks.OK, "verified"
			}
			return checks.OK, "verified: " + textsafe.Clean(r.Proof)
		}
		return checks.OK, "re-check passed (" + strings.Join(ids, ", ") + ")" + also
	case VerdictUnproven:
		if r.Proof != "" {
			return checks.Info, "done; " + textsafe.Clean(r.Proof)
		}
		return checks.Info, "done; no check here can prove it — the next run will"
	}
	// No verdict from the fixer: any problem in the re-check counts.
	if len(ids) == 0 {
		return checks.Info, "done"
	}
	if len(others) > 0 {
		return checks.Error, "re-check still reports problems in " + strings.Join(others, ", ")
	}
	return checks.OK, "re-check passed (" + strings.Join(ids, ", ") + ")"
}

func (m applyModel) view() string {
	st := m.c.st
	var b strings.Builder
	if !m.done {
		b.WriteString(st.title.Render(fmt.Sprintf("Applying %s…", units.Count(len(m.queue), "fix", "fixes"))) + "\n\n")
	} else {
		b.WriteString(st.title.Render("Applied") + "\n\n")
	}
	for _, r := range m.results {
		sev, v := verdict(r)
		mark := st.mark(sev)
		b.WriteString(mark + " " + st.title.Render(r.ID) + "\n    " + textwrap.String(textsafe.Clean(r.Summary), m.c.width-4, "    ") + "\n")
		for i, ch := range r.Changed {
			if i == 6 {
				b.WriteString(st.dim.Render(fmt.Sprintf("    … and %d more", len(r.Changed)-6)) + "\n")
				break
			}
			b.WriteString(st.dim.Render(truncate("    "+textsafe.Clean(ch), m.c.width)) + "\n")
		}
		b.WriteString("    " + textwrap.String(v, m.c.width-4, "    ") + "\n")
	}
	if !m.done && len(m.log) > 0 {
		b.WriteString("\n" + st.dim.Render(truncate(textsafe.Clean(m.log[len(m.log)-1]), m.c.width)) + "\n")
	}
	return b.String()
}

func (m applyModel) keys() [][2]string {
	if m.done {
		return [][2]string{{"enter", "validate"}}
	}
	return nil
}
