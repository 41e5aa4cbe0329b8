package render_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ncclwiz/ncclwiz/explain"
	"github.com/ncclwiz/ncclwiz/explain/render"
	"github.com/ncclwiz/ncclwiz/guides"
)

var (
	once sync.Once
	exp  *explain.Explainer
	err  error
)

func explainer(t *testing.T) *explain.Explainer {
	t.Helper()
	once.Do(func() {
		var lib *guides.Library
		if lib, err = guides.Load(); err == nil {
			exp, err = explain.New(explain.Options{Library: lib})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

func analyze(t *testing.T, name, text string) *explain.Report {
	t.Helper()
	return analyzeInputs(t, []explain.Input{{Name: name,
		Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(text)), nil }}})
}

func analyzeInputs(t *testing.T, in []explain.Input) *explain.Report {
	t.Helper()
	r, err := explainer(t).Analyze(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var reANSI = regexp.MustCompile("\x1b\\[[0-9;]*m")

func plain(t *testing.T, r *explain.Report, o render.PlainOptions) string {
	t.Helper()
	var b strings.Builder
	if err := render.WritePlain(&b, r, o); err != nil {
		t.Fatal(err)
	}
	return reANSI.ReplaceAllString(b.String(), "")
}

// Plain output names a cause outside NCCL as such and does not repeat it
// as the "first error".
func TestNotNCCLRendering(t *testing.T) {
	r := analyze(t, "test.log", "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"/w/data.py\", line 58, in get\n[rank1]:     x = s[\"labels\"]\n[rank1]: KeyError: 'labels'\n"+
		"[rank0]:[E0312 14:13:07.55 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=62, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.")
	out := plain(t, r, render.PlainOptions{Width: 100})
	for _, want := range []string{"Root cause (not NCCL): A Python exception on rank 1 (KeyError in data.py:58)", "knock-on of the root cause", "consequence of python-exception"} {
		if !strings.Contains(out, want) {
			t.Errorf("plain output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "First non-NCCL error") {
		t.Errorf("the root is repeated as the first error:\n%s", out)
	}
}

// Every corpus log renders, and a root outside NCCL says so; a root that
// blames a rank names it in the title or the advice.
func TestCorpusRenders(t *testing.T) {
	dir := filepath.Join("..", "testdata", "corpus")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		// A directory is one job's per-rank files.
		files := []string{filepath.Join(dir, ent.Name())}
		if ent.IsDir() {
			files, _ = filepath.Glob(filepath.Join(dir, ent.Name(), "*"))
		}
		var in []explain.Input
		for _, f := range files {
			in = append(in, explain.FileInput(f))
		}
		r := analyzeInputs(t, in)
		out := plain(t, r, render.PlainOptions{Width: 80})
		var root *explain.Diagnosis
		for i := range r.Diagnoses {
			if r.Diagnoses[i].RootCause {
				root = &r.Diagnoses[i]
				break
			}
		}
		if root != nil && root.NotNCCL && !strings.Contains(out, "Root cause (not NCCL):") {
			t.Errorf("%s: plain output does not say the cause is not NCCL:\n%s", ent.Name(), out)
		}
		var js bytes.Buffer
		if err := render.WriteJSON(&js, r); err != nil {
			t.Fatal(err)
		}
	}
}

// Log text is sanitised and secrets are redacted in the plain output.
func TestPlainIsSanitised(t *testing.T) {
	r := analyze(t, "test.log", "disk full at /x\x1b]0;pwned\x07 HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 \u202e\n"+
		"Traceback (most recent call last):\nValueError: \x1b[2Jclear token=s3cr3tvalue\n")
	var b bytes.Buffer
	if err := render.WritePlain(&b, r, render.PlainOptions{Verbose: true}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"\x1b]0", "\x07", "\u202e", "hf_abcdefghij", "s3cr3tvalue", "\x1b[2J"} {
		if strings.Contains(out, bad) {
			t.Errorf("output contains %q", bad)
		}
	}
	if !strings.Contains(out, "[redacted]") {
		t.Errorf("no redaction marker:\n%s", out)
	}
}
