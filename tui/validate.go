package tui

import (
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

type validateModel struct {
	c        *common
	checked  bool
	can      bool
	why      string
	running  bool
	lines    []string
	result   *ValidationResult
	err      error
	askedRun bool
	// results are what the fixes applied so far did.
	results []FixResult
	// out scrolls what is below the title: a reason can be long, and its
	// last sentence is never cut off.
	out pager
}

type canValidateMsg struct {
	ok  bool
	why string
}
type validateEventMsg struct {
	line string
	ch   <-chan any
}
type validateDoneMsg struct {
	res ValidationResult
	err error
}

func (m *validateModel) prepare() tea.Cmd {
	if m.checked || m.c.deps.CanValidate == nil {
		if m.c.deps.CanValidate == nil {
			m.checked, m.can, m.why = true, false, "collective testing is not available in this build"
		}
		return nil
	}
	c := m.c
	return func() tea.Msg {
		ok, why := c.deps.CanValidate(c.ctx)
		return canValidateMsg{ok: ok, why: why}
	}
}

func (m *validateModel) run() tea.Cmd {
	m.running, m.lines, m.result, m.err = true, nil, nil, nil
	ch := make(chan any, 64)
	c := m.c
	go func() {
		defer close(ch)
		res, err := c.deps.Validate(c.ctx, func(s string) { ch <- s })
		ch <- validateDoneMsg{res: res, err: err}
	}()
	return waitValidate(ch)
}

func waitValidate(ch <-chan any) tea.Cmd {
	return func() tea.Msg {
		v, ok := <-ch
		if !ok {
			return nil
		}
		switch x := v.(type) {
		case string:
			return validateEventMsg{line: x, ch: ch}
		case validateDoneMsg:
			return x
		}
		return nil
	}
}

func (m validateModel) update(msg tea.Msg) (validateModel, tea.Cmd) {
	m, cmd := m.handle(msg)
	m.refresh()
	return m, cmd
}

func (m validateModel) handle(msg tea.Msg) (validateModel, tea.Cmd) {
	switch msg := msg.(type) {
	case canValidateMsg:
		m.checked, m.can, m.why = true, msg.ok, msg.why
	case validateEventMsg:
		m.lines = append(m.lines, msg.line)
		return m, waitValidate(msg.ch)
	case validateDoneMsg:
		m.running = false
		m.result, m.err = &msg.res, msg.err
	case tea.KeyPressMsg:
		if m.out.scroll(msg.String(), true) {
			return m, nil
		}
		switch msg.String() {
		case "r":
			if m.can && !m.running && m.c.deps.Validate != nil {
				m.askedRun = true
				return m, m.run()
			}
		case "enter", "right", "s":
			if !m.running {
				return m, goTo(flow.Summary)
			}
		}
	}
	return m, nil
}

// refresh lays the screen's text into its pager at the current size.
func (m *validateModel) refresh() {
	if m.c == nil {
		return
	}
	if m.out.vp.Width() == 0 {
		m.out = newPager()
	}
	// Title and blank above; the position line below.
	m.out.set(m.text(), m.c.width, m.c.bodyHeight()-3)
	if m.running {
		m.out.vp.GotoBottom() // the latest lines of a running test
	}
}

func (m validateModel) view() string {
	st := m.c.st
	m.refresh()
	return st.title.Render("Validate with a small collective test") + "\n\n" + m.out.view() + "\n" + st.dim.Render(truncate(m.out.position(), m.c.width))
}

func (m validateModel) text() string {
	st := m.c.st
	var b strings.Builder
	switch {
	case !m.checked:
		b.WriteString(st.dim.Render("looking for GPUs and a test backend…"))
		return b.String()
	case !m.can:
		b.WriteString(st.title.Render("A collective test cannot run here.") + "\n\n" + wrapText(m.why, m.c.width-2) + "\n\n")
		b.WriteString(st.dim.Render(wrapText(recheckedSentence(m.results)+" Run `ncclwiz test` on a machine with GPUs and PyTorch (or nccl-tests) to prove NCCL end to end.", m.c.width-2)) + "\n")
		return b.String()
	case !m.askedRun:
		b.WriteString(wrapText("This launches NCCL on the GPUs of this machine: one GPU, all GPUs, shared memory only and network only, each checked for correct results and bandwidth. It takes about a minute and changes nothing.", m.c.width-2) + "\n\n")
		b.WriteString(st.key.Render("r") + " run it   " + st.key.Render("enter") + " skip to the summary\n")
		return b.String()
	}
	for _, l := range m.lines {
		b.WriteString(wrapText(textsafe.Clean(l), m.c.width-1) + "\n")
	}
	if m.running {
		b.WriteString("\n" + st.dim.Render("running…"))
		return b.String()
	}
	b.WriteString("\n")
	switch {
	case m.err != nil:
		b.WriteString(st.mark(checks.Error) + " " + wrapText(textsafe.Clean(m.err.Error()), m.c.width-3) + "\n")
	case m.result != nil && m.result.Pass:
		b.WriteString(st.mark(checks.OK) + " " + st.ok.Render(textsafe.Clean(m.result.Verdict)) + "\n")
	case m.result != nil:
		b.WriteString(st.mark(checks.Error) + " " + st.err.Render(textsafe.Clean(m.result.Verdict)) + "\n")
	}
	return b.String()
}

func (m validateModel) keyMap() keyMap {
	if m.running {
		return keyMap{}
	}
	var k keyMap
	if m.can {
		k.Short = append(k.Short, bind("r", "run test", "r"))
	}
	k.Short = append(k.Short, bind("enter", "summary", "enter"))
	if m.out.scrolls() {
		k.Short = append(k.Short, m.c.list.Scroll)
	}
	return k
}

// recheckedSentence says what re-running the checks verified: only fixes
// that were applied and proven by it (advice, or a fix nothing here can
// judge, is said to be unproven, never checked).
func recheckedSentence(results []FixResult) string {
	var ok, bad, unproven []string
	for _, r := range results {
		switch sev, _ := verdict(r); {
		case r.Err != nil:
			continue
		case sev == checks.OK:
			ok = append(ok, r.ID)
		case sev == checks.Error:
			bad = append(bad, r.ID)
		default:
			unproven = append(unproven, r.ID)
		}
	}
	var out []string
	switch len(ok) {
	case 0:
	case 1:
		out = append(out, "The fix applied ("+ok[0]+") was checked by re-running its checks.")
	default:
		out = append(out, "The fixes applied ("+strings.Join(ok, ", ")+") were checked by re-running their checks.")
	}
	if len(bad) > 0 {
		out = append(out, "The re-check still reports what "+strings.Join(bad, ", ")+" should have fixed.")
	}
	if len(unproven) > 0 {
		out = append(out, strings.Join(unproven, ", ")+" was done, but no check here can prove it.")
	}
	if len(out) == 0 {
		return "No fix was applied, so there was nothing to verify."
	}
	return strings.Join(out, " ")
}
