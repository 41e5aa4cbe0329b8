// Package launch rewrites a multi-GPU launch command into a one-GPU run for
// the single-GPU fallback: torchrun, python -m torch.distributed.run and
// .launch, accelerate launch, deepspeed and plain python.
//
// The command is split by a real shell-word tokenizer that remembers how
// each word was written, so every word the rewrite does not need to change
// is emitted exactly as typed (quotes, escapes, $VARS and globs included)
// and the shell expands it exactly as before. Anything that is not one
// simple command — pipelines, lists, redirections, subshells, command
// substitution — is refused with an explanation, and so is a word the
// rewrite would have to interpret but cannot know (a $VAR in
// --nproc_per_node, say): the user gets a reason, never a guess.
package launch

import (
	"fmt"
	"strings"

	"github.com/ncclwiz/ncclwiz/internal/shellquote"
)

// Word is one shell word of a simple command.
type Word struct {
	// Raw is the word exactly as written (quotes and escapes included).
	Raw string
	// Value is the word after quote removal. For a Dynamic word it is the
	// text with the expansions left in, and must not be interpreted.
	Value string
	// Dynamic is set when the shell would expand the word at run time
	// ($VAR, ${VAR}, a glob, ~, a brace list), so its final value is unknown
	// here. Kept verbatim it expands the same way in the rewritten command.
	Dynamic bool
}

// maxLine bounds the input; a launch command is never this long.
const maxLine = 1 << 16

// Tokenize splits one shell command line into words. A backslash-newline
// continues the line, as in a script; a newline anywhere else ends the
// command, so several lines (several commands) are refused.
func Tokenize(line string) ([]Word, error) {
	if len(line) > maxLine {
		return nil, fmt.Errorf("the command is %d bytes long; pass one launch command", len(line))
	}
	if strings.IndexByte(line, 0) >= 0 {
		return nil, fmt.Errorf("the command contains a NUL byte")
	}
	t := tokenizer{s: line}
	return t.run()
}

type tokenizer struct {
	s       string
	i       int
	words   []Word
	raw     strings.Builder
	val     strings.Builder
	inWord  bool
	dynamic bool
}

func (t *tokenizer) flush() {
	if t.inWord {
		t.words = append(t.words, Word{Raw: t.raw.String(), Value: t.val.String(), Dynamic: t.dynamic})
	}
	t.raw.Reset()
	t.val.Reset()
	t.inWord, t.dynamic = false, false
}

func (t *tokenizer) lit(raw, val string) {
	t.inWord = true
	t.raw.WriteString(raw)
	t.val.WriteString(val)
}

// refusals names the unquoted characters that make a line more than one
// simple command.
var refusals = map[byte]string{
	'|': "a pipe (|) or || list", '&': "a background job (&) or && list", ';': "a command list (;)",
	'<': "a redirection (<)", '>': "a redirection (>)", '(': "a subshell or function (()", ')': "a subshell (())",
	'`': "command substitution (`…`)",
}

func (t *tokenizer) run() ([]Word, error) {
	for t.i < len(t.s) {
		c := t.s[t.i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			t.flush()
			t.i++
		case c == '\n':
			t.flush()
			if strings.TrimSpace(t.s[t.i:]) != "" {
				return nil, fmt.Errorf("the text holds several lines (several commands); pass the launch command alone (a line may end in \\ to continue)")
			}
			t.i = len(t.s)
		case c == '\\':
			if t.i+1 >= len(t.s) {
				return nil, fmt.Errorf("the command ends in a lone backslash")
			}
			if t.s[t.i+1] == '\n' { // line continuation: nothing at all
				t.i += 2
				continue
			}
			t.lit(t.s[t.i:t.i+2], t.s[t.i+1:t.i+2])
			t.i += 2
		case c == '\'':
			end := strings.IndexByte(t.s[t.i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("a single quote is not closed")
			}
			t.lit(t.s[t.i:t.i+end+2], t.s[t.i+1:t.i+1+end])
			t.i += end + 2
		case c == '"':
			if err := t.double(); err != nil {
				return nil, err
			}
		case c == '$':
			if err := t.dollar(false); err != nil {
				return nil, err
			}
		case c == '#' && !t.inWord:
			nl := strings.IndexByte(t.s[t.i:], '\n')
			if nl < 0 || strings.TrimSpace(t.s[t.i+nl:]) == "" {
				t.i = len(t.s)
				continue
			}
			return nil, fmt.Errorf("the text holds several lines (several commands); pass the launch command alone")
		case refusals[c] != "":
			return nil, fmt.Errorf("the command uses %s; ncclwiz rewrites one simple launch command — pass the torchrun/accelerate/deepspeed/python part alone", refusals[c])
		default:
			switch c {
			case '*', '?', '[':
				t.dynamic = true // a glob: expanded by the shell
			case '{':
				t.dynamic = true // brace expansion may make several words
			case '~':
				if !t.inWord {
					t.dynamic = true
				}
			}
			t.lit(t.s[t.i:t.i+1], t.s[t.i:t.i+1])
			t.i++
		}
	}
	t.flush()
	if len(t.words) == 0 {
		return nil, fmt.Errorf("the command is empty")
	}
	return t.words, nil
}

// double reads a "…" string: \" \\ \$ \` and \newline are escapes; $VAR and
// ${VAR} are kept (the word becomes dynamic); $( and ` are refused.
func (t *tokenizer) double() error {
	start := t.i
	t.inWord = true
	t.raw.WriteByte('"')
	t.i++
	for t.i < len(t.s) {
		c := t.s[t.i]
		switch c {
		case '"':
			t.raw.WriteByte('"')
			t.i++
			return nil
		case '\\':
			if t.i+1 < len(t.s) && strings.IndexByte("\"\\$`\n", t.s[t.i+1]) >= 0 {
				t.raw.WriteString(t.s[t.i : t.i+2])
				if t.s[t.i+1] != '\n' {
					t.val.WriteByte(t.s[t.i+1])
				}
				t.i += 2
				continue
			}
		case '`':
			return fmt.Errorf("the command uses command substitution (`…`); expand it first")
		case '$':
			if err := t.dollar(true); err != nil {
				return err
			}
			continue
		}
		t.raw.WriteByte(c)
		t.val.WriteByte(c)
		t.i++
	}
	return fmt.Errorf("a double quote is not closed (%s)", clip(t.s[start:]))
}

// dollar reads $NAME, ${NAME}, $1, $@ …: kept verbatim, word marked dynamic.
// $(…), $((…)), ${x:-…} and $'…' are refused.
func (t *tokenizer) dollar(inDouble bool) error {
	rest := t.s[t.i+1:]
	switch {
	case rest == "":
		t.lit("$", "$") // a lone trailing $ is literal
		t.i++
		return nil
	case rest[0] == '(':
		return fmt.Errorf("the command uses command substitution ($(…)); expand it first")
	case rest[0] == '\'' && !inDouble:
		return fmt.Errorf("the command uses $'…' quoting; write the argument with plain quotes")
	case rest[0] == '{':
		end := strings.IndexByte(rest, '}')
		if end < 0 || !isName(rest[1:end]) {
			return fmt.Errorf("the command uses a parameter expansion ncclwiz does not follow (%s); write the value out", clip("$"+rest))
		}
		t.expansion("$" + rest[:end+1])
		return nil
	case isNameStart(rest[0]):
		n := 1
		for n < len(rest) && isNameChar(rest[n]) {
			n++
		}
		t.expansion("$" + rest[:n])
		return nil
	case strings.IndexByte("0123456789@*#?$!-", rest[0]) >= 0:
		t.expansion("$" + rest[:1])
		return nil
	}
	t.lit("$", "$") // "$" followed by something else is literal
	t.i++
	return nil
}

func (t *tokenizer) expansion(s string) {
	t.lit(s, s)
	t.dynamic = true
	t.i += len(s)
}

func isNameStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isNameChar(c byte) bool  { return isNameStart(c) || (c >= '0' && c <= '9') }

func isName(s string) bool {
	if s == "" || !isNameStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isNameChar(s[i]) {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// FromArgv turns arguments the user's shell already split (after
// `ncclwiz fallback --`) into words; each is quoted for display so that the
// printed command passes the very same strings again.
func FromArgv(argv []string) []Word {
	out := make([]Word, len(argv))
	for i, a := range argv {
		out[i] = Word{Raw: Quote(a), Value: a}
	}
	return out
}

// Quote is the one shell quoter (internal/shellquote): it also quotes a
// leading = (zsh expands =cmd to a path), ^ and :=, which a bare-word test
// of POSIX sh alone lets through.
func Quote(s string) string { return shellquote.Quote(s) }
