package cli

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Issue 25 item 12: the wizard's log field takes a path the way a user
// gives it — quoted (a dragged-in file), with escaped spaces, under ~, a
// glob, a log directory — and Tab completes it.
func TestFieldPathsAndCompletion(t *testing.T) {
	dir := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("log\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	spaced := mk("my run.log")
	r0, r1 := mk("logs/rank0.log"), mk("logs/rank1.log")
	nested := mk("tlogs/run7/attempt_0/3/stderr.log")
	mk("tlogs/.hidden")
	for _, c := range []struct {
		field string
		want  []string
	}{
		{"'" + spaced + "'", []string{spaced}},
		{`"` + spaced + `"  `, []string{spaced}},
		{filepath.Join(dir, `my\ run.log`), []string{spaced}},
		{"~/my run.log", []string{spaced}},
		{filepath.Join(dir, "logs/*.log"), []string{r0, r1}},
		{filepath.Join(dir, "tlogs"), []string{nested}},
	} {
		got, err := fieldPaths(c.field, dir)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %q %v, want %q", c.field, got, err, c.want)
		}
	}
	if _, err := fieldPaths(filepath.Join(dir, "nope/*.log"), dir); err == nil {
		t.Error("a glob matching nothing is not an error")
	}
	if got, cs := completePath(filepath.Join(dir, "my"), dir); got != filepath.Join(dir, `my\ run.log`) || cs != nil {
		t.Errorf("complete my: %q %q", got, cs)
	}
	if got, cs := completePath(filepath.Join(dir, "logs/r"), dir); got != filepath.Join(dir, "logs/rank") || len(cs) != 2 {
		t.Errorf("complete logs/r: %q %q", got, cs)
	}
	if got, _ := completePath(filepath.Join(dir, "tl"), dir); got != filepath.Join(dir, "tlogs")+"/" {
		t.Errorf("complete a directory: %q", got)
	}
	// Names that differ inside a multi-byte character (本 and 木 share
	// their first two bytes): the completion stops before that character,
	// never in the middle of it (the field got U+FFFD twice).
	mk("zh/日志本.log")
	mk("zh/日志木.log")
	if got, cs := completePath(filepath.Join(dir, "zh/日"), dir); got != filepath.Join(dir, "zh/日志") || len(cs) != 2 {
		t.Errorf("complete zh/日: %q %q", got, cs)
	}
}
