package render_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/guides/render"
)

// reserved are the characters the renderer uses as wrap placeholders
// (after the no-break space of inline code).
const reserved = "\u00a0\u2011\u2024\u201a\u037e\u02d6\u01c0"

var styles = []string{render.Dark, render.Light, render.ASCII, render.NoTTY}

func library(t testing.TB) *guides.Library {
	t.Helper()
	l, err := guides.Load()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func every(l *guides.Library) []*guides.Guide {
	var out []*guides.Guide
	for _, lang := range guides.Languages {
		for _, g := range l.List(lang) {
			if g.Lang == lang {
				out = append(out, g)
			}
		}
	}
	return out
}

// Every guide, in both languages and every style, fits an 80-column SSH
// terminal by itself: glamour wraps the prose, and code blocks and tables
// are written narrow enough that the hard-wrap safety net never has to
// break them.
func TestEveryGuideFits80Columns(t *testing.T) {
	l := library(t)
	for _, g := range every(l) {
		for _, st := range styles {
			opt := render.Options{Width: 80, Style: st}
			over, err := render.Overflow(g.Document(), opt)
			if err != nil {
				t.Fatalf("%s (%s): %v", g.File, st, err)
			}
			for _, line := range over {
				t.Errorf("%s (%s): %d columns: %q", g.File, st, ansi.StringWidth(line), line)
			}
			out, err := render.Markdown(g.Document(), opt)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(out, "\n") {
				if w := ansi.StringWidth(line); w > 80 {
					t.Errorf("%s (%s) line %d is %d columns", g.File, st, i+1, w)
				}
				if strings.HasSuffix(ansi.Strip(line), " ") {
					t.Errorf("%s (%s) line %d keeps trailing padding: %q", g.File, st, i+1, ansi.Strip(line))
				}
			}
			if strings.ContainsAny(out, reserved) {
				t.Errorf("%s (%s): output keeps a no-break space or a wrap placeholder", g.File, st)
			}
		}
		if strings.ContainsAny(g.Body, strings.TrimPrefix(reserved, "\u00a0")) {
			t.Errorf("%s: uses a character the renderer reserves (%q)", g.File, strings.TrimPrefix(reserved, "\u00a0"))
		}
	}
}

// Narrow and absurd widths never panic and never overflow (down to two
// columns, the width of one CJK character).
func TestNarrowWidths(t *testing.T) {
	l := library(t)
	for _, id := range []string{"nccl-intro", "env-reference", "shm-no-space"} {
		for _, lang := range guides.Languages {
			g, _ := l.Get(id, lang)
			for _, w := range []int{-5, 0, 1, 2, 5, 13, 20, 33, 50, 200} {
				for _, st := range styles {
					out, err := render.Markdown(g.Document(), render.Options{Width: w, Style: st})
					if err != nil {
						t.Fatalf("%s width %d %s: %v", g.File, w, st, err)
					}
					limit := w
					if w <= 0 {
						limit = 80
					}
					for _, line := range strings.Split(out, "\n") {
						if lw := ansi.StringWidth(line); lw > max(limit, 2) {
							t.Errorf("%s width %d %s: line of %d columns", g.File, w, st, lw)
							break
						}
					}
				}
			}
		}
	}
}

func TestCommandsStayWholeAndCopyable(t *testing.T) {
	md := "Read it with `ncclwiz guides socket-interface` or `ncclwiz check --only shm.mount,shm.segments` on NCCL 2.24.3 and later, a long line of prose that forces wrapping right here.\n"
	for _, w := range []int{40, 60, 80} {
		for _, st := range styles {
			out, err := render.Markdown(md, render.Options{Width: w, Style: st})
			if err != nil {
				t.Fatal(err)
			}
			plain := ansi.Strip(out)
			wants := []string{"ncclwiz guides socket-interface", "2.24.3"}
			if w > 50 { // the check command is 43 columns: only whole in wider windows
				wants = append(wants, "ncclwiz check --only shm.mount,shm.segments")
			}
			for _, want := range wants {
				if !strings.Contains(plain, want) {
					t.Errorf("width %d %s: %q was split:\n%s", w, st, want, plain)
				}
			}
			if strings.Contains(out, "\u00a0") {
				t.Errorf("width %d %s: no-break space in output", w, st)
			}
		}
	}
}

func TestUnwrapJoinsSoftBreaksOnly(t *testing.T) {
	in := "A paragraph\nwrapped here.\n\n- item one\n  continued\n- item two\n\n```\nkeep\nthese lines\n```\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\n## Heading\ntext after\n"
	want := "A paragraph wrapped here.\n\n- item one continued\n- item two\n\n```\nkeep\nthese lines\n```\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\n## Heading\ntext after\n"
	if got := render.Unwrap(in); got != want {
		t.Errorf("Unwrap:\n%s\nwant:\n%s", got, want)
	}
}

func TestStyleFor(t *testing.T) {
	for _, c := range []struct {
		tty, noColor, dark bool
		want               string
	}{
		{false, false, true, render.NoTTY},
		{false, true, false, render.NoTTY},
		{true, true, true, render.ASCII},
		{true, false, true, render.Dark},
		{true, false, false, render.Light},
	} {
		if got := render.StyleFor(c.tty, c.noColor, c.dark); got != c.want {
			t.Errorf("StyleFor(%v, %v, %v) = %s, want %s", c.tty, c.noColor, c.dark, got, c.want)
		}
	}
	if _, err := render.Markdown("x", render.Options{Style: "no-such-style"}); err == nil {
		t.Error("an unknown style must be an error")
	}
}

func BenchmarkMarkdown80(b *testing.B) {
	l := library(b)
	g, _ := l.Get("shm-no-space", "en")
	doc := g.Document()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := render.Markdown(doc, render.Options{Width: 80, Style: render.Dark}); err != nil {
			b.Fatal(err)
		}
	}
}

// A name in code (a variable, a path, a command) is never broken across
// lines at 80 columns: tables squeezed to fit would cut
// NCCL_DEBUG_TIMESTAMP_LEVELS in two, and a reader copies what they see.
func TestCodeTokensStayWholeAt80(t *testing.T) {
	l := library(t)
	span := regexp.MustCompile("`([^`\\s]{1,70})`")
	for _, g := range every(l) {
		for _, st := range []string{render.Dark, render.NoTTY} {
			out, err := render.Markdown(g.Document(), render.Options{Width: 80, Style: st})
			if err != nil {
				t.Fatal(err)
			}
			plain := ansi.Strip(out)
			for _, m := range span.FindAllStringSubmatch(render.Unwrap(g.Body), -1) {
				if !strings.Contains(plain, m[1]) {
					t.Errorf("%s (%s): %q is split or cut in the rendered guide", g.File, st, m[1])
				}
			}
		}
	}
}
