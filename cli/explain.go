package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/explain"
	"github.com/ncclwiz/ncclwiz/explain/render"
	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/tui"
)

type explainFlags struct {
	json      bool
	verbose   bool
	maxLine   int
	maxStream int64
}

func newExplainCmd(a *App) *cobra.Command {
	var f explainFlags
	cmd := &cobra.Command{
		Use:   "explain [FILE...|-]",
		Short: "Explain a failing job's log: the root cause, its evidence, the guide and the fixes",
		Long: `Reads the output of a failed torchrun / accelerate / deepspeed / mpirun job and
names the line that matters: the root cause first (with its confidence and
evidence lines, rank and host), then what merely followed from it, the
checks to run next and the fixes that apply. PyTorch watchdog timeouts are
decoded (hang or too slow), and NCCL_DEBUG=INFO output is summarised
(version, ranks, transports per peer, interfaces) even when nothing failed.

Pass one file, several files (one per rank or node; .gz is read directly),
or "-" / a pipe for stdin:
  torchrun ... 2>&1 | tee train.log;  ncclwiz explain train.log
  ncclwiz explain logs/rank*.log.gz

JSON (--json): {"schema": 1, "diagnoses": [{"id", "title", "confidence",
"root_cause", "not_nccl", "evidence": [{"file", "line", "text"}], "fields", "guide",
"checks", "fixes"}], "nccl_version", "summary"}, plus notes, first_error,
digest and inputs.
A named pipe (FIFO) or a device is read once, up to --max-stream bytes
(the report says when the rest was not read). Ctrl-C stops waiting for a
writer or for data.

Exit codes: 0 a diagnosis was made, 1 no NCCL failure found (a cause
outside NCCL, such as a Python exception, may still be named), 2 bad input
(missing, unreadable, empty or binary file), usage error or interrupted.`,
		RunE: func(cmd *cobra.Command, args []string) error { return runExplain(cmd, a, f, args) },
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print the versioned JSON report")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "show every evidence line, note and peer")
	fl.IntVar(&f.maxLine, "max-line", explain.DefaultMaxLine, "keep at most this many bytes of one line (longer lines are cut, not rejected)")
	fl.Int64Var(&f.maxStream, "max-stream", explain.DefaultStreamLimit, "read at most this many bytes of an input that is not a regular file (a FIFO, a device; not a pipe on stdin)")
	return cmd
}

func runExplain(cmd *cobra.Command, a *App, f explainFlags, args []string) error {
	if f.maxLine < 256 {
		return usageError{fmt.Errorf("--max-line must be at least 256 bytes")}
	}
	if f.maxStream < 1<<10 {
		return usageError{fmt.Errorf("--max-stream must be at least 1024 bytes")}
	}
	// Ctrl-C or SIGTERM ends the command while it waits for a FIFO's
	// writer, for data, or reads a stream that never ends.
	ctx, stop := signal.NotifyContext(cmdContext(cmd), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	inputs, err := explainInputs(ctx, a, args, f.maxStream)
	if err != nil {
		return interrupted(ctx, err)
	}
	if !envSet(a.Env, "GOMEMLIMIT") {
		// The explainer's live heap is a few MiB whatever the log (fixed
		// buffers); without a limit the collector lets garbage double it.
		// This keeps peak RSS, binary included, under 50 MB (README).
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(explainMemLimit))
	}
	rep, err := explain.Analyze(ctx, inputs, explain.Options{Lang: a.Lang, MaxLineBytes: f.maxLine})
	if err != nil {
		return interrupted(ctx, fmt.Errorf("explain: %w", err))
	}
	if ctx.Err() != nil {
		return interrupted(ctx, nil)
	}
	if f.json {
		if err := render.WriteJSON(a.Stdout, rep); err != nil {
			return err
		}
	} else {
		out := a.Out()
		w := out.Writer()
		if termio.NoColor(a.Env, a.NoColor) {
			// No styling at all, bold included.
			w = &colorprofile.Writer{Forward: a.Stdout, Profile: colorprofile.NoTTY}
		}
		if err := render.WritePlain(w, rep, render.PlainOptions{Unicode: out.Unicode, Verbose: f.verbose, Width: out.Width, CutLines: out.TTY && !f.verbose}); err != nil {
			return err
		}
	}
	if msg := badInput(rep); msg != "" {
		return errors.New("explain: " + msg) // printed by Execute; exit 2
	}
	// A cause outside NCCL with no NCCL line after it is still "no NCCL
	// failure found".
	if len(rep.Diagnoses) == 0 || (len(rep.Diagnoses) == 1 && rep.Diagnoses[0].NotNCCL) {
		return ExitError{Code: 1}
	}
	return nil
}

// explainMemLimit is the Go memory limit while explaining (a soft limit:
// the collector works harder near it, it never fails an allocation). The
// live heap is about 11 MiB (chunk buffers, guides, the message
// catalogue's 1 MiB); at 20 MiB the collector ran 10x as often and cost a
// third more CPU. At 24 MiB the catalogue's megabyte left the collector
// running 1.5x as often on INFO-heavy logs (a third more CPU); at 26 MiB
// the CPU is what it was before the catalogue and peak RSS is 46-47 MB on
// a 128 MB log (unlimited: 47-50 MB).
const explainMemLimit = 26 << 20

func envSet(env []string, name string) bool {
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && k == name {
			return true
		}
	}
	return false
}

// interrupted turns the end of an interrupted command into its message.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errors.New("explain: interrupted; nothing was explained")
	}
	var ie *explain.InputError
	if errors.As(err, &ie) {
		return usageError{ie}
	}
	return err
}

// badInput explains why nothing could be read, or "" when the input was a
// log (even one without failures).
func badInput(r *explain.Report) string {
	if len(r.Diagnoses) > 0 {
		return ""
	}
	var empty, binary, broken []string
	for _, in := range r.Inputs {
		switch {
		case in.Error != "" && in.Lines == 0:
			broken = append(broken, in.Name+" ("+in.Error+")")
		case in.Empty:
			empty = append(empty, in.Name)
		case in.Binary:
			binary = append(binary, in.Name)
		}
	}
	switch n := len(r.Inputs); {
	case n > 0 && len(empty) == n:
		return "the input is empty (" + strings.Join(empty, ", ") + "): nothing to explain. Did the job write its output elsewhere (stderr: use 2>&1)?"
	case n > 0 && len(binary)+len(empty) == n && len(binary) > 0:
		return strings.Join(binary, ", ") + " is not a text log (binary data); pass the job's console output"
	case len(broken) > 0:
		return "could not read " + strings.Join(broken, ", ")
	}
	return ""
}

// explainInputs turns the arguments into inputs, opening each file once
// (a FIFO's content is read by the same open that checks it), so a typo
// gets a clear message and exit code 2 before any reading.
func explainInputs(ctx context.Context, a *App, args []string, maxStream int64) ([]explain.Input, error) {
	if len(args) == 0 {
		if a.StdinTTY() {
			return nil, usageError{errors.New("no log given. Pass the failing job's output as a file (ncclwiz explain train.log), several files for several ranks (ncclwiz explain rank*.log), or pipe it in (torchrun ... 2>&1 | ncclwiz explain -)")}
		}
		args = []string{"-"}
	}
	var inputs []explain.Input
	stdinUsed := false
	for _, p := range args {
		if p == "-" {
			if stdinUsed {
				return nil, usageError{errors.New(`"-" (stdin) can be given only once`)}
			}
			stdinUsed = true
			if a.Stdin == nil {
				return nil, usageError{errors.New("no standard input to read")}
			}
			inputs = append(inputs, explain.StreamInput(ctx, "<stdin>", a.Stdin, maxStream))
			continue
		}
		// A directory (torchrun's --log-dir) is its log files.
		files, err := expandLogArg(p)
		if err != nil {
			return nil, usageError{err}
		}
		for _, f := range files {
			in, err := explain.PathInput(ctx, f, textsafe.Sanitize(f), maxStream)
			if err != nil {
				return nil, err
			}
			inputs = append(inputs, in)
		}
	}
	return inputs, nil
}

// ExplainForWizard runs the explainer on the wizard's "Explain a log"
// field (tui.Deps.ExplainLog): a path as a shell would read it — quoted,
// escaped, ~, a glob — or a log directory.
func ExplainForWizard(ctx context.Context, a *App, lang, field string) (tui.LogResult, error) {
	home, _ := os.UserHomeDir()
	paths, err := fieldPaths(field, home)
	if err != nil {
		return tui.LogResult{}, err
	}
	inputs, err := explainInputs(ctx, &App{Stdin: strings.NewReader("")}, paths, explain.DefaultStreamLimit)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return tui.LogResult{}, ue.error
		}
		return tui.LogResult{}, err
	}
	// The screen already shows the path; evidence names just the file so
	// the line itself fits in 80 columns (with its directory when there
	// are several: rank directories hold files of the same name).
	for i := range inputs {
		if len(inputs) == 1 {
			inputs[i].Name = filepath.Base(inputs[i].Name)
		} else {
			inputs[i].Name = filepath.Join(filepath.Base(filepath.Dir(inputs[i].Name)), filepath.Base(inputs[i].Name))
		}
	}
	return explainForWizard(ctx, a, lang, inputs)
}

// ExplainTextForWizard explains a log pasted into the wizard
// (tui.Deps.ExplainText). Its evidence lines are named "paste:LINE".
func ExplainTextForWizard(ctx context.Context, a *App, lang, text string) (tui.LogResult, error) {
	return explainForWizard(ctx, a, lang, []explain.Input{explain.ReaderInput("paste", strings.NewReader(text))})
}

// explainForWizard analyses the inputs and gives the wizard the report and
// its renderer: the log screen draws the same text `ncclwiz explain` prints.
func explainForWizard(ctx context.Context, a *App, lang string, inputs []explain.Input) (tui.LogResult, error) {
	rep, err := explain.Analyze(ctx, inputs, explain.Options{Lang: lang})
	if err != nil {
		return tui.LogResult{}, err
	}
	if msg := badInput(rep); msg != "" {
		return tui.LogResult{}, errors.New(msg)
	}
	out := tui.LogResult{Summary: rep.Summary}
	for _, d := range rep.Diagnoses {
		out.Diagnoses = append(out.Diagnoses, tui.LogDiagnosis{ID: d.ID, Title: d.Title, RootCause: d.RootCause, Guide: d.Guide})
		out.Nodes = max(out.Nodes, len(d.Hosts))
	}
	if d := rep.Digest; d != nil {
		out.Nodes = max(out.Nodes, d.NNodes)
	}
	noColor, unicode := termio.NoColor(a.Env, a.NoColor), termio.UnicodeOK(a.Env)
	out.Render = func(width int) string {
		var b strings.Builder
		w := io.Writer(&b)
		if noColor {
			// As the CLI does: no styling at all, bold included. Otherwise
			// the wizard's renderer fits the styles to the terminal.
			w = &colorprofile.Writer{Forward: &b, Profile: colorprofile.NoTTY}
		}
		// Evidence lines whole (the README promises them wrapped, not cut):
		// fitLines wraps them to the pane.
		if err := render.WritePlain(w, rep, render.PlainOptions{Unicode: unicode, Width: width}); err != nil {
			return err.Error()
		}
		return fitLines(b.String(), width)
	}
	return out, nil
}

// fitLines wraps the report's lines that are wider than the window (a
// heading with its id, a row of fields), continuing them under their own
// indentation, so the wizard's pane shows them whole instead of cut.
func fitLines(s string, width int) string {
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		if ansi.StringWidth(l) <= width {
			out = append(out, l)
			continue
		}
		plain := ansi.Strip(l)
		lead := len(plain) - len(strings.TrimLeft(plain, " "))
		ind := strings.Repeat(" ", min(lead+4, width/3))
		// Words longer than the line (paths, hex) are broken too: a pane
		// cuts what overflows.
		parts := strings.Split(ansi.Wrap(strings.TrimLeft(l, " "), max(width-len(ind), 10), "/"), "\n")
		out = append(out, strings.Repeat(" ", lead)+parts[0])
		for _, p := range parts[1:] {
			out = append(out, ind+p)
		}
	}
	return strings.Join(out, "\n")
}
