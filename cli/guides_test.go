package cli

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/guides/render"
)

// Without a terminal: the list, one guide as plain markdown, JSON, search,
// language choice and the errors a user can meet.
func TestGuidesCommandWithoutTTY(t *testing.T) {
	lib, err := guides.Load()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"LANG=C.UTF-8"}

	out, _, code := runCLI(t, env, "guides")
	if code != 0 || !strings.Contains(out, "shm-no-space") || !strings.Contains(out, "/dev/shm is too small or full") {
		t.Errorf("guides (piped) = %d:\n%s", code, out)
	}
	if n := strings.Count(out, "\n"); n < len(lib.IDs()) {
		t.Errorf("the list has %d lines for %d guides", n, len(lib.IDs()))
	}

	out, _, code = runCLI(t, env, "guides", "shm-no-space")
	g, _ := lib.Get("shm-no-space", "en")
	if code != 0 || out != g.Document() {
		t.Errorf("guides ID piped must print the plain markdown document (code %d):\n%s", code, out)
	}
	if strings.Contains(out, "\x1b") || strings.HasPrefix(out, "---") || !strings.HasPrefix(out, "# /dev/shm is too small") {
		t.Errorf("piped guide has escapes or front matter, or lost its title:\n%.200s", out)
	}

	_, errOut, code := runCLI(t, env, "guides", "shm-no-spcae")
	if code != 2 || !strings.Contains(errOut, `unknown guide "shm-no-spcae"; did you mean shm-no-space`) {
		t.Errorf("unknown id: code %d, stderr %q", code, errOut)
	}
	_, errOut, code = runCLI(t, env, "guides", "watchdog")
	if code != 2 || !strings.Contains(errOut, "did you mean watchdog-timeout") {
		t.Errorf("unknown id by a word: code %d, stderr %q", code, errOut)
	}

	out, _, code = runCLI(t, env, "guides", "--list", "--json")
	var doc guideListJSON
	mustMatchSchema(t, "guides.schema.json", out, &doc)
	if code != 0 || len(doc.Guides) != len(lib.IDs()) || doc.Schema != 1 || doc.Tool != "ncclwiz" {
		t.Fatalf("--list --json: code %d, schema %d, %d entries", code, doc.Schema, len(doc.Guides))
	}
	for _, j := range doc.Guides {
		if j.ID == "" || j.Title == "" || j.Sources == nil || j.Markdown != "" {
			t.Errorf("--list --json entry %+v", j)
		}
	}

	out, _, code = runCLI(t, env, "guides", "--learn")
	if code != 0 || !strings.HasPrefix(out, "1. nccl-intro") || !strings.Contains(out, "7. multi-node-basics") {
		t.Errorf("--learn:\n%s", out)
	}

	out, _, code = runCLI(t, env, "guides", "--search", "bus error")
	if code != 0 || !strings.HasPrefix(out, "shm-sigbus") {
		t.Errorf("--search 'bus error':\n%s", out)
	}
	out, _, code = runCLI(t, env, "guides", "--search", "qqqzzz")
	if code != 1 || !strings.Contains(out, "No guide matches") {
		t.Errorf("--search with no hit: code %d\n%s", code, out)
	}

	out, _, code = runCLI(t, env, "guides", "nccl-intro", "--json")
	var oneDoc guideDocJSON
	mustMatchSchema(t, "guides.schema.json", out, &oneDoc)
	if one := oneDoc.Guide; code != 0 || one.Order != 1 || !strings.Contains(one.Markdown, "## Try it") {
		t.Errorf("guides ID --json: code %d, %+v", code, one)
	}

	_, errOut, code = runCLI(t, env, "guides", "shm-no-space", "--list")
	if code != 2 || errOut == "" {
		t.Errorf("ID with --list should be a usage error, got %d %q", code, errOut)
	}
}

func TestGuidesLanguage(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string // a line of the Chinese or the English guide
		code int
	}{
		{[]string{"LANG=zh_CN.UTF-8"}, nil, "## 为什么重要", 0},
		{[]string{"LC_ALL=zh_TW.UTF-8", "LANG=en_US.UTF-8"}, nil, "## 为什么重要", 0},
		{[]string{"LC_ALL=C.UTF-8", "LANG=zh_CN.UTF-8"}, nil, "## Why it matters", 0}, // LC_ALL wins
		{[]string{"LC_MESSAGES=zh_CN.UTF-8"}, nil, "## 为什么重要", 0},
		{[]string{"LANG=zh_CN.UTF-8"}, []string{"--lang", "en"}, "## Why it matters", 0},
		{[]string{"LANG=C"}, []string{"--lang", "zh"}, "## 为什么重要", 0},
		{[]string{"LANG=C"}, []string{"--lang", "zh-CN"}, "## 为什么重要", 0},
		{[]string{"LANG=C"}, []string{"--lang", "fr"}, "", 2},
	} {
		args := append([]string{"guides", "container-shm"}, c.args...)
		out, errOut, code := runCLI(t, c.env, args...)
		if code != c.code || (c.want != "" && !strings.Contains(out, c.want)) {
			t.Errorf("env %v args %v: code %d (want %d)\n%.300s%s", c.env, c.args, code, c.code, out, errOut)
		}
	}
	// A guide without a translation falls back to English.
	out, _, code := runCLI(t, []string{"LANG=zh_CN.UTF-8"}, "guides", "gpu-xid")
	if code != 0 || !strings.Contains(out, "## Symptom") {
		t.Errorf("fallback to English:\n%.300s", out)
	}
}

// Every ncclwiz command a guide shows (in code spans and code blocks)
// names a real subcommand and only flags it accepts, so a reader who
// copies it gets a command that runs.
func TestGuideCommandsParse(t *testing.T) {
	lib, err := guides.Load()
	if err != nil {
		t.Fatal(err)
	}
	spanRe := regexp.MustCompile("`([^`]+)`")
	cmdRe := regexp.MustCompile(`(?:^|[\s(])(ncclwiz(?: [^\s#;|&)]+)*)`)
	for _, lang := range guides.Languages {
		for _, g := range lib.List(lang) {
			if g.Lang != lang {
				continue
			}
			var code []string
			inFence := false
			for _, line := range strings.Split(render.Unwrap(g.Body), "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "```") {
					inFence = !inFence
					continue
				}
				if inFence {
					code = append(code, line)
					continue
				}
				for _, m := range spanRe.FindAllStringSubmatch(line, -1) {
					code = append(code, m[1])
				}
			}
			for _, c := range code {
				for _, m := range cmdRe.FindAllStringSubmatch(c, -1) {
					args := strings.Fields(m[1])[1:]
					if i := slices.Index(args, "--"); i >= 0 {
						args = args[:i+1] // fallback's launch command is not ours
					}
					if err := parses(args); err != nil {
						t.Errorf("%s: `%s`: %v", g.File, m[1], err)
					}
				}
			}
		}
	}
}

func parses(args []string) error {
	root := NewRoot(&App{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		return fmt.Errorf("no subcommand %q", rest[0])
	}
	return cmd.ParseFlags(rest)
}
