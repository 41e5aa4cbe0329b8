// Package shellquote quotes words for POSIX sh, bash and zsh: the one
// quoter behind previews, exported scripts and environment snippets.
package shellquote

import "strings"

// Quote returns s unchanged when it holds only characters no supported
// shell treats specially, else in single quotes, where the only character
// needing care is the single quote itself (closed, escaped, reopened).
//
// The bare set is what is literal everywhere a snippet may be pasted: `^`
// is not in it (zsh's EXTENDED_GLOB negation, history substitution at the
// start of a word in interactive bash and zsh, a pipe in the Bourne shell),
// nor `~`, `*`, `?`, `[`, `#`, `%`, `!` or `{`. `=` is bare except first
// or after `:`, where zsh's EQUALS expansion reads it as a command path even
// in an assignment (export NCCL_SOCKET_IFNAME==eth0 runs a lookup of
// "eth0"). Callers must not pass text with control bytes: such names are
// skipped with a warning, never emitted.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !bare(r) }) < 0 &&
		s[0] != '=' && !strings.Contains(s, ":=") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each word and joins them with spaces: a command line a shell
// splits back into exactly these words.
func Join(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

func bare(r rune) bool {
	switch r {
	case '/', '.', '_', '-', '=', ':', ',', '+', '@':
		return true
	}
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}
