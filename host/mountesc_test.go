package host

import "testing"

func TestMountEscapes(t *testing.T) {
	for in, want := range map[string]string{`a\040b`: "a b", `tab\011`: "tab\t", `x\9`: `x\9`, `end\04`: `end\04`, `\777`: `\777`, `no`: "no", `/x\`: `/x\`, `back\134slash`: `back\slash`} {
		if got := UnescapeMount(in); got != want {
			t.Errorf("UnescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
	for _, s := range []string{"plain", "with space", "tab\there", `back\slash`, "new\nline"} {
		if got := UnescapeMount(EscapeMount(s)); got != s {
			t.Errorf("round trip of %q gave %q", s, got)
		}
	}
}
