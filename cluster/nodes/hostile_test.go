package nodes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/internal/hostiletest"
)

func TestMain(m *testing.M) {
	hostiletest.Main(map[string]hostiletest.Reader{
		"hostfile": func(ctx context.Context, p string) error {
			_, err := ReadHostfile(ctx, p)
			return err
		},
		"hosts": func(ctx context.Context, p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = ParseHosts(string(b))
			return err
		},
	})
	os.Exit(m.Run())
}

// TestHostileHostfiles (issue 22 items 10-12): --hostfile against every
// hostile input. A pipe is data here (--hostfile <(…) is a pipe): a FIFO
// fed forever must end with the read's deadline, not hang.
func TestHostileHostfiles(t *testing.T) {
	hostiletest.Suite(t, "hostfile", func(t *testing.T) string { return t.TempDir() }, "hosts", []byte("gpu[01-04] slots=8\n"), true)
}

// hostBombs are short host lists and hostfiles that name millions of
// nodes: many ranges, one range repeated, products of bracket groups,
// numbers that overflow an int.
func hostBombs() map[string]string {
	many := make([]string, 40)
	for i := range many {
		many[i] = fmt.Sprintf("n%d[0-99999]", i)
	}
	return map[string]string{
		"40 ranges of 100,000 (the 509-byte list)": strings.Join(many, ","),
		"one range 1,000 times":                    strings.Repeat("gpu[00000-99999],", 1000),
		"a product of four groups":                 "a[0-99]b[0-99]c[0-99]d[0-99]",
		"a product that overflows int64":           strings.Repeat("[0-99999]", 8),
		"a bound past int64":                       "n[0-99999999999999999999999]",
		"50 KB of ranges":                          strings.Repeat("r[0-9999],", 5000),
	}
}

// TestHostListBombs (issue 22 item 12): each list is refused before a
// node is built, in a child that is killed past 512 MiB (before: 394 MB for
// 509 bytes, 40 GB for 50 KB); as a hostfile, one expression a line.
func TestHostListBombs(t *testing.T) {
	for name, list := range hostBombs() {
		t.Run(name, func(t *testing.T) {
			for _, reader := range []string{"hosts", "hostfile"} {
				body := list
				if reader == "hostfile" {
					body = strings.ReplaceAll(list, ",", "\n")
				}
				p := filepath.Join(t.TempDir(), "list")
				if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
				r := hostiletest.Attack(t, reader, p, 1)
				if r.OK != 0 || !strings.Contains(strings.Join(r.Errors, ""), "more than") {
					t.Errorf("%s: %+v", reader, r)
				}
			}
		})
	}
}

// TestCountMatchesExpand: Count is the length of Expand for lists under
// the limit (the two must agree or the limit guards the wrong thing).
func TestCountMatchesExpand(t *testing.T) {
	for _, e := range []string{"a", "gpu[01-03,07]", "rack[1-2]-n[1-3]", "n[8-10]x[1-1]", "r[0-9]-[0-9]-[0-9]"} {
		n, err := Count(e)
		hs, err2 := Expand(e)
		if err != nil || err2 != nil || n != len(hs) {
			t.Errorf("%s: Count %d %v, Expand %d %v", e, n, err, len(hs), err2)
		}
	}
}
