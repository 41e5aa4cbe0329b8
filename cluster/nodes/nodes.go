// Package nodes turns what the user names (--hosts, --hostfile, a Slurm
// node list) into the list of nodes to check.
package nodes

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxNodes bounds a node list so a typo like node[1-99999999] is refused
// instead of exhausting memory.
const MaxNodes = 100000

// ParseHosts splits a comma- or space-separated host list; each entry may
// itself be a Slurm-style range (gpu[01-04]).
func ParseHosts(list string) ([]string, error) {
	var out []string
	for _, f := range splitTop(list) {
		hs, err := Expand(f)
		if err != nil {
			return nil, err
		}
		out = append(out, hs...)
	}
	return dedupe(out)
}

// ReadHostfile reads one host per line. Blank lines and # comments are
// skipped; MPI-style trailing words (slots=8, max_slots=8) and pdsh/
// DeepSpeed-style "host slots=8" are ignored after the first word.
func ReadHostfile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read hostfile: %w", err)
	}
	defer f.Close()
	hs, err := parseHostfile(f)
	if err != nil {
		return nil, fmt.Errorf("hostfile %s: %w", path, err)
	}
	return hs, nil
}

func parseHostfile(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		fs := strings.Fields(s)
		if len(fs) == 0 {
			continue
		}
		hs, err := Expand(fs[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, hs...)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no hosts in it")
	}
	return dedupe(out)
}

// Expand expands one Slurm-style host expression: "node[01-03,07]" gives
// node01 node02 node03 node07 (zero padding kept); a plain name is itself.
// Several bracket groups multiply (rack[1-2]-n[1-2]).
func Expand(expr string) ([]string, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, nil
	}
	if err := validName(expr); err != nil {
		return nil, err
	}
	return expand(expr)
}

func expand(expr string) ([]string, error) {
	if expr == "" {
		return nil, nil
	}
	open := strings.IndexByte(expr, '[')
	if open < 0 {
		if strings.IndexByte(expr, ']') >= 0 {
			return nil, fmt.Errorf("host %q: ']' without '['", expr)
		}
		return []string{expr}, nil
	}
	closeAt := strings.IndexByte(expr[open:], ']')
	if closeAt < 0 {
		return nil, fmt.Errorf("host %q: '[' without ']'", expr)
	}
	closeAt += open
	prefix, body, rest := expr[:open], expr[open+1:closeAt], expr[closeAt+1:]
	tails, err := expand(rest)
	if err != nil {
		return nil, err
	}
	if rest == "" {
		tails = []string{""}
	}
	var out []string
	for _, part := range strings.Split(body, ",") {
		lo, hi, found := strings.Cut(part, "-")
		if !found {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || a < 0 || b < a {
			return nil, fmt.Errorf("host %q: bad range %q (want N or N-M with N <= M)", expr, part)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		if (b-a+1)*len(tails)+len(out) > MaxNodes {
			return nil, fmt.Errorf("host %q: more than %d nodes", expr, MaxNodes)
		}
		for n := a; n <= b; n++ {
			for _, t := range tails {
				out = append(out, fmt.Sprintf("%s%0*d%s", prefix, width, n, t))
			}
		}
	}
	return out, nil
}

// validName refuses characters that could change an ssh or pdsh command
// line: a host is a name, an address or user@name, nothing else.
func validName(s string) error {
	if strings.HasPrefix(s, "-") {
		return fmt.Errorf("host %q: must not start with '-'", s)
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune(".-_:@[],", r):
		default:
			return fmt.Errorf("host %q: character %q is not allowed in a host name", s, r)
		}
	}
	return nil
}

// splitTop splits on commas and spaces outside brackets.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case (r == ',' || r == ' ' || r == '\t' || r == '\n') && depth == 0:
			if t := strings.TrimSpace(s[start:i]); t != "" {
				out = append(out, t)
			}
			start = i + 1
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

func dedupe(hs []string) ([]string, error) {
	seen := make(map[string]bool, len(hs))
	out := hs[:0]
	for _, h := range hs {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	if len(out) > MaxNodes {
		return nil, fmt.Errorf("%d nodes: more than %d", len(out), MaxNodes)
	}
	return out, nil
}
