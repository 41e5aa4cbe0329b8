package textsafe

import "testing"

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"tab\tok", "tab\tok"},
		{"nccl-\x1b[31mred", `nccl-\x1b[31mred`},
		{"line\nbreak", `line\nbreak`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"bidi\u202eevil", `bidi\u202eevil`},
		{"c1\u009bx", `c1\x9bx`},
		{"nccl-Ќ", "nccl-Ќ"},
		{"del\x7f", `del\x7f`},
		{"nul\x00", `nul\x00`},
	}
	for _, tt := range tests {
		if got := Sanitize(tt.in); got != tt.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if IsClean(tt.in) != (tt.in == tt.want) {
			t.Errorf("IsClean(%q) disagrees with Sanitize", tt.in)
		}
	}
	if got := SanitizeMultiline("a\nb\x1b"); got != "a\nb\\x1b" {
		t.Errorf("SanitizeMultiline = %q", got)
	}
}

func FuzzSanitize(f *testing.F) {
	f.Add("nccl-\x1b[2J")
	f.Add("\xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		out := Sanitize(s)
		if !IsClean(out) {
			t.Fatalf("Sanitize(%q) = %q is not clean", s, out)
		}
	})
}

// TestNameTellsApart (issue 22 item 19): a file literally named `nccl-\x1b`
// and one holding the ESC byte render differently, and neither emits a
// control byte.
func TestNameTellsApart(t *testing.T) {
	pairs := [][2]string{{"nccl-\x1b", `nccl-\x1b`}, {"a\u202eb", `a\u202eb`}, {"x\\y", `x\\y`}, {"nl\nx", `nl\nx`}}
	for _, p := range pairs {
		a, b := Name(p[0]), Name(p[1])
		if a == b || !IsClean(a) || !IsClean(b) {
			t.Errorf("%q and %q both render as %q / %q", p[0], p[1], a, b)
		}
	}
	if Name("nccl-abc") != "nccl-abc" {
		t.Error("a plain name changed")
	}
}
