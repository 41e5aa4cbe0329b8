package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"charm.land/lipgloss/v2"
	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/guides/render"
	"github.com/ncclwiz/ncclwiz/guideui"
	"github.com/ncclwiz/ncclwiz/internal/termio"
)

type guidesFlags struct {
	list, json, learn bool
	search            string
}

func newGuidesCmd(a *App) *cobra.Command {
	var f guidesFlags
	cmd := &cobra.Command{
		Use:   "guides [ID]",
		Short: "Read the offline guides: what failed, why, how to confirm, fix and verify",
		Long: `The guides are embedded in ncclwiz and need no network.

  ncclwiz guides             browse them (a terminal) or list them (a pipe)
  ncclwiz guides ID          show one guide; plain markdown when piped
  ncclwiz guides --learn     the onboarding track, in order
  ncclwiz guides --list      list every guide (--json for JSON)
  ncclwiz guides --search W  rank guides by the words W

In the browser: / filters the list, enter opens, tab switches between every
guide and the Learn track; in a guide / searches, n and N move between
matches, ] and [ step through the Learn track, esc or q goes back, ? shows
every key.

--lang zh (or a zh_* locale in LC_ALL, LC_MESSAGES or LANG) shows the
Chinese guides; guides without a translation are shown in English.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeGuideIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGuides(cmd, a, f, args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.list, "list", false, "list the guides and exit")
	fl.BoolVar(&f.json, "json", false, "with --list, --search or ID: print JSON")
	fl.BoolVar(&f.learn, "learn", false, "only the Learn track, in order")
	fl.StringVar(&f.search, "search", "", "rank the guides by these words")
	return cmd
}

func completeGuideIDs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	lib, err := guides.Load()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []string
	for _, g := range lib.List(guides.English) {
		out = append(out, g.ID+"\t"+g.Title)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// guideLanguage validates --lang and falls back to the locale.
func guideLanguage(a *App) (string, error) {
	if a.Lang != "" && guides.NormalizeLang(a.Lang) == "" {
		return "", usageError{fmt.Errorf("--lang %q: want %s", a.Lang, strings.Join(guides.Languages, " or "))}
	}
	return wizardLang(a), nil
}

func runGuides(cmd *cobra.Command, a *App, f guidesFlags, args []string) error {
	lang, err := guideLanguage(a)
	if err != nil {
		return err
	}
	lib, err := guides.Load()
	if err != nil {
		return fmt.Errorf("guides: %w", err)
	}
	switch {
	case len(args) == 1 && (f.list || f.search != "" || f.learn):
		return usageError{fmt.Errorf("give a guide ID or --list/--search/--learn, not both")}
	case len(args) == 1:
		return showGuide(a, lib, args[0], lang, f.json)
	case f.search != "":
		hits := lib.Search(f.search, lang)
		if len(hits) == 0 {
			if f.json {
				if err := writeJSON(a, guideListDoc(a, nil)); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.Stdout, "No guide matches %q; try fewer or other words, or ncclwiz guides --list.\n", f.search)
			}
			return ExitError{Code: 1}
		}
		return printGuideList(a, hits, f.json, false)
	case f.list || f.json:
		return printGuideList(a, pick(lib, lang, f.learn), f.json, f.learn)
	case a.StdinTTY() && a.StdoutTTY():
		return browseGuides(cmd, a, lib, lang, f.learn)
	}
	return printGuideList(a, pick(lib, lang, f.learn), false, f.learn)
}

func pick(lib *guides.Library, lang string, learn bool) []*guides.Guide {
	if learn {
		return lib.Learn(lang)
	}
	return lib.List(lang)
}

// showGuide prints one guide: rendered for a terminal, plain markdown (or
// JSON) for a pipe.
func showGuide(a *App, lib *guides.Library, id, lang string, asJSON bool) error {
	g, ok := lib.Get(id, lang)
	if !ok {
		msg := fmt.Sprintf("unknown guide %q", id)
		if s := lib.Suggest(id, 3); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, ", ") + "?"
		}
		return usageError{fmt.Errorf("%s (see ncclwiz guides --list)", msg)}
	}
	if asJSON {
		return writeJSON(a, guideDocJSON{Schema: guidesSchema, Tool: "ncclwiz", Version: a.VersionString(), Guide: guideToJSON(g, true)})
	}
	out := a.Out()
	if !out.TTY {
		_, err := fmt.Fprint(a.Stdout, g.Document())
		return err
	}
	style := render.StyleFor(true, termio.NoColor(a.Env, a.NoColor), darkBackground(a))
	text, err := render.Markdown(g.Document(), render.Options{Width: min(out.Width, guideui.MaxTextWidth), Style: style})
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(out.Writer(), text)
	return err
}

// darkBackground asks the terminal for its background colour. Only for
// the standalone paths, before any program reads the terminal: the answer
// arrives on stdin.
func darkBackground(a *App) bool {
	// rxvt-style terminals say it without a round trip: "fg;bg".
	if v := termio.Getenv(a.Env, "COLORFGBG"); v != "" {
		f := strings.Split(v, ";")
		if bg, err := strconv.Atoi(f[len(f)-1]); err == nil {
			return bg < 7 || bg == 8
		}
	}
	in, ok := a.Stdin.(*os.File)
	outF, ok2 := a.Stdout.(*os.File)
	if !ok || !ok2 || !termio.IsTerminal(in) || !termio.IsTerminal(outF) || termio.NoColor(a.Env, a.NoColor) {
		return true
	}
	return lipgloss.HasDarkBackground(in, outF)
}

func browseGuides(cmd *cobra.Command, a *App, lib *guides.Library, lang string, learn bool) error {
	dark := darkBackground(a)
	noColor := termio.NoColor(a.Env, a.NoColor)
	in, _ := a.Stdin.(*os.File)
	ctx, stop := signal.NotifyContext(cmdContext(cmd), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err := guideui.Run(ctx, lib,
		guideui.Options{Lang: lang, Style: render.StyleFor(true, noColor, dark), Dark: dark, Learn: learn},
		guideui.RunOptions{In: in, Out: a.Stdout, Env: a.Env, NoColor: noColor})
	if err != nil {
		return fmt.Errorf("guide browser: %w", err)
	}
	return nil
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// guidesSchema versions the guides documents (docs/guides.schema.json).
const guidesSchema = 1

// guideListJSON is `guides --list --json` and `--search … --json`.
type guideListJSON struct {
	Schema  int         `json:"schema"`
	Tool    string      `json:"tool"`
	Version string      `json:"version"`
	Guides  []guideJSON `json:"guides"`
}

// guideDocJSON is `guides ID --json`.
type guideDocJSON struct {
	Schema  int       `json:"schema"`
	Tool    string    `json:"tool"`
	Version string    `json:"version"`
	Guide   guideJSON `json:"guide"`
}

func guideListDoc(a *App, gs []*guides.Guide) guideListJSON {
	doc := guideListJSON{Schema: guidesSchema, Tool: "ncclwiz", Version: a.VersionString(), Guides: []guideJSON{}}
	for _, g := range gs {
		doc.Guides = append(doc.Guides, guideToJSON(g, false))
	}
	return doc
}

type guideJSON struct {
	ID         string   `json:"id"`
	Title      string   `json:"title"`
	Summary    string   `json:"summary"`
	Lang       string   `json:"lang"`
	Order      int      `json:"order,omitempty"`
	Tags       []string `json:"tags"`
	Signatures []string `json:"signatures"`
	Checks     []string `json:"checks"`
	Fixes      []string `json:"fixes"`
	Related    []string `json:"related"`
	Sources    []string `json:"sources"`
	Markdown   string   `json:"markdown,omitempty"`
}

func guideToJSON(g *guides.Guide, withBody bool) guideJSON {
	j := guideJSON{ID: g.ID, Title: g.Title, Summary: g.Summary, Lang: g.Lang, Order: g.Order,
		Tags: nonNil(g.Tags), Checks: nonNil(g.Checks), Fixes: nonNil(g.Fixes), Related: nonNil(g.Related), Sources: nonNil(g.Sources),
		Signatures: []string{}}
	for _, s := range g.Signatures {
		j.Signatures = append(j.Signatures, s.ID)
	}
	if withBody {
		j.Markdown = g.Document()
	}
	return j
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func writeJSON(a *App, v any) error {
	enc := json.NewEncoder(a.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printGuideList(a *App, gs []*guides.Guide, asJSON, numbered bool) error {
	if asJSON {
		return writeJSON(a, guideListDoc(a, gs))
	}
	tw := tabwriter.NewWriter(a.Stdout, 2, 4, 2, ' ', 0)
	for i, g := range gs {
		id := g.ID
		if numbered {
			id = fmt.Sprintf("%d. %s", i+1, g.ID)
		}
		fmt.Fprintf(tw, "%s\t%s\n", id, g.Title)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(a.Stdout, "\nRead one with: ncclwiz guides ID")
	return err
}
