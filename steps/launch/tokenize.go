// Package launch rewrites a multi-GPU launch command into a one-GPU run for
// the single-GPU fallback: torchrun / torch.distributed.run / .launch,
// accelerate launch, deepspeed and plain python. Arguments it does not need
// to change are kept exactly as written, quoting included; commands it
// cannot rewrite safely get an explanation instead of a guess.
package launch

import (
	"fmt"
	"strings"
)

// Word is one shell word: its raw spelling and its value after quote removal.
type Word struct {
	Raw, Value string
}

// Tokenize splits a shell command line into words, keeping each word's raw
// spelling. It refuses what it cannot treat as a simple command: pipes,
// lists, redirections, substitutions and unbalanced quotes.
func Tokenize(line string) ([]Word, error) {
	var words []Word
	var raw, val strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, Word{Raw: raw.String(), Value: val.String()})
		}
		raw.Reset()
		val.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if c == '\n' && inWord {
				return nil, fmt.Errorf("several lines: pass one command")
			}
			flush()
		case c == '\\':
			if i+1 >= len(line) {
				return nil, fmt.Errorf("trailing backslash")
			}
			inWord = true
			raw.WriteByte(c)
			raw.WriteByte(line[i+1])
			if line[i+1] != '\n' {
				val.WriteByte(line[i+1])
			}
			i++
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unbalanced single quote")
			}
			inWord = true
			raw.WriteString(line[i : i+end+2])
			val.WriteString(line[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			inWord = true
			raw.WriteByte(c)
			j := i + 1
			for ; j < len(line) && line[j] != '"'; j++ {
				switch line[j] {
				case '\\':
					if j+1 < len(line) && strings.IndexByte("\"\\$`\n", line[j+1]) >= 0 {
						raw.WriteByte('\\')
						raw.WriteByte(line[j+1])
						val.WriteByte(line[j+1])
						j++
						continue
					}
				case '$', '`':
					return nil, fmt.Errorf("variable or command substitution inside quotes (%q): expand it first", line[i:])
				}
				raw.WriteByte(line[j])
				val.WriteByte(line[j])
			}
			if j >= len(line) {
				return nil, fmt.Errorf("unbalanced double quote")
			}
			raw.WriteByte('"')
			i = j
		case strings.IndexByte("|&;<>()`$", c) >= 0:
			return nil, fmt.Errorf("the command uses %q (a pipe, list, redirection or substitution); rewrite only the launch command itself", string(c))
		case c == '#' && !inWord:
			i = len(line) // comment to end of line
		default:
			inWord = true
			raw.WriteByte(c)
			val.WriteByte(c)
		}
	}
	flush()
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	return words, nil
}

// FromArgv turns already-split arguments (e.g. after `ncclwiz fallback --`)
// into words, quoting each raw spelling so the command can be printed.
func FromArgv(argv []string) []Word {
	out := make([]Word, len(argv))
	for i, a := range argv {
		out[i] = Word{Raw: Quote(a), Value: a}
	}
	return out
}

// Quote returns s quoted for a POSIX shell (unchanged when safe).
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r == '/' || r == ':' || r == ',' || r == '=' || r == '+' || r == '@' || r == '%' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
