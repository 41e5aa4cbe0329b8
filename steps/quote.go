package steps

import "strings"

// ShellQuote quotes s for POSIX shells: unchanged when it holds only
// characters no shell treats specially, else in single quotes, where the
// only character needing care is the single quote itself (closed, escaped,
// reopened). Callers must not pass text with control bytes: such names are
// skipped with a warning, never emitted.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '_' || r == '-' || r == '=' || r == ':' || r == ',' || r == '+' || r == '@' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
