package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

// MaxPaste is the most pasted log text the wizard explains. A bigger paste
// is refused with a message: the whole text is held in memory (bubbletea
// collects it before delivering it), and a log that size is better saved to
// a file, which the explainer streams.
const MaxPaste = 8 << 20

type logDoneMsg struct {
	run int
	res LogResult
	err error
}

// logModel asks for a log file — or takes the log's text pasted — and
// shows the explainer's report as `ncclwiz explain` prints it.
type logModel struct {
	c       *common
	input   textinput.Model
	running bool
	// run numbers the explanations, so a late answer to an earlier one is
	// dropped.
	run int
	// source names what is (or was) explained: the path typed, or
	// "pasted text (N lines)".
	source string
	result *LogResult
	err    error
	// guide indexes guideIDs(): the guide g opens (↑/↓ choose it).
	guide int
	out   pager
	// choices are the names Tab found when several continue the path.
	choices []string
}

// completedMsg is Tab's completion of the field's value from.
type completedMsg struct {
	from, value string
	choices     []string
}

func newLogModel(c *common) logModel {
	in := textinput.New()
	in.Prompt = "log file: "
	in.Placeholder = "path to the job's output (train.log, rank0.log.gz), or paste the log"
	m := logModel{c: c, input: in, out: newPager()}
	m.refresh()
	return m
}

func (m *logModel) focus() tea.Cmd {
	if m.result != nil || m.running || m.err != nil {
		return nil
	}
	return m.input.Focus()
}

func (m logModel) update(msg tea.Msg) (logModel, tea.Cmd) {
	switch msg := msg.(type) {
	case logDoneMsg:
		if msg.run != m.run {
			return m, nil
		}
		m.running = false
		m.result, m.err, m.guide = &msg.res, msg.err, 0
		if msg.err != nil {
			m.result = nil
		}
		m.refresh()
		return m, nil
	case completedMsg:
		if m.input.Focused() && m.input.Value() == msg.from {
			m.input.SetValue(msg.value)
			m.input.CursorEnd()
			m.choices = msg.choices
		}
		return m, nil
	case tea.PasteMsg:
		return m.paste(msg.Content)
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	if m.input.Focused() {
		// Cursor blinks and the like.
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m logModel) key(msg tea.KeyPressMsg) (logModel, tea.Cmd) {
	if m.input.Focused() {
		m.choices = nil
		switch msg.String() {
		case "tab":
			// Complete the path, as a shell does (reads directories: a
			// command).
			complete, from := m.c.deps.CompletePath, m.input.Value()
			if complete == nil {
				return m, nil
			}
			return m, func() tea.Msg {
				v, cs := complete(from)
				return completedMsg{from: from, value: v, choices: cs}
			}
		case "enter":
			path := strings.TrimSpace(m.input.Value())
			if path == "" || m.c.deps.ExplainLog == nil {
				return m, nil
			}
			explainLog := m.c.deps.ExplainLog
			return m.start(textsafe.Sanitize(path), func(c *common) (LogResult, error) { return explainLog(c.ctx, path) })
		case "esc":
			m.input.Blur()
			return m, goTo(flow.Start)
		}
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		return m, cmd
	}
	if m.running {
		return m, nil
	}
	// Up and down choose the guide (as they chose the diagnosis before the
	// report was drawn whole); the page keys scroll the report.
	if m.result != nil && m.out.scroll(msg.String(), false) {
		return m, nil
	}
	switch msg.String() {
	case "g", "enter":
		if ids := m.guideIDs(); m.guide < len(ids) {
			id := ids[m.guide]
			return m, func() tea.Msg { return openGuideMsg{id: id, back: flow.Log} }
		}
	case "down", "j":
		if m.guide < len(m.guideIDs())-1 {
			m.guide++
		}
	case "up", "k":
		if m.guide > 0 {
			m.guide--
		}
	case "o":
		m.result, m.err, m.source = nil, nil, ""
		m.refresh()
		return m, m.input.Focus()
	case "d":
		return m, goTo(flow.Detect)
	case "esc":
		return m, goTo(flow.Start)
	}
	return m, nil
}

// paste takes a bracketed paste: a path goes into the field like typed
// text; anything else (several lines, a log line) is the log itself.
func (m logModel) paste(text string) (logModel, tea.Cmd) {
	if m.running || m.c.deps.ExplainLog == nil {
		return m, nil
	}
	// Terminals send the pasted newlines as carriage returns.
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	if looksLikePath(text) {
		if !m.input.Focused() {
			m.result, m.err, m.source = nil, nil, ""
			m.input.SetValue("")
			m.refresh()
		}
		cmd := m.input.Focus()
		var c2 tea.Cmd
		m.input, c2 = m.input.Update(tea.PasteMsg{Content: strings.TrimSpace(text)})
		return m, tea.Batch(cmd, c2)
	}
	if len(text) > MaxPaste {
		m.input.Blur()
		m.result, m.source = nil, ""
		m.err = fmt.Errorf("the pasted text is %s; the wizard explains at most %s of pasted log. Save it to a file and give its path here, or run `ncclwiz explain FILE`",
			units.Bytes(uint64(len(text))), units.Bytes(MaxPaste))
		m.refresh()
		return m, nil
	}
	if m.c.deps.ExplainText == nil {
		return m, status("pasting a log is not available in this build; give the path of a file")
	}
	lines := strings.Count(text, "\n")
	if !strings.HasSuffix(text, "\n") {
		lines++
	}
	explainText := m.c.deps.ExplainText
	return m.start("pasted text ("+units.Count(lines, "line")+")", func(c *common) (LogResult, error) { return explainText(c.ctx, text) })
}

// start explains in a tea.Cmd: a big log or a slow disk never holds up
// the screen.
func (m logModel) start(source string, explain func(*common) (LogResult, error)) (logModel, tea.Cmd) {
	m.input.Blur()
	m.running, m.err, m.result, m.source = true, nil, nil, source
	m.run++
	run, c := m.run, m.c
	return m, func() tea.Msg {
		r, err := explain(c)
		return logDoneMsg{run: run, res: r, err: err}
	}
}

// looksLikePath reports whether pasted text is a file name rather than log
// text: one line, no longer than PATH_MAX, and without what log lines have
// and paths rarely do (": " after a prefix, brackets, spaces outside an
// explicit path).
func looksLikePath(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 4096 || strings.ContainsAny(s, "\n\x00") {
		return false
	}
	// A dragged-in file arrives quoted ('/my runs/train.log') or with its
	// spaces escaped (/my\ runs/train.log).
	if q := s[0]; (q == '\'' || q == '"') && len(s) > 2 && s[len(s)-1] == q && !strings.ContainsRune(s[1:len(s)-1], rune(q)) {
		return true
	}
	if strings.Contains(s, "\\ ") && !strings.Contains(s, ": ") {
		return true
	}
	if strings.Contains(s, ": ") || strings.HasPrefix(s, "[") {
		return false
	}
	if !strings.ContainsAny(s, " \t") {
		return true
	}
	for _, p := range []string{"/", "~/", "./", "../"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// guideIDs are the guides of the diagnoses, root cause first, each once.
func (m logModel) guideIDs() []string {
	if m.result == nil {
		return nil
	}
	var ids []string
	add := func(root bool) {
		for _, d := range m.result.Diagnoses {
			if d.RootCause == root && d.Guide != "" && !slices.Contains(ids, d.Guide) {
				ids = append(ids, d.Guide)
			}
		}
	}
	add(true)
	add(false)
	return ids
}

// refresh lays the report into the pager at the current size: the title,
// the source line above and the guide and position lines below stay put.
func (m *logModel) refresh() {
	m.input.SetWidth(max(m.c.width-len(m.input.Prompt)-1, 10))
	r := m.result
	if r == nil {
		m.out.set("", m.c.width, 1)
		return
	}
	w := max(m.c.width-1, 20)
	body := wrapText(textsafe.Clean(r.Summary), w)
	if r.Render != nil {
		body = r.Render(w)
	}
	if r.Nodes > 1 {
		body += "\n\n" + wrapText(fmt.Sprintf("This job ran on %d nodes: most multi-node failures are a difference between nodes. "+
			"`ncclwiz cluster check --hosts NODE,NODE…` (or --slurm) compares them; the wizard's Findings offers it (n) when run in the job's environment.", r.Nodes), w)
	}
	m.out.set(body, m.c.width, m.c.bodyHeight()-5)
}

func (m logModel) view() string {
	st := m.c.st
	var b strings.Builder
	b.WriteString(st.title.Render("Explain a failing log") + "\n\n")
	if m.c.deps.ExplainLog == nil {
		return b.String() + "The log explainer is not available in this build."
	}
	if m.input.Focused() || (m.result == nil && !m.running && m.err == nil) {
		b.WriteString(m.input.View() + "\n")
		if len(m.choices) > 0 {
			b.WriteString(st.hint.Render(wrapText(strings.Join(m.choices[:min(len(m.choices), 12)], "  ")+map[bool]string{true: "  …", false: ""}[len(m.choices) > 12], m.c.width-2)) + "\n")
		}
		b.WriteString("\n")
		b.WriteString(st.dim.Render(wrapText("Type the path of the failing job's output (Tab completes it; quotes, a glob such as logs/*.log, or a directory such as torchrun's --log-dir work too), or paste the log itself (several lines; up to "+units.Bytes(MaxPaste)+"). "+
			"Tip: save the output with `torchrun … 2>&1 | tee train.log`.", m.c.width-2)))
		return b.String()
	}
	if m.running {
		return b.String() + st.dim.Render(wrapText("reading "+m.source+"…", m.c.width-2))
	}
	if m.err != nil {
		msg := textsafe.Clean(m.err.Error())
		if m.source != "" && !strings.Contains(msg, m.source) {
			msg = m.source + ": " + msg
		}
		// Paths are longer than words: they may break after a slash, and
		// anything longer than the line is broken too, never cut.
		return b.String() + st.err.Render(ansi.Wrap(msg, m.c.width-2, "/")) + "\n\n" + st.dim.Render("press o to open another file or paste again")
	}
	b.WriteString(st.dim.Render(truncate(m.source, m.c.width)) + "\n")
	b.WriteString(m.out.view() + "\n")
	if ids := m.guideIDs(); len(ids) > 0 {
		line := "g opens the guide " + ids[m.guide]
		if len(ids) > 1 {
			line += fmt.Sprintf(" (%d of %d; ↑/↓ choose)", m.guide+1, len(ids))
		}
		b.WriteString(st.hint.Render(truncate(line, m.c.width)) + "\n")
	}
	b.WriteString(st.dim.Render(truncate(m.out.position(), m.c.width)))
	return b.String()
}

func (m logModel) keyMap() keyMap {
	if m.input.Focused() {
		return keyMap{Short: []key.Binding{bind("enter", "explain", "enter"), bind("tab", "complete", "tab"), bind("paste", "a path or the log"), bind("esc", "back", "esc")}}
	}
	if m.running {
		return keyMap{}
	}
	var k keyMap
	if ids := m.guideIDs(); len(ids) > 0 {
		k.Short = append(k.Short, bind("g", "guide", "g"))
		if len(ids) > 1 {
			k.Short = append(k.Short, bind("↑/↓", "pick", "up", "down"))
		}
	}
	if m.out.scrolls() {
		k.Short = append(k.Short, bind("pgdn", "scroll", "pgup", "pgdown"))
	}
	// Short words: all of it fits in 80 columns with the root's "q quit".
	k.Short = append(k.Short, bind("o", "other log", "o"), bind("d", "check", "d"), bind("esc", "back", "esc"))
	return k
}
