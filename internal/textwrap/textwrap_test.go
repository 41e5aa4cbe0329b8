package textwrap

import (
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

func TestLines(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    string
		width int
		want  []string
	}{
		{"empty", "", 40, nil},
		{"fits", "one two three", 40, []string{"one two three"}},
		{"wraps", "aaaa bbbb cccc dddd eeee ffff", 20, []string{"aaaa bbbb cccc dddd", "eeee ffff"}},
		{"spaces collapse", "a   b\tc", 40, []string{"a b c"}},
		{"paragraphs", "first\n\nsecond", 40, []string{"first", "", "second"}},
		{"long word alone", "x " + "yyyyyyyyyyyyyyyyyyyyyyyyy z", 20, []string{"x", "yyyyyyyyyyyyyyyyyyyyyyyyy", "z"}},
		{"narrow floor", "aaa bbb ccc ddd eee fff ggg", 5, []string{"aaa bbb ccc ddd eee", "fff ggg"}},
		// 共享内存 is four runes but eight cells.
		{"wide runes", "共享内存 共享内存 共享内存", 20, []string{"共享内存 共享内存", "共享内存"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Lines(c.in, c.width); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Lines(%q, %d) = %q, want %q", c.in, c.width, got, c.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	if got := String("aaaa bbbb cccc dddd eeee", 20, "  "); got != "aaaa bbbb cccc dddd\n  eeee" {
		t.Errorf("String = %q", got)
	}
}

func TestClip(t *testing.T) {
	cases := []struct {
		in    string
		width int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"python train.py --epochs 10", 15, "python train..."},
		{"训练脚本训练脚本", 10, "训练脚..."},   // 2 cells each: 3 runes + "..." = 9 cells; a 4th would make 11
		{"a训练脚本训练脚本", 10, "a训练脚..."}, // 1+6+3 = 10
		{"", 5, ""},
	}
	for _, c := range cases {
		got := Clip(c.in, c.width)
		if got != c.want || !utf8.ValidString(got) || ansi.StringWidth(got) > c.width {
			t.Errorf("Clip(%q, %d) = %q (%d cells), want %q", c.in, c.width, got, ansi.StringWidth(got), c.want)
		}
	}
}
