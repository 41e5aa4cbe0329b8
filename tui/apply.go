package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

type fixAppliedMsg struct {
	res FixResult
	ch  <-chan any
}
type fixProgressMsg struct {
	line string
	ch   <-chan any
}
type applyDoneMsg struct{}

// askMsg is a question a running fix asks before it goes beyond the plan
// the user said y to (SIGKILL of a rank that ignored SIGTERM): the fix
// waits on reply, and gets no unless the user answers y on the Apply
// screen, where the question is shown whole.
type askMsg struct {
	question string
	reply    chan<- bool
	ch       <-chan any
}

// applyModel runs the fixes the confirm step sends and is afterwards a
// read-only record of what they did. Nothing here starts a fix by itself.
type applyModel struct {
	c       *common
	running bool
	queue   []FixView
	// plan is the plan the last choice was made from.
	plan    []FixView
	log     []string
	results []FixResult
	out     pager
	// asking is the question a running fix waits on, if any.
	asking *askMsg
}

func newApplyModel(c *common) applyModel { return applyModel{c: c, out: newPager()} }

// done reports whether at least one run finished and none is running.
func (m applyModel) done() bool { return !m.running && len(m.results) > 0 }

// startRun applies the confirmed fixes one after another in the background;
// progress lines and results come back through a channel. Only the root
// calls it, on the confirm step's applyMsg.
func (m *applyModel) startRun(chosen, plan []FixView) tea.Cmd {
	m.queue, m.plan, m.log = chosen, plan, nil
	if m.c.deps.ApplyFix == nil || len(chosen) == 0 {
		return nil
	}
	m.running = true
	ch := make(chan any, 16)
	c := m.c
	open := m.open()
	// ask puts a question on the Apply screen and waits for the answer;
	// quitting the wizard answers no.
	ask := func(q string) bool {
		reply := make(chan bool, 1)
		select {
		case ch <- askMsg{question: q, reply: reply}:
		case <-c.ctx.Done():
			return false
		}
		select {
		case yes := <-reply:
			return yes
		case <-c.ctx.Done():
			return false
		}
	}
	go func() {
		defer close(ch)
		for _, f := range chosen {
			ch <- fixProgressMsg{line: "applying " + f.ID}
			others := slices.DeleteFunc(slices.Clone(open), func(id string) bool { return id == f.ID })
			res := c.deps.ApplyFix(c.ctx, f, others, func(s string) { ch <- fixProgressMsg{line: s} }, ask)
			res.ID = f.ID
			if res.Err == nil {
				open = slices.DeleteFunc(open, func(id string) bool { return id == f.ID })
			}
			ch <- fixAppliedMsg{res: res}
		}
	}()
	m.refresh()
	return waitApply(ch)
}

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
			x.ch = ch
			return x
		case askMsg:
			x.ch = ch
			return x
		}
		return nil
	}
}

// progress takes the run's messages whatever stage is on screen.
func (m applyModel) progress(msg tea.Msg) (applyModel, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case fixProgressMsg:
		m.log = append(m.log, msg.line)
		cmd = waitApply(msg.ch)
	case fixAppliedMsg:
		m.results = append(m.results, msg.res)
		cmd = waitApply(msg.ch)
	case askMsg:
		// The run waits for the answer; its next message is read after it.
		m.asking = &msg
	case applyDoneMsg:
		m.running, m.asking = false, nil
	}
	m.refresh()
	return m, cmd
}

// answer replies to the open question and reads on.
func (m applyModel) answer(yes bool) (applyModel, tea.Cmd) {
	q := m.asking
	m.asking = nil
	q.reply <- yes
	word := "no"
	if yes {
		word = "yes"
	}
	m.log = append(m.log, "you answered "+word)
	m.refresh()
	return m, waitApply(q.ch)
}

func (m applyModel) update(msg tea.Msg) (applyModel, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return m, nil
	}
	if m.asking != nil {
		switch k.String() {
		case "y":
			if !m.questionWhole() {
				return m, status(fmt.Sprintf("the window is too small to show the whole question (it is %dx%d): make it larger to answer y; n leaves it running", m.c.width, m.c.height))
			}
			return m.answer(true)
		case "n", "N", "esc":
			return m.answer(false)
		}
	}
	if m.out.scroll(k.String(), true) {
		return m, nil
	}
	if m.done() && (k.String() == "enter" || k.String() == "right") {
		return m, goTo(flow.Validate)
	}
	return m, nil
}

// proven reports whether a fix's result verified it (its re-check or its
// own proof): advice, and a fix no check here can judge, are never
// "verified".
func proven(r FixResult) bool {
	sev, _ := verdict(r)
	return r.Err == nil && sev == checks.OK
}

// succeeded lists the fixes applied without error, in order.
func (m applyModel) succeeded() []string {
	var ids []string
	for _, r := range m.results {
		if r.Err == nil && !slices.Contains(ids, r.ID) {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// open returns the fixes of the current plan that could still answer a
// problem: possible here and not applied successfully so far (those chosen
// to run next count: they are about to).
func (m applyModel) open() []string {
	var out []string
	for _, f := range m.plan {
		if f.Impossible == "" && !slices.ContainsFunc(m.results, func(r FixResult) bool { return r.ID == f.ID && r.Err == nil }) {
			out = append(out, f.ID)
		}
	}
	return out
}

// verdict renders the fixer's verdict (steps.Judge made it): OK (proven,
// or what is left is another open fix's job), Error (not done, or a
// problem only it answers is still reported) or Info (done, but nothing
// here can prove it).
func verdict(r FixResult) (checks.Severity, string) {
	if r.Err != nil {
		return checks.Error, "failed: " + textsafe.Clean(r.Err.Error())
	}
	var ids, clean, others []string
	for _, rc := range r.Recheck {
		ids = append(ids, rc.ID)
		if rc.Worst().IsProblem() {
			others = append(others, rc.ID)
		} else {
			clean = append(clean, rc.ID)
		}
	}
	switch r.Verdict {
	case VerdictFailed:
		var own []string
		for _, f := range r.Remaining {
			own = append(own, textsafe.Clean(f.Title))
		}
		return checks.Error, "re-check still reports: " + strings.Join(own, "; ")
	case VerdictHandedOn:
		return checks.OK, textsafe.Clean(r.HandedOn)
	case VerdictPassed:
		if len(ids) == 0 {
			if r.Proof == "" {
				return checks.OK, "verified"
			}
			return checks.OK, "verified: " + textsafe.Clean(r.Proof)
		}
		// What it answers is gone; a check that still reports something
		// else is named as such, not as passed.
		text := "re-check passed: nothing it answers is reported any more"
		if len(clean) > 0 {
			text += " (" + strings.Join(clean, ", ") + " clean)"
		}
		if len(others) > 0 {
			verb := " still reports"
			if len(others) > 1 {
				verb = " still report"
			}
			text += "; " + strings.Join(others, ", ") + verb + " other problems, for their own fixes"
		}
		return checks.OK, text
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

// resultLines renders what one fix did: summary, verdict, what it left
// alone and why, and every change.
func resultLines(st styles, r FixResult, width int) string {
	var b strings.Builder
	sev, v := verdict(r)
	b.WriteString(st.mark(sev) + " " + st.title.Render(r.ID) + "\n")
	if r.Summary != "" {
		b.WriteString("    " + textwrap.String(textsafe.Clean(r.Summary), width-4, "    ") + "\n")
	}
	b.WriteString("    " + textwrap.String(v, width-4, "    ") + "\n")
	if len(r.Skipped) > 0 {
		b.WriteString("    " + st.warn.Render(fmt.Sprintf("left alone (%d):", len(r.Skipped))) + "\n")
		for _, s := range r.Skipped {
			b.WriteString("      " + textwrap.String(textsafe.Clean(s), width-6, "        ") + "\n")
		}
	}
	if len(r.Changed) > 0 {
		b.WriteString("    " + st.dim.Render(fmt.Sprintf("changed (%d):", len(r.Changed))) + "\n")
		for _, c := range r.Changed {
			b.WriteString(st.dim.Render("      "+textwrap.String(textsafe.Clean(c), width-6, "        ")) + "\n")
		}
	}
	return b.String()
}

func (m *applyModel) refresh() {
	var b strings.Builder
	for _, r := range m.results {
		b.WriteString(resultLines(m.c.st, r, m.c.width))
	}
	// Title and blank above; a progress or position line below, and the
	// open question, whole, under it.
	m.out.set(b.String(), m.c.width, m.c.bodyHeight()-4-m.questionHeight())
}

// question draws the open question with its answers, wrapped in full.
func (m applyModel) question() string {
	if m.asking == nil {
		return ""
	}
	st := m.c.st
	return st.warn.Render(wrapText(textsafe.Clean(m.asking.question), m.c.width-2)) + "\n" +
		st.key.Render("y") + " yes   " + st.key.Render("n") + " no (leave it running)"
}

// questionWhole reports whether the open question and its answers are on
// screen whole: below the title, in the rows surely shown, no line cut
// by the width. y is taken only then.
func (m applyModel) questionWhole() bool {
	q := m.question()
	if q == "" || 2+lipgloss.Height(q) > m.c.shownRows() {
		return false
	}
	for _, l := range strings.Split(q, "\n") {
		if lipgloss.Width(l) > m.c.width {
			return false
		}
	}
	return true
}

func (m applyModel) questionHeight() int {
	if m.asking == nil {
		return 0
	}
	return lipgloss.Height(m.question()) + 1
}

func (m applyModel) view() string {
	st := m.c.st
	var b strings.Builder
	switch {
	case m.running:
		b.WriteString(st.title.Render(fmt.Sprintf("Applying %s…", units.Count(len(m.queue), "fix", "fixes"))) + "\n\n")
	case len(m.results) == 0:
		return st.dim.Render("Nothing was applied: fixes run only from the Fix step, after you confirm the plan with y.")
	default:
		b.WriteString(st.title.Render("Applied: what happened") + "\n\n")
	}
	// The open question comes first, under the title: it is what a short
	// window must show.
	if q := m.question(); q != "" {
		b.WriteString(q + "\n\n")
	}
	b.WriteString(m.out.view() + "\n\n")
	if m.running && len(m.log) > 0 {
		b.WriteString(st.dim.Render(truncate(textsafe.Clean(m.log[len(m.log)-1]), m.c.width)))
	} else {
		b.WriteString(st.dim.Render(truncate(m.out.position(), m.c.width)))
	}
	return b.String()
}

func (m applyModel) keyMap() keyMap {
	var k keyMap
	if m.asking != nil {
		return keyMap{Short: []key.Binding{bind("y", "yes", "y"), bind("n", "no", "n", "esc")}}
	}
	if m.running {
		return k
	}
	if m.done() {
		k.Short = append(k.Short, bind("enter", "validate", "enter"), recheckKey)
	}
	if m.out.scrolls() {
		k.Short = append(k.Short, m.c.list.Scroll)
	}
	return k
}
