// Package textsafe makes text from the machine or a log safe to show: control
// bytes and terminal escapes are made visible, invalid UTF-8 is escaped, and
// secrets are redacted. Everything that reaches a terminal, a report or an
// exported script passes through here.
package textsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sanitize returns s with every control character (C0, DEL, C1), every
// bidi/format character and every invalid UTF-8 byte replaced by a visible
// escape such as \x1b or \u202e. Tabs are kept; newlines are escaped.
func Sanitize(s string) string { return sanitize(s, false) }

// Name is Sanitize for a name people must tell apart (a file in /dev/shm):
// a backslash is shown as \\ too, so that a file literally named
// `nccl-\x1b` never renders like one holding the ESC byte (Sanitize alone
// shows both as nccl-\x1b).
func Name(s string) string {
	if strings.IndexByte(s, '\\') >= 0 {
		s = strings.ReplaceAll(s, `\`, `\\`)
	}
	return Sanitize(s)
}

// SanitizeMultiline is Sanitize but keeps newlines.
func SanitizeMultiline(s string) string { return sanitize(s, true) }

// IsClean reports whether Sanitize would leave s unchanged.
func IsClean(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || needsEscape(r, false) {
			return false
		}
		i += size
	}
	return true
}

func needsEscape(r rune, keepNL bool) bool {
	switch {
	case r == '\t':
		return false
	case r == '\n':
		return !keepNL
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case unicode.Is(unicode.Cf, r): // bidi overrides, zero-width joiners …
		return true
	}
	return false
}

func sanitize(s string, keepNL bool) string {
	if isCleanFast(s, keepNL) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsEscape(r, keepNL):
			if r == '\n' {
				b.WriteString(`\n`)
			} else if r == '\r' {
				b.WriteString(`\r`)
			} else if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func isCleanFast(s string, keepNL bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || c < 0x20 || c == 0x7f {
			if c == '\t' || (keepNL && c == '\n') {
				continue
			}
			if c < 0x80 {
				return false
			}
			// Non-ASCII: fall back to the rune-level check.
			for j := i; j < len(s); {
				r, size := utf8.DecodeRuneInString(s[j:])
				if (r == utf8.RuneError && size == 1) || needsEscape(r, keepNL) {
					return false
				}
				j += size
			}
			return true
		}
	}
	return true
}
