package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/steps/flow"
)

type hangPhase int

const (
	hangFinding    hangPhase = iota // listing the jobs
	hangPicking                     // several jobs: the user picks one
	hangInspecting                  // sampling the chosen job
	hangDone                        // the verdict is in the pager
	hangFailed                      // nothing to inspect, or it failed
)

// hangModel is "My job is hanging": find the job (pick one when there are
// several), inspect it read-only in a tea.Cmd, show the verdict.
type hangModel struct {
	c      *common
	phase  hangPhase
	run    int
	cancel context.CancelFunc
	jobs   []HangJob
	cursor int
	// job is the job being (or last) inspected.
	job    HangJob
	doing  string
	report *HangReport
	// raw shows RAS's reply as NCCL wrote it.
	raw bool
	err string
	out pager
}

func newHangModel(c *common) hangModel { return hangModel{c: c, out: newPager()} }

// begin lists the jobs afresh (entering from Start).
func (m *hangModel) begin() tea.Cmd {
	m.stop()
	m.jobs, m.report, m.err, m.cursor = nil, nil, "", 0
	if m.c.deps.HangJobs == nil || m.c.deps.InspectHang == nil {
		m.phase, m.err = hangFailed, "The hang inspection is not available in this build; run `ncclwiz hang`."
		return nil
	}
	m.phase, m.doing = hangFinding, "looking for distributed jobs on this machine"
	ctx := m.newRun()
	list := m.c.deps.HangJobs
	return startWork("hang", m.run, func(func(string)) (any, error) { return list(ctx) })
}

// inspect starts the inspection of job j.
func (m *hangModel) inspect(j HangJob) tea.Cmd {
	m.job, m.report, m.err = j, nil, ""
	m.phase, m.doing = hangInspecting, fmt.Sprintf("inspecting job %d (%s)", j.ID, units.Count(j.Ranks, "rank"))
	ctx := m.newRun()
	insp := m.c.deps.InspectHang
	return startWork("hang", m.run, func(progress func(string)) (any, error) { return insp(ctx, j.ID, progress) })
}

// newRun cancels the previous run and starts a new one.
func (m *hangModel) newRun() context.Context {
	m.stop()
	m.run++
	ctx, cancel := context.WithCancel(m.c.ctx)
	m.cancel = cancel
	return ctx
}

// stop cancels what is running (Esc, leaving the screen).
func (m *hangModel) stop() {
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
	}
}

func (m hangModel) busy() bool { return m.phase == hangFinding || m.phase == hangInspecting }

// work takes a background run's message.
func (m hangModel) work(w workMsg) (hangModel, tea.Cmd) {
	if w.run != m.run || !m.busy() {
		return m, w.next() // a run the user left
	}
	if !w.done {
		if w.line != "" {
			m.doing = w.line
		}
		return m, w.next()
	}
	m.stop()
	if w.err != nil {
		m.phase, m.err = hangFailed, w.err.Error()
		return m, nil
	}
	switch v := w.val.(type) {
	case []HangJob:
		m.jobs = v
		switch len(v) {
		case 0:
			m.phase, m.err = hangFailed, "No distributed job runs on this machine: no process has RANK, LOCAL_RANK or an MPI rank in its environment."
		case 1:
			return m, m.inspect(v[0])
		default:
			m.phase = hangPicking
		}
	case HangReport:
		m.report, m.phase = &v, hangDone
		m.refresh()
	}
	return m, nil
}

func (m hangModel) update(msg tea.Msg) (hangModel, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return m, nil
	}
	s := k.String()
	switch m.phase {
	case hangFinding, hangInspecting:
		if s == "esc" {
			m.stop()
			if m.phase == hangInspecting && len(m.jobs) > 1 {
				m.phase = hangPicking
				return m, nil
			}
			m.phase = hangFailed
			return m, goTo(flow.Start)
		}
	case hangPicking:
		switch s {
		case "up", "k":
			m.cursor = max(m.cursor-1, 0)
		case "down", "j":
			m.cursor = min(m.cursor+1, len(m.jobs)-1)
		case "enter", "right", "l":
			return m, m.inspect(m.jobs[m.cursor])
		case "esc", "left", "h":
			return m, goTo(flow.Start)
		}
	case hangDone:
		if m.out.scroll(s, true) {
			return m, nil
		}
		switch s {
		case "g":
			if m.report.Guide != "" {
				id := m.report.Guide
				return m, func() tea.Msg { return openGuideMsg{id: id, back: flow.Hang} }
			}
		case "r":
			return m, m.inspect(m.job)
		case "w":
			if m.report.HasRaw {
				m.raw = !m.raw
				m.refresh()
			}
		case "esc", "left", "h":
			if len(m.jobs) > 1 {
				m.phase = hangPicking
				return m, nil
			}
			return m, goTo(flow.Start)
		}
	case hangFailed:
		switch s {
		case "r":
			return m, m.begin()
		case "esc", "left", "h":
			return m, goTo(flow.Start)
		}
	}
	return m, nil
}

// refresh renders the report into the pager at the current size.
func (m *hangModel) refresh() {
	if m.report == nil || m.report.Render == nil {
		return
	}
	// Title, blank and the verdict above; a position line below.
	body := wrapText(textsafe.Clean(m.report.Summary), m.c.width-1) + "\n\n" + m.report.Render(m.c.width-1, m.raw)
	m.out.set(body, m.c.width, m.c.bodyHeight()-4)
}

// headline is the verdict in one line.
func (r HangReport) headline() string {
	switch r.Verdict {
	case "suspect":
		var rs []string
		for _, n := range r.Suspects {
			rs = append(rs, fmt.Sprint(n))
		}
		return "Suspect: rank " + strings.Join(rs, ", ")
	case "stuck":
		return "Stuck: every rank here waits the same way"
	case "no_hang":
		return "No hang: the job makes progress"
	case "ended":
		return "The job ended during the sample"
	case "busy":
		return "No hang proven: the ranks compute but wrote nothing"
	}
	return textsafe.Clean(r.Verdict)
}

func (m hangModel) view() string {
	st := m.c.st
	var b strings.Builder
	b.WriteString(st.title.Render("My job is hanging") + "\n\n")
	switch m.phase {
	case hangFinding, hangInspecting:
		b.WriteString(m.c.spin + " " + textsafe.Clean(m.doing) + "…\n\n")
		b.WriteString(st.dim.Render(wrapText("Read-only: ncclwiz looks at the ranks (/proc, NVML), NCCL's RAS port and PyTorch's flight-recorder dumps; it signals and attaches to nothing. Esc stops.", m.c.width-2)))
	case hangPicking:
		b.WriteString(wrapText(fmt.Sprintf("%d distributed jobs run on this machine. Which one hangs?", len(m.jobs)), m.c.width-2) + "\n\n")
		top := max(m.cursor-(m.c.bodyHeight()-6)+1, 0)
		for i := top; i < len(m.jobs) && i < top+m.c.bodyHeight()-5; i++ {
			j := m.jobs[i]
			cur := "  "
			line := fmt.Sprintf("%-8d %s, running %s  %s", j.ID, units.Count(j.Ranks, "rank"), j.Age.Round(time.Second), textsafe.Clean(j.Command))
			if i == m.cursor {
				cur = st.sel.Render(st.m.cursor) + " "
				line = st.sel.Render(line)
			}
			b.WriteString(truncate(cur+line, m.c.width) + "\n")
		}
	case hangFailed:
		b.WriteString(wrapText(textsafe.Clean(m.err), m.c.width-2) + "\n")
	case hangDone:
		r := m.report
		line := r.headline()
		if r.Confidence != "" {
			line += " (" + r.Confidence + " confidence)"
		}
		if r.Verdict != "suspect" && r.Verdict != "stuck" {
			line = st.ok.Render(line)
		} else {
			line = st.warn.Render(line)
		}
		b.WriteString(truncate(line, m.c.width) + "\n")
		b.WriteString(m.out.view() + "\n")
		b.WriteString(st.dim.Render(truncate(m.out.position(), m.c.width)))
	}
	return b.String()
}

func (m hangModel) keyMap() keyMap {
	back := bind("esc", "back", "esc", "left", "h")
	switch m.phase {
	case hangPicking:
		return keyMap{Short: []key.Binding{m.c.list.Move("select"), bind("enter", "inspect", "enter", "right", "l"), back}}
	case hangDone:
		var k keyMap
		if m.report.Guide != "" {
			k.Short = append(k.Short, bind("g", "guide", "g"))
		}
		if m.out.scrolls() {
			k.Short = append(k.Short, bind("↑/↓/pgdn", "scroll", "up", "down", "pgup", "pgdown"))
		}
		if m.report.HasRaw {
			k.Short = append(k.Short, bind("w", "RAS raw", "w"))
		}
		k.Short = append(k.Short, bind("r", "again", "r"), back)
		return k
	case hangFailed:
		return keyMap{Short: []key.Binding{bind("r", "look again", "r"), back}}
	}
	return keyMap{Short: []key.Binding{bind("esc", "stop", "esc")}}
}
