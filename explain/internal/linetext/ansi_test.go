package linetext

import "testing"

func TestStripANSI(t *testing.T) {
	tests := map[string]string{
		"\x1b[31mERROR\x1b[0m: x":               "ERROR: x",
		"a\x1b]8;;http://x\x07link\x1b]8;;\x07": "alink",
		"a\x1b]0;title\x1b\\b":                  "ab",
		"\x1b(Bplain":                           "plain",
		"trailing \x1b[":                        "trailing ",
		"nul\x00\x00s":                          "nuls",
		"\x1b":                                  "",
		"no escapes":                            "no escapes",
	}
	for in, want := range tests {
		if got := string(StripANSI(nil, []byte(in))); got != want {
			t.Errorf("StripANSI(%q) = %q, want %q", in, got, want)
		}
	}
}
