package termio

import (
	"bytes"
	"testing"

	"github.com/charmbracelet/colorprofile"
)

// TestForcedColour: output to a pipe has colour only when asked for with
// CLICOLOR_FORCE or FORCE_COLOR, and never against NO_COLOR or --no-color.
func TestForcedColour(t *testing.T) {
	for _, c := range []struct {
		env  []string
		flag bool
		want colorprofile.Profile
	}{
		{nil, false, colorprofile.NoTTY},
		{[]string{"CLICOLOR_FORCE=1"}, false, colorprofile.ANSI},
		{[]string{"CLICOLOR_FORCE=1", "TERM=xterm-256color"}, false, colorprofile.ANSI256},
		{[]string{"CLICOLOR_FORCE=0"}, false, colorprofile.NoTTY},
		{[]string{"FORCE_COLOR=1"}, false, colorprofile.ANSI},
		{[]string{"FORCE_COLOR=2"}, false, colorprofile.ANSI256},
		{[]string{"FORCE_COLOR=3"}, false, colorprofile.TrueColor},
		{[]string{"FORCE_COLOR=0"}, false, colorprofile.NoTTY},
		{[]string{"FORCE_COLOR=false"}, false, colorprofile.NoTTY},
		{[]string{"FORCE_COLOR=1", "TERM=dumb"}, false, colorprofile.ANSI},
		{[]string{"CLICOLOR_FORCE=1", "NO_COLOR=1"}, false, colorprofile.NoTTY},
		{[]string{"FORCE_COLOR=3"}, true, colorprofile.NoTTY},
	} {
		if got := New(&bytes.Buffer{}, c.env, c.flag).Profile; got != c.want {
			t.Errorf("%v --no-color=%v: %v, want %v", c.env, c.flag, got, c.want)
		}
	}
}
