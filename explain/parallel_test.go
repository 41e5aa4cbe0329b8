package explain

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
)

// Several inputs flow through one pipeline whose workers scan chunks of
// different inputs at once; the report must be byte for byte the one read
// one chunk at a time. Small chunk buffers make chunks of neighbouring
// inputs overlap in the workers.
func TestParallelInputsSameReport(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	var jobs [][]string
	ents, err := os.ReadDir(filepath.Join("testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, ent := range ents {
		p := filepath.Join("testdata", "corpus", ent.Name())
		if !ent.IsDir() {
			all = append(all, p)
			continue
		}
		sub, _ := filepath.Glob(filepath.Join(p, "*"))
		sort.Strings(sub)
		jobs = append(jobs, sub)
		all = append(all, sub...)
	}
	if len(jobs) < 3 {
		t.Fatalf("only %d corpus directories", len(jobs))
	}
	jobs = append(jobs, all) // every corpus file as one job: many boundaries
	for _, shape := range []struct {
		name    string
		maxLine int
		size    int
	}{{"default buffers", 0, 0}, {"8 KiB buffers", 4096, 8192}} {
		seq := explainerWith(t, shape.maxLine, pipeShape{workers: 1, buffers: 2, bufSize: shape.size})
		par := explainerWith(t, shape.maxLine, pipeShape{workers: 8, buffers: 8, bufSize: shape.size})
		for _, files := range jobs {
			want, got := reportJSON(t, seq, files), reportJSON(t, par, files)
			if !bytes.Equal(want, got) {
				t.Errorf("%s, %d inputs from %s: parallel report differs from sequential\n--- sequential\n%s\n--- parallel\n%s",
					shape.name, len(files), files[0], want, got)
			}
		}
	}
}

func explainerWith(t *testing.T, maxLine int, p pipeShape) *Explainer {
	t.Helper()
	e, err := New(Options{MaxLineBytes: maxLine, pipe: p})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func reportJSON(t *testing.T, e *Explainer, files []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := writeJSON(&buf, analyzeFiles(t, e, files)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
