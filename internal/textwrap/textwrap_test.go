package textwrap

import (
	"reflect"
	"testing"
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
