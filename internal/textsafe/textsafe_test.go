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
