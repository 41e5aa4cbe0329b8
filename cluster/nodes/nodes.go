// Package nodes turns what the user names (--hosts, --hostfile, a Slurm
// node list) into the list of nodes to check.
package nodes

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/internal/saferead"
)

// MaxNodes bounds a node list so a typo like node[1-99999999] is refused
// instead of exhausting memory.
const MaxNodes = 100000

// ParseHosts splits a comma- or space-separated host list; each entry may
// itself be a Slurm-style range (gpu[01-04]). The nodes are counted before
// any is expanded, so a short list that names millions is refused without
// building it (a 509-byte list asked for 3.7 million nodes and 394 MB).
func ParseHosts(list string) ([]string, error) {
	exprs := splitTop(list)
	if err := countAll(exprs); err != nil {
		return nil, err
	}
	var out []string
	for _, f := range exprs {
		hs, err := Expand(f)
		if err != nil {
			return nil, err
		}
		out = append(out, hs...)
	}
	return dedupe(out)
}

// countAll validates every expression and refuses the list when together
// they name more than MaxNodes (before deduplication: a list that repeats
// one range a million times is refused too).
func countAll(exprs []string) error {
	total := 0
	for _, e := range exprs {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if err := validName(e); err != nil {
			return err
		}
		n, err := Count(e)
		if err != nil {
			return err
		}
		if total += n; total > MaxNodes {
			return fmt.Errorf("the list names more than %d nodes; nothing was expanded", MaxNodes)
		}
	}
	return nil
}

// Count is the number of names expr expands to, computed without expanding
// it; more than MaxNodes is an error (the product of bracket groups is
// capped before it can overflow).
func Count(expr string) (int, error) {
	n := 1
	for rest := expr; rest != ""; {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			if strings.IndexByte(rest, ']') >= 0 {
				return 0, fmt.Errorf("host %q: ']' without '['", expr)
			}
			break
		}
		closeAt := strings.IndexByte(rest[open:], ']')
		if closeAt < 0 {
			return 0, fmt.Errorf("host %q: '[' without ']'", expr)
		}
		closeAt += open
		body := rest[open+1 : closeAt]
		rest = rest[closeAt+1:]
		group := 0
		for _, part := range strings.Split(body, ",") {
			a, b, err := bounds(expr, part)
			if err != nil {
				return 0, err
			}
			if group += b - a + 1; group > MaxNodes {
				return 0, fmt.Errorf("host %q: more than %d nodes", expr, MaxNodes)
			}
		}
		if n *= group; n > MaxNodes {
			return 0, fmt.Errorf("host %q: more than %d nodes", expr, MaxNodes)
		}
	}
	return n, nil
}

// bounds reads one part of a bracket group: N or N-M with N <= M. A
// number too long for an int is a bad range, not a wrap-around.
func bounds(expr, part string) (int, int, error) {
	lo, hi, found := strings.Cut(part, "-")
	if !found {
		hi = lo
	}
	a, errA := strconv.Atoi(lo)
	b, errB := strconv.Atoi(hi)
	switch {
	case errA == nil && errors.Is(errB, strconv.ErrRange), errA == nil && errB == nil && a >= 0 && b-a >= MaxNodes:
		return 0, 0, fmt.Errorf("host %q: more than %d nodes", expr, MaxNodes)
	case errA != nil || errB != nil || a < 0 || b < a:
		return 0, 0, fmt.Errorf("host %q: bad range %q (want N or N-M with N <= M)", expr, part)
	}
	return a, b, nil
}

// maxHostfile bounds a hostfile: MaxNodes names of a hundred bytes.
const maxHostfile = 16 << 20

// ReadHostfile reads one host per line. Blank lines and # comments are
// skipped; MPI-style trailing words (slots=8, max_slots=8) and pdsh/
// DeepSpeed-style "host slots=8" are ignored after the first word. The
// file is read through saferead: a regular file or a pipe (--hostfile
// <(…)), at most 16 MiB, never a device, and ctx ends a read that waits.
func ReadHostfile(ctx context.Context, path string) ([]string, error) {
	b, err := saferead.File(ctx, path, saferead.Options{Limit: maxHostfile, Pipes: true, FollowLinks: true})
	if err != nil {
		return nil, fmt.Errorf("read hostfile: %w", err)
	}
	hs, err := parseHostfile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("hostfile %s: %w", path, err)
	}
	return hs, nil
}

func parseHostfile(r io.Reader) ([]string, error) {
	var exprs []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxHostfile)
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
		if err := validName(fs[0]); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if _, err := Count(fs[0]); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		exprs = append(exprs, fs[0])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(exprs) == 0 {
		return nil, fmt.Errorf("no hosts in it")
	}
	if err := countAll(exprs); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range exprs {
		hs, err := expand(e)
		if err != nil {
			return nil, err
		}
		out = append(out, hs...)
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
	if _, err := Count(expr); err != nil {
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
		a, b, err := bounds(expr, part)
		if err != nil {
			return nil, err
		}
		lo, _, _ := strings.Cut(part, "-")
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
