package tui

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
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
	path    string
	replace bool
	err     error
}

type summaryModel struct {
	c         *common
	before    []checks.Finding
	now       []checks.Finding
	applied   []FixResult
	validated *ValidationResult
	fixIDs    []string
	// possible are the fixes of the current plan that can run here (nil
	// while it is being made): only they are recommended for what is left.
	possible map[string]bool
	// chosen are the fixes chosen or applied; gen the check run shown, and
	// snippetGen the one the env snippet was made for.
	chosen          []string
	gen, snippetGen int
	input           textinput.Model
	out             pager
	exporting       bool
	// replacing is the path of an existing file the export would replace:
	// the user is asked first (y replaces, n goes back to the name).
	replacing string
	exported  string
	snippet   string
	showEnv   bool
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
	m.possible = nil
	if plan != nil {
		m.possible = map[string]bool{}
		for _, f := range plan {
			if f.Impossible == "" {
				m.possible[f.ID] = true
			}
		}
	}
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
		var alt interface{ Alternative() string }
		switch {
		case msg.err != nil && errors.Is(msg.err, fs.ErrExist) && !msg.replace:
			// Never replaced without asking (issue 25 item 7).
			m.replacing = msg.path
			return m, nil
		case msg.err != nil && errors.As(msg.err, &alt) && alt.Alternative() != "":
			// Unwritable here: the message names the directory, and the
			// field offers a place that takes it.
			m.exporting = true
			m.input.SetValue(alt.Alternative())
			m.input.CursorEnd()
			return m, tea.Batch(m.input.Focus(), status("export failed: "+msg.err.Error()+" (enter writes there)"))
		case msg.err != nil:
			return m, status("export failed: " + msg.err.Error())
		}
		m.exported = msg.path
		if m.c.deps.Host != nil && m.c.deps.Host.Simulated {
			return m, status("wrote " + msg.path + ": a practice script (read it; it runs none of its steps)")
		}
		return m, status("wrote " + msg.path + " (dry run by default; run it with --apply)")
	case tea.PasteMsg:
		if m.exporting {
			var cmd tea.Cmd
			m.input, cmd = m.input.Update(msg)
			return m, cmd
		}
	case tea.KeyPressMsg:
		if m.replacing != "" {
			switch msg.String() {
			case "y":
				path := m.replacing
				m.replacing = ""
				return m, m.export(path, true)
			case "n", "N", "esc":
				m.replacing, m.exporting = "", true
				return m, m.input.Focus()
			}
			return m, nil
		}
		if m.exporting {
			switch msg.String() {
			case "enter":
				path := strings.TrimSpace(m.input.Value())
				m.input.Blur()
				if path == "" || m.c.deps.ExportScript == nil {
					m.exporting = false
					return m, nil
				}
				return m, m.export(path, false)
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

// export writes the script in a tea.Cmd.
func (m summaryModel) export(path string, replace bool) tea.Cmd {
	ids, problems, export := m.fixIDs, append(slices.Clone(m.before), m.now...), m.c.deps.ExportScript
	return func() tea.Msg {
		return exportDoneMsg{path: path, replace: replace, err: export(path, ids, problems, replace)}
	}
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
	switch {
	case m.replacing != "":
		bottom = truncate(st.warn.Render(textsafe.Sanitize(m.replacing)+" already exists.")+" "+st.key.Render("y")+" replace it  "+st.key.Render("n")+" choose another name", m.c.width)
	case m.exporting:
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
	found := fmt.Sprintf("found: %s at the start", units.Count(len(m.before), "problem"))
	if len(m.before) > 0 {
		found += " — " + textsafe.Clean(m.before[0].Title)
	}
	b.WriteString(st.m.bullet + " " + textwrap.String(found, m.c.width-2, "  ") + "\n")
	if len(m.applied) == 0 {
		b.WriteString(st.m.bullet + " done: no fixes applied\n")
	}
	for _, r := range m.applied {
		sev, v := verdict(r)
		mark := st.mark(sev)
		b.WriteString(fmt.Sprintf("%s done: %s %s\n    %s\n", st.m.bullet, mark, r.ID, textwrap.String(v, m.c.width-4, "    ")))
		if n := len(r.Skipped); n > 0 {
			b.WriteString("    " + textwrap.String(fmt.Sprintf("left alone: %s — %s", units.Count(n, "item"), textsafe.Clean(r.Skipped[0])), m.c.width-4, "    ") + "\n")
		}
	}
	switch {
	case m.validated == nil && m.appliedOK() == 0:
		b.WriteString(st.m.bullet + " " + textwrap.String("verified: nothing — no fix was applied and no collective test ran", m.c.width-2, "  ") + "\n")
	case m.validated == nil && m.provenOK() == 0:
		b.WriteString(st.m.bullet + " " + textwrap.String("verified: nothing — no check here could prove the fixes applied, and no collective test ran", m.c.width-2, "  ") + "\n")
	case m.validated == nil:
		b.WriteString(st.m.bullet + " " + textwrap.String("verified: "+units.Count(m.provenOK(), "applied fix", "applied fixes")+" re-checked above (no collective test)", m.c.width-2, "  ") + "\n")
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
			b.WriteString("    " + st.mark(f.Severity) + " " + textwrap.String(textsafe.Clean(f.Title), m.c.width-6, "      ") + "\n")
			if fixes := m.fixesHere(f); len(fixes) > 0 {
				b.WriteString(st.dim.Render("      "+textwrap.String("→ fix: "+strings.Join(fixes, ", ")+" ("+m.c.command("fix")+" shows each)", m.c.width-6, "        ")) + "\n")
			}
		}
	}
	if m.exported != "" {
		b.WriteString("\n" + st.ok.Render("exported "+textsafe.Sanitize(m.exported)) + "\n")
		next := "review it, then run: bash " + textsafe.Sanitize(m.exported) + " (a dry run), then with --apply"
		if m.c.deps.Host != nil && m.c.deps.Host.Simulated {
			// A practice script refuses --apply: it runs none of its steps.
			next = "a practice script: read it to see what the fixes would do on the simulated server; it runs none of them (and refuses --apply)"
		}
		b.WriteString(st.dim.Render(textwrap.String(next, m.c.width-2, "  ")) + "\n")
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
	if m.replacing != "" {
		return keyMap{Short: []key.Binding{bind("y", "replace", "y"), bind("n", "another name", "n", "esc")}}
	}
	if m.exporting {
		return keyMap{Short: []key.Binding{bind("enter", "write", "enter"), bind("esc", "cancel", "esc")}}
	}
	var k keyMap
	if m.c.deps.ExportScript != nil {
		k.Short = append(k.Short, bind("e", "export script", "e"))
	}
	// c only when there is (or may be) a snippet: not once it came back empty.
	if m.snippet != "" || (m.c.deps.EnvSnippet != nil && m.snippetGen != m.gen) {
		k.Short = append(k.Short, bind("c", "copy env", "c"))
	}
	k.Short = append(k.Short, recheckKey)
	if m.out.scrolls() {
		k.Short = append(k.Short, bind("pgup/pgdn", "scroll", "pgup", "pgdown"))
	}
	return k
}

// fixesHere are the fixes of a finding that can run here: those the plan
// holds as possible (all of them until the plan is made).
func (m summaryModel) fixesHere(f checks.Finding) []string {
	if m.possible == nil {
		return f.Fixes
	}
	var out []string
	for _, id := range f.Fixes {
		if m.possible[id] {
			out = append(out, id)
		}
	}
	return out
}

// provenOK counts the fixes their re-check (or own proof) verified.
func (m summaryModel) provenOK() int {
	n := 0
	for _, r := range m.applied {
		if proven(r) {
			n++
		}
	}
	return n
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
