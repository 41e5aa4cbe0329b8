package guideui

import (
	"context"
	"errors"
	"io"
	"os"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/ncclwiz/ncclwiz/guides"
)

// RunOptions are the terminal of a standalone browser.
type RunOptions struct {
	In  *os.File // the terminal to read keys from
	Out io.Writer
	Env []string
	// NoColor forces the ASCII colour profile (NO_COLOR with any value,
	// --no-color, TERM=dumb; colorprofile alone only honours boolean
	// values).
	NoColor bool
}

// program is the standalone root: it owns the tea.View (alternate screen)
// and quits on ExitMsg or ctrl+c.
type program struct{ m Model }

func (p program) Init() tea.Cmd { return p.m.Init() }

func (p program) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case ExitMsg:
		return p, tea.Quit
	case tea.KeyPressMsg:
		if msg.String() == "ctrl+c" {
			return p, tea.Quit
		}
	}
	var cmd tea.Cmd
	p.m, cmd = p.m.Update(msg)
	return p, cmd
}

func (p program) View() tea.View {
	v := tea.NewView(p.m.View())
	v.AltScreen = true
	v.WindowTitle = "ncclwiz guides"
	return v
}

// Run shows the browser until the reader quits.
func Run(ctx context.Context, lib *guides.Library, opt Options, ro RunOptions) error {
	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithOutput(ro.Out), tea.WithEnvironment(ro.Env)}
	if ro.In != nil {
		popts = append(popts, tea.WithInput(ro.In))
	}
	if ro.NoColor {
		popts = append(popts, tea.WithColorProfile(colorprofile.Ascii))
	}
	_, err := tea.NewProgram(program{New(lib, opt)}, popts...).Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // interrupted by a signal: not an error for the reader
	}
	return err
}
