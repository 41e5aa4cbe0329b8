// Package termio decides how ncclwiz writes to a terminal: colour profile
// (NO_COLOR with any value, --no-color, TERM=dumb, pipes), whether Unicode
// marks are safe, the width, and whether stdin/stdout are terminals.
package termio

import (
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/term"
)

// Output is a writer plus what it can display.
type Output struct {
	w io.Writer
	// Profile is the colour profile after NO_COLOR/--no-color/TERM=dumb.
	Profile colorprofile.Profile
	// TTY is true when the writer is a terminal.
	TTY bool
	// Unicode is true when box-drawing and check marks are safe.
	Unicode bool
	// Width is the terminal width, or 80 when unknown.
	Width int
}

// Getenv looks a key up in a KEY=VALUE environment list.
func Getenv(env []string, key string) string {
	prefix := key + "="
	for i := len(env) - 1; i >= 0; i-- {
		if strings.HasPrefix(env[i], prefix) {
			return env[i][len(prefix):]
		}
	}
	return ""
}

// NoColor reports whether colour must be off: the --no-color flag, NO_COLOR
// set to any non-empty value (no-color.org; colorprofile alone only honours
// values that parse as booleans), or TERM=dumb.
func NoColor(env []string, flag bool) bool {
	return flag || Getenv(env, "NO_COLOR") != "" || Getenv(env, "TERM") == "dumb"
}

// ForcedColor is the profile CLICOLOR_FORCE or FORCE_COLOR ask for when
// the output is not a terminal (a pager, CI logs, `script`), or false:
// CLICOLOR_FORCE set and not 0 (bixense.com/clicolors) gives what the
// environment supports, at least 16 colours; FORCE_COLOR=1, 2 or 3 gives
// 16, 256 or 24-bit colour (the Node.js convention), 0 or false nothing.
func ForcedColor(env []string) (colorprofile.Profile, bool) {
	if v := Getenv(env, "FORCE_COLOR"); v != "" && v != "0" && !strings.EqualFold(v, "false") {
		switch v {
		case "1":
			return colorprofile.ANSI, true
		case "2":
			return colorprofile.ANSI256, true
		case "3":
			return colorprofile.TrueColor, true
		}
		return max(colorprofile.Detect(io.Discard, append(env, "CLICOLOR_FORCE=1")), colorprofile.ANSI), true
	}
	if v := Getenv(env, "CLICOLOR_FORCE"); v != "" && v != "0" {
		return max(colorprofile.Detect(io.Discard, append(env, "CLICOLOR_FORCE=1")), colorprofile.ANSI), true
	}
	return 0, false
}

// UnicodeOK reports whether the locale and terminal can show UTF-8 symbols.
func UnicodeOK(env []string) bool {
	t := Getenv(env, "TERM")
	if t == "dumb" || t == "linux" {
		return false
	}
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := Getenv(env, k); v != "" {
			v = strings.ToLower(v)
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	// No locale at all is common over SSH and in containers; modern
	// terminals are UTF-8, so default to yes unless TERM says otherwise.
	return true
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	return f != nil && term.IsTerminal(f.Fd())
}

// New describes w. When w is an *os.File its TTY-ness and width are probed.
func New(w io.Writer, env []string, noColorFlag bool) Output {
	o := Output{w: w, Width: 80, Unicode: UnicodeOK(env)}
	if f, ok := w.(*os.File); ok && IsTerminal(f) {
		o.TTY = true
		if wd, _, err := term.GetSize(f.Fd()); err == nil && wd > 0 {
			o.Width = wd
		}
	} else if c, err := strconv.Atoi(Getenv(env, "COLUMNS")); err == nil && c > 20 {
		o.Width = c
	}
	o.Profile = colorprofile.Detect(w, env)
	if !o.TTY {
		o.Profile = colorprofile.NoTTY
	}
	forced, isForced := ForcedColor(env)
	switch {
	// With colour off, plain output carries no escape sequences at all:
	// bold alone is not worth surprising a script or a screen reader.
	// --no-color and NO_COLOR win over CLICOLOR_FORCE and FORCE_COLOR.
	case noColorFlag || Getenv(env, "NO_COLOR") != "":
		o.Profile = colorprofile.NoTTY
	case isForced:
		o.Profile = forced
	case NoColor(env, false):
		o.Profile = colorprofile.NoTTY
	}
	return o
}

// Writer returns a writer that downsamples or strips ANSI styling to fit the
// profile, so callers can always render with lipgloss styles.
func (o Output) Writer() io.Writer {
	return &colorprofile.Writer{Forward: o.w, Profile: o.Profile}
}

// Raw returns the underlying writer.
func (o Output) Raw() io.Writer { return o.w }

// Color reports whether colours will be shown.
func (o Output) Color() bool { return o.Profile > colorprofile.Ascii }
