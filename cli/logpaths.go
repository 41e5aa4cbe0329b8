package cli

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// Paths to logs as users give them (issue 25 item 12): a directory (such
// as torchrun's --log-dir, rank files nested under run and attempt
// directories), and in the wizard's field also what a shell would take —
// a quoted path (terminals quote a dragged-in file), backslash-escaped
// spaces, ~, a glob.

// maxLogFiles bounds what one directory or glob gives: a log directory
// has a few files per rank, not thousands.
const maxLogFiles = 1024

// maxLogDepth is how deep a log directory is searched (torchrun's
// LOG_DIR/RUN_ID/attempt_N/RANK/stdout.log is four levels).
const maxLogDepth = 6

// logsIn lists the files of a log directory, sorted: regular files,
// hidden ones and hidden directories left out.
func logsIn(dir string) ([]string, error) {
	var out []string
	root := filepath.Clean(dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // an unreadable subdirectory: the others still count
		}
		name := d.Name()
		if p != root && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(root, p); rel != "." && strings.Count(rel, string(filepath.Separator))+1 > maxLogDepth {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			out = append(out, p)
			if len(out) > maxLogFiles {
				return fmt.Errorf("%s holds more than %d files; name the log files (ncclwiz explain %s/*.log)", dir, maxLogFiles, strings.TrimSuffix(dir, "/"))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no files to explain", dir)
	}
	sort.Strings(out)
	return out, nil
}

// expandLogArg is one argument as files: a directory's files, else itself.
func expandLogArg(p string) ([]string, error) {
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return logsIn(p)
	}
	return []string{p}, nil
}

// fieldPaths reads the wizard's log field as a shell would read one word:
// quotes removed, backslash escapes undone, ~ expanded, a glob matched.
// The path as typed comes first when it exists (a file named "a*.log").
func fieldPaths(field, home string) ([]string, error) {
	p := shellWord(strings.TrimSpace(field))
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home != "" {
			p = home + p[1:]
		}
	}
	if _, err := os.Lstat(p); err != nil && strings.ContainsAny(p, "*?[") {
		ms, gerr := filepath.Glob(p)
		if gerr != nil {
			return nil, fmt.Errorf("%s: %v", p, gerr)
		}
		if len(ms) == 0 {
			return nil, fmt.Errorf("no file matches %s", p)
		}
		if len(ms) > maxLogFiles {
			return nil, fmt.Errorf("%s matches %d files; more than %d is not a job's logs", p, len(ms), maxLogFiles)
		}
		var out []string
		for _, m := range ms {
			fs, err := expandLogArg(m)
			if err != nil {
				return nil, err
			}
			out = append(out, fs...)
		}
		return out, nil
	}
	return expandLogArg(p)
}

// shellWord undoes a shell's quoting of one word: '…', "…" (with \" and
// \\ inside), and backslash escapes outside quotes. Unbalanced quotes are
// taken literally.
func shellWord(s string) string {
	var b strings.Builder
	var quote rune
	esc := false
	for _, r := range s {
		switch {
		case esc:
			b.WriteRune(r)
			esc = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				b.WriteRune(r)
			}
		case r == '\\' && quote != '\'':
			esc = true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				b.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote = r
		default:
			b.WriteRune(r)
		}
	}
	if quote != 0 || esc {
		return s // not a shell word: as typed
	}
	return b.String()
}

// completePath completes the last path in the wizard's field (Tab): the
// longest common continuation of the names that start with it, "/" after
// a directory, spaces escaped as a shell would; and the names to choose
// among when there are several.
func completePath(field, home string) (string, []string) {
	word := shellWord(field)
	expanded := word
	if strings.HasPrefix(word, "~/") && home != "" {
		expanded = home + word[1:]
	}
	dir, base := filepath.Split(expanded)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return field, nil
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, base) && (strings.HasPrefix(base, ".") || !strings.HasPrefix(n, ".")) {
			if e.IsDir() {
				n += "/"
			}
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return field, nil
	}
	common := names[0]
	for _, n := range names[1:] {
		for !strings.HasPrefix(n, common) {
			common = common[:len(common)-1]
		}
	}
	// Never end inside a character: names that differ in a multi-byte
	// rune's last bytes share its first ones.
	for i := 1; i < utf8.UTFMax && i <= len(common); i++ {
		if tail := common[len(common)-i:]; utf8.RuneStart(tail[0]) {
			if !utf8.FullRuneInString(tail) {
				common = common[:len(common)-i]
			}
			break
		}
	}
	typedDir := word[:len(word)-len(base)]
	out := escapeWord(typedDir + common)
	if len(names) == 1 {
		return out, nil
	}
	return out, names
}

// escapeWord escapes what a shell word cannot hold bare.
func escapeWord(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(" \t'\"\\$`*?[]()&;|<>!#", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
