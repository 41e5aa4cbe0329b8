package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/progress"
	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

type resultMsg struct {
	res checks.Result
	ch  <-chan checks.Result
}

type detectDoneMsg struct{}

type spinTick = spinner.TickMsg

type detectModel struct {
	c       *common
	spin    spinner.Model
	bar     progress.Model
	running bool
	started time.Time
	elapsed time.Duration
	results map[string]checks.Result
	// before is the first complete run, kept for the summary's before/after.
	before []checks.Result
}

func newDetectModel(c *common) detectModel {
	sp := spinner.New(spinner.WithSpinner(spinner.MiniDot))
	if c.opt.ASCII {
		sp = spinner.New(spinner.WithSpinner(spinner.Line))
	}
	bar := progress.New(progress.WithWidth(40), progress.WithoutPercentage())
	if c.opt.ASCII {
		bar = progress.New(progress.WithWidth(40), progress.WithoutPercentage(), progress.WithFillCharacters('#', '.'))
	}
	return detectModel{c: c, spin: sp, bar: bar, results: map[string]checks.Result{}}
}

// startRun launches the checks in the background; results stream back one
// message at a time through a channel.
func (m *detectModel) startRun() tea.Cmd {
	m.running = true
	m.started = time.Now()
	m.results = map[string]checks.Result{}
	ch := make(chan checks.Result, len(m.c.deps.Checks))
	c := m.c
	go func() {
		checks.Run(c.ctx, c.deps.Host, c.deps.Checks, checks.Options{OnResult: func(r checks.Result) { ch <- r }})
		close(ch)
	}()
	return waitResult(ch)
}

func waitResult(ch <-chan checks.Result) tea.Cmd {
	return func() tea.Msg {
		r, ok := <-ch
		if !ok {
			return detectDoneMsg{}
		}
		return resultMsg{res: r, ch: ch}
	}
}

func (m detectModel) update(msg tea.Msg) (detectModel, tea.Cmd) {
	switch msg := msg.(type) {
	case resultMsg:
		m.results[msg.res.ID] = msg.res
		return m, waitResult(msg.ch)
	case detectDoneMsg:
		m.running = false
		m.elapsed = time.Since(m.started)
		return m, nil
	case tea.KeyPressMsg:
		// A finished run moves on by itself; should its screen stay (a
		// resize mid-move), enter goes on too.
		if !m.running && len(m.results) > 0 && (msg.String() == "enter" || msg.String() == "right") {
			return m, goTo(flow.Findings)
		}
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m *detectModel) resize() { m.bar.SetWidth(min(max(m.c.width-30, 10), 50)) }

// ordered returns the results in registry order.
func (m detectModel) ordered() []checks.Result {
	var out []checks.Result
	for _, c := range m.c.deps.Checks {
		if r, ok := m.results[c.ID]; ok {
			out = append(out, r)
		}
	}
	return out
}

func (m detectModel) view() string {
	st := m.c.st
	var b strings.Builder
	n, total := len(m.results), len(m.c.deps.Checks)
	pct := 0.0
	if total > 0 {
		pct = float64(n) / float64(total)
	}
	state := m.spin.View() + " checking"
	if !m.running {
		state = st.ok.Render(st.m.ok) + fmt.Sprintf(" done in %.1fs", m.elapsed.Seconds())
	}
	b.WriteString(fmt.Sprintf("%s  %d/%d checks  %s\n\n", state, n, total, m.bar.ViewAs(pct)))
	idw := 0
	for _, c := range m.c.deps.Checks {
		idw = max(idw, len(c.ID))
	}
	for _, c := range m.c.deps.Checks {
		r, done := m.results[c.ID]
		if !done {
			b.WriteString(st.dim.Render(fmt.Sprintf("%s %-*s  %s", " ", idw, c.ID, c.Title)) + "\n")
			continue
		}
		head := headline(r)
		line := fmt.Sprintf("%s %-*s  %s", st.mark(r.Worst()), idw, r.ID, textsafe.Clean(head.Title))
		b.WriteString(truncate(line, m.c.width) + "\n")
	}
	return b.String()
}

// headline picks the most severe finding of a result.
func headline(r checks.Result) checks.Finding {
	best := r.Findings[0]
	for _, f := range r.Findings[1:] {
		if f.Severity.Rank() < best.Severity.Rank() {
			best = f
		}
	}
	return best
}

func (m detectModel) keyMap() keyMap { return keyMap{} }
