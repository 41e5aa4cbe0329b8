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

func TestRedact(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz", Redacted},
		{"WANDB_API_KEY", "0123456789abcdef", Redacted},
		{"NCCL_DEBUG", "INFO", "INFO"},
		{"NCCL_SOCKET_IFNAME", "eth0", "eth0"},
		{"MY_URL", "https://bob:hunter2@example.com/x", "https://bob:" + Redacted + "@example.com/x"},
		{"CMD", "train --password=hunter2 --lr 1", "train --password=" + Redacted + " --lr 1"},
		{"X", "ghp_0123456789abcdefghijklmnop", Redacted},
		{"AWS_REGION", "us-east-1", "us-east-1"},
	}
	for _, tt := range tests {
		if got := RedactEnv(tt.name, tt.value); got != tt.want {
			t.Errorf("RedactEnv(%s, %q) = %q, want %q", tt.name, tt.value, got, tt.want)
		}
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
