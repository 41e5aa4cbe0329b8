package shellquote

import (
	"os/exec"
	"testing"
)

func TestQuote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"/dev/shm/nccl-a1", "/dev/shm/nccl-a1"},
		{"NCCL_SOCKET_IFNAME=eth0", "NCCL_SOCKET_IFNAME=eth0"},
		{"^docker0,lo", "'^docker0,lo'"}, // NCCL's exclusion prefix: a zsh glob operator bare
		{"=eth0", "'=eth0'"},             // NCCL's exact-match prefix: zsh's =cmd expansion bare
		{"a:=ls", "'a:=ls'"},
		{"a=b", "a=b"},
		{"it's", `'it'\''s'`},
		{"a b", "'a b'"},
		{"", "''"},
		{"$(reboot)", "'$(reboot)'"},
		{"`x`", "'`x`'"},
		{`\`, `'\'`},
		{"*", "'*'"},
		{"~", "'~'"},
		{"a;b", "'a;b'"},
		{"!1", "'!1'"},
		{"{a,b}", "'{a,b}'"},
		{"名前", "'名前'"},
	}
	shells := map[string]string{}
	for _, sh := range []string{"bash", "dash", "zsh"} {
		if p, err := exec.LookPath(sh); err == nil {
			shells[sh] = p
		}
	}
	if len(shells) == 0 {
		t.Log("no bash, dash or zsh: round trips not run")
	}
	for _, c := range cases {
		got := Quote(c.in)
		if got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
		// What the shell reads back is what was quoted, as an argument and
		// as the value of an export (where zsh expands = after the name's =).
		for name, sh := range shells {
			for _, script := range []string{"printf %s " + got, "export X=" + got + `; printf %s "$X"`} {
				args := []string{"-c", script}
				if name == "zsh" {
					args = []string{"-o", "extendedglob", "-c", script}
				}
				out, err := exec.Command(sh, args...).Output()
				if err != nil || string(out) != c.in {
					t.Errorf("%s round trip of %q through %q: %q %v", name, c.in, script, out, err)
				}
			}
		}
	}
}

// A joined command line comes back from sh as the same words.
func TestJoinThroughSh(t *testing.T) {
	words := []string{"plain", "with space", "it's", `$(rm -rf /)`, "`x`", "a\nb", `\'"`, "", "--only=shm.mount"}
	out, err := exec.Command("sh", "-c", `for w in `+Join(words)+`; do printf '<%s>' "$w"; done`).Output()
	want := ""
	for _, w := range words {
		want += "<" + w + ">"
	}
	if err != nil || string(out) != want {
		t.Errorf("sh split %q into %q (%v), want %q", Join(words), out, err, want)
	}
}
