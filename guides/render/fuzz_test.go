package render

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// FuzzMarkdown: any markdown at any width renders without a panic, and
// no line is wider than the window (from 2 columns, one CJK character).
func FuzzMarkdown(f *testing.F) {
	f.Add("# T\n\n- item `ncclwiz guides a-b` 2.24\n  continued\n\n```\ncode\n```\n| a | b |\n| - | - |\n| 1 | 2 |\n", 80, 0)
	f.Add("共享内存\n不足。`NCCL_SHM_DISABLE=1`", 7, 2)
	f.Add("---\n***\n> quote\n1) x\n    indented\n", 3, 3)
	styles := []string{Dark, Light, ASCII, NoTTY}
	f.Fuzz(func(t *testing.T, md string, width, style int) {
		if len(md) > 4096 || width < 2 || width > 300 {
			return
		}
		st := styles[(style%len(styles)+len(styles))%len(styles)]
		out, err := Markdown(md, Options{Width: width, Style: st})
		if err != nil {
			return
		}
		for _, l := range strings.Split(out, "\n") {
			if w := ansi.StringWidth(l); w > width {
				t.Fatalf("width %d, style %s: a line of %d columns: %q", width, st, w, l)
			}
		}
	})
}
