package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/textwrap"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

type exportDoneMsg struct {
	path string
	err  error
}

type summaryModel struct {
	c         *common
	before    []checks.Finding
	now       []checks.Finding
	applied   []FixResult
	validated *ValidationResult
	fixIDs    []string
	// chosen are the fixes chosen or applied; gen the check run shown, and
	// snippetGen the one the env snippet was made for.
	chosen          []string
	gen, snippetGen int
	input           textinput.Model
	out             pager
	exporting       bool
	exported        string
	snippet         string
	showEnv         bool
	// copyWanted is set when c was pressed before the snippet was made:
	// it is copied as soon as it arrives.
	copyWanted bool
	// savedTo is where the snippet was last saved in full, saveErr why it
	// could not be.
	savedTo string
	saveErr error
}

func newSummaryModel(c *common) summaryModel {
	in := textinput.New()
	in.Prompt = "export to: "
	in.SetValue("ncclwiz-fix.sh")
	return summaryModel{c: c, input: in, out: newPager()}
}

func problemsOf(rs []checks.Result) []checks.Finding {
	var out []checks.Finding
	for _, f := range checks.Flatten(rs) {
		if f.Severity.IsProblem() {
			out = append(out, f)
		}
	}
	return out
}

// snippetMsg is the env snippet for the problems of check run gen.
type snippetMsg struct {
	gen     int
	snippet string
}

// load shows the state after check run gen; chosen are the fixes chosen or
// applied, plan the current plan (nil while it is being made). The env
// snippet reads the machine, so it comes back from a tea.Cmd.
func (m *summaryModel) load(s flow.State, gen int, before []checks.Result, applied []FixResult, v *ValidationResult, chosen []string, plan []FixView) tea.Cmd {
	m.before, m.now, m.applied, m.validated = problemsOf(before), s.Problems(), applied, v
	m.chosen, m.gen = chosen, gen
	m.setPlan(plan)
	var cmd tea.Cmd
	if snip := m.c.deps.EnvSnippet; snip != nil && m.snippetGen != gen {
		// A snippet for earlier findings is not shown for these.
		m.snippet, m.showEnv, m.savedTo, m.saveErr = "", false, "", nil
		// All the findings, as `ncclwiz env` reads them: a recommendation
		// may come with an informational finding, not only a problem.
		all := checks.Flatten(s.Results)
		cmd = func() tea.Msg { return snippetMsg{gen: gen, snippet: snip(all)} }
	}
	m.refresh()
	return cmd
}

// setPlan takes the current plan: without a choice, the script exports
// every fix of it that is possible here.
func (m *summaryModel) setPlan(plan []FixView) {
	m.fixIDs = m.chosen
	if len(m.fixIDs) == 0 {
		for _, f := range plan {
			if f.Impossible == "" {
				m.fixIDs = append(m.fixIDs, f.ID)
			}
		}
	}
}

func (m summaryModel) update(msg tea.Msg) (summaryModel, tea.Cmd) {
	m, cmd := m.handle(msg)
	m.refresh()
	return m, cmd
}

func (m summaryModel) handle(msg tea.Msg) (summaryModel, tea.Cmd) {
	switch msg := msg.(type) {
	case snippetMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		m.snippet, m.snippetGen = msg.snippet, msg.gen
		if m.copyWanted {
			m.copyWanted = false
			return m, m.copySnippet()
		}
		return m, nil
	case snippetSavedMsg:
		if msg.snippet != m.snippet {
			return m, nil // made for earlier findings
		}
		m.savedTo, m.saveErr = msg.path, msg.err
		if msg.err != nil {
			return m, status("env snippet sent with OSC 52; saving it to a file failed (see below)")
		}
		return m, status("env snippet sent with OSC 52 and saved to a file (path below)")
	case exportDoneMsg:
		m.exporting = false
		if msg.err != nil {
			return m, func() tea.Msg { return statusMsg("export failed: " + msg.err.Error()) }
		}
		m.exported = msg.path
		if m.c.deps.Host != nil && m.c.deps.Host.Simulated {
			return m, func() tea.Msg {
				return statusMsg("wrote " + msg.path + ": a practice script (read it; it refuses --apply)")
			}
		}
		return m, func() tea.Msg { return statusMsg("wrote " + msg.path + " (dry run by default; run it with --apply)") }
	case tea.PasteMsg:
		if m.exporting {
			var cmd tea.Cmd
			m.input, cmd = m.input.Update(msg)
			return m, cmd
		}
	case tea.KeyPressMsg:
		if m.exporting {
			switch msg.String() {
			case "enter":
				path := strings.TrimSpace(m.input.Value())
				m.input.Blur()
				if path == "" || m.c.deps.ExportScript == nil {
					m.exporting = false
					return m, nil
				}
				ids, problems, export := m.fixIDs, append(m.before, m.now...), m.c.deps.ExportScript
				return m, func() tea.Msg { return exportDoneMsg{path: path, err: export(path, ids, problems)} }
			case "esc":
				m.exporting = false
				m.input.Blur()
				return m, nil
			}
			var cmd tea.Cmd
			m.input, cmd = m.input.Update(msg)
			return m, cmd
		}
		if m.out.scroll(msg.String(), true) {
			return m, nil
		}
		switch msg.String() {
		case "e":
			if m.c.deps.ExportScript != nil {
				m.exporting = true
				return m, m.input.Focus()
			}
		case "c":
			switch {
			case m.snippet != "":
				return m, m.copySnippet()
			case m.c.deps.EnvSnippet != nil && m.snippetGen != m.gen:
				m.copyWanted = true
				return m, status("making the env snippet; it is copied when ready")
			default:
				return m, status("no environment change is recommended here, so there is no snippet to copy")
			}
		case "esc":
			return m, goTo(flow.Start)
		}
	}
	return m, nil
}

// snippetSavedMsg says where the env snippet was saved (or why not).
type snippetSavedMsg struct {
	snippet, path string
	err           error
}

// copySnippet shows the snippet, sends it to the clipboard with OSC 52 and
// saves it in full to a file: OSC 52 does not reach every terminal (tmux
// without set-clipboard, some SSH clients), a file always does.
func (m *summaryModel) copySnippet() tea.Cmd {
	m.showEnv = true
	snip, save := m.snippet, m.c.deps.SaveEnvSnippet
	if save == nil {
		return tea.Batch(tea.SetClipboard(snip), status("env snippet sent with OSC 52; it is shown below"))
	}
	return tea.Batch(tea.SetClipboard(snip), func() tea.Msg {
		path, err := save(snip)
		return snippetSavedMsg{snippet: snip, path: path, err: err}
	})
}

func (m summaryModel) view() string {
	st := m.c.st
	bottom := st.dim.Render(truncate(m.out.position(), m.c.width))
	if m.exporting {
		bottom = truncate(m.input.View(), m.c.width)
	}
	return st.title.Render("Summary") + "\n\n" + m.out.view() + "\n" + bottom
}

// refresh lays the summary into its pager: the title above and the
// position line (or the export prompt) below stay on screen.
func (m *summaryModel) refresh() {
	m.out.set(m.text(), m.c.width, m.c.bodyHeight()-3)
}

func (m summaryModel) text() string {
	st := m.c.st
	var b strings.Builder
	found := fmt.Sprintf("%s found: %s at the start", st.m.bullet, units.Count(len(m.before), "problem"))
	if len(m.before) > 0 {
		found += " — " + textsafe.Clean(m.before[0].Title)
	}
	b.WriteString(truncate(found, m.c.width) + "\n")
	if len(m.applied) == 0 {
		b.WriteString(st.m.bullet + " done: no fixes applied\n")
	}
	for _, r := range m.applied {
		sev, v := verdict(r)
		mark := st.mark(sev)
		b.WriteString(fmt.Sprintf("%s done: %s %s\n    %s\n", st.m.bullet, mark, r.ID, textwrap.String(v, m.c.width-4, "    ")))
		if n := len(r.Skipped); n > 0 {
			b.WriteString(truncate(fmt.Sprintf("    left alone: %s — %s", units.Count(n, "item"), textsafe.Clean(r.Skipped[0])), m.c.width) + "\n")
		}
	}
	switch {
	case m.validated == nil && m.appliedOK() == 0:
		b.WriteString(st.m.bullet + " " + textwrap.String("verified: nothing — no fix was applied and no collective test ran", m.c.width-2, "  ") + "\n")
	case m.validated == nil:
		b.WriteString(st.m.bullet + " " + textwrap.String("verified: "+units.Count(m.appliedOK(), "applied fix", "applied fixes")+" re-checked above (no collective test)", m.c.width-2, "  ") + "\n")
	case m.validated.Pass:
		b.WriteString(st.m.bullet + " verified: " + st.ok.Render(textsafe.Clean(m.validated.Verdict)) + "\n")
	default:
		b.WriteString(st.m.bullet + " verified: " + st.err.Render(textsafe.Clean(m.validated.Verdict)) + "\n")
	}
	if len(m.now) == 0 {
		b.WriteString(st.m.bullet + " left: " + st.ok.Render("nothing — no warnings or errors remain") + "\n")
	} else {
		fmt.Fprintf(&b, "%s left: %s\n", st.m.bullet, units.Count(len(m.now), "problem"))
		for _, f := range m.now {
			b.WriteString(truncate("    "+st.mark(f.Severity)+" "+textsafe.Clean(f.Title), m.c.width) + "\n")
			if len(f.Fixes) > 0 {
				b.WriteString(st.dim.Render(truncate("      → fix: "+strings.Join(f.Fixes, ", ")+" (ncclwiz fix shows each)", m.c.width)) + "\n")
			}
		}
	}
	if m.exported != "" {
		b.WriteString("\n" + st.ok.Render("exported "+textsafe.Sanitize(m.exported)) + "\n")
		b.WriteString(st.dim.Render(textwrap.String("review it, then run: bash "+textsafe.Sanitize(m.exported)+" --apply", m.c.width-2, "  ")) + "\n")
	}
	if m.showEnv && m.snippet != "" {
		// OSC 52 may not reach the user's clipboard (SSH, tmux without
		// set-clipboard): say where the whole snippet is.
		head := "environment for the next run (the clipboard copy used OSC 52, which SSH or tmux may drop):"
		switch {
		case m.savedTo != "":
			head = "environment for the next run, saved in full to " + textsafe.Sanitize(m.savedTo) + " (the clipboard copy used OSC 52, which SSH or tmux may drop):"
		case m.saveErr != nil:
			head = "environment for the next run (saving it to a file failed: " + textsafe.Clean(m.saveErr.Error()) + "):"
		}
		b.WriteString("\n" + st.dim.Render(textwrap.String(head, m.c.width-2, "  ")) + "\n")
		for _, l := range strings.Split(strings.TrimRight(m.snippet, "\n"), "\n") {
			b.WriteString("  " + st.hint.Render(truncate(textsafe.Clean(l), m.c.width-2)) + "\n")
		}
	}
	return b.String()
}

func (m summaryModel) keyMap() keyMap {
	if m.exporting {
		return keyMap{Short: []key.Binding{bind("enter", "write", "enter"), bind("esc", "cancel", "esc")}}
	}
	var k keyMap
	if m.c.deps.ExportScript != nil {
		k.Short = append(k.Short, bind("e", "export fix script", "e"))
	}
	if m.snippet != "" || (m.c.deps.EnvSnippet != nil && m.snippetGen != m.gen) {
		k.Short = append(k.Short, bind("c", "copy env snippet", "c"))
	}
	k.Short = append(k.Short, recheckKey)
	if m.out.scrolls() {
		k.Short = append(k.Short, bind("pgup/pgdn", "scroll", "pgup", "pgdown"))
	}
	return k
}

// appliedOK counts the fixes applied without error.
func (m summaryModel) appliedOK() int {
	n := 0
	for _, r := range m.applied {
		if r.Err == nil {
			n++
		}
	}
	return n
}
