package explain

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ncclwiz/ncclwiz/envvars"
	"github.com/ncclwiz/ncclwiz/guides"
)

var (
	libOnce sync.Once
	libReal *guides.Library
	libErr  error
)

// realLibrary is the embedded guides library (the signatures users get).
func realLibrary(t testing.TB) *guides.Library {
	t.Helper()
	libOnce.Do(func() { libReal, libErr = guides.Load() })
	if libErr != nil {
		t.Fatalf("guides.Load: %v", libErr)
	}
	return libReal
}

func testExplainer(t testing.TB) *Explainer {
	t.Helper()
	e, err := New(Options{Library: realLibrary(t)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// signatureSamples reads the guides' sample lines for a signature:
// positives, and negatives (lines starting with "!").
func signatureSamples(t testing.TB, id string) (pos, neg []string) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "guides", "testdata", "signatures", id+".txt"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "!"):
			neg = append(neg, l[1:])
		default:
			pos = append(pos, l)
		}
	}
	return pos, neg
}

func sampleLines(t testing.TB, id string) []string {
	p, _ := signatureSamples(t, id)
	return p
}

func negativeLines(t testing.TB, id string) []string {
	_, n := signatureSamples(t, id)
	return n
}

// analyze runs e on texts, one input per text (named rank<i>.log when
// there are several, so file names carry the rank).
func analyze(t testing.TB, e *Explainer, texts ...string) *Report {
	t.Helper()
	var in []Input
	for i, s := range texts {
		name := "test.log"
		if len(texts) > 1 {
			name = "rank" + itoa(i) + ".log"
		}
		in = append(in, Input{Name: name, Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(s)), nil }})
	}
	r, err := e.Analyze(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func diagIDs(r *Report) []string {
	var out []string
	for _, d := range r.Diagnoses {
		out = append(out, d.ID)
	}
	return out
}

func noteIDs(r *Report) []string {
	var out []string
	for _, n := range r.Notes {
		out = append(out, n.ID)
	}
	return out
}

func rootOf(r *Report) *Diagnosis {
	for i := range r.Diagnoses {
		if r.Diagnoses[i].RootCause {
			return &r.Diagnoses[i]
		}
	}
	return nil
}

func findDiag(r *Report, id string) *Diagnosis {
	for i := range r.Diagnoses {
		if r.Diagnoses[i].ID == id {
			return &r.Diagnoses[i]
		}
	}
	return nil
}

var reEnvName = regexp.MustCompile(`\b(?:NCCL|TORCH|CUDA)_[A-Z0-9_]+\b`)

// checkVarsSuggestible fails when advice names an environment variable
// ncclwiz may not recommend (envvars table).
func checkVarsSuggestible(t testing.TB, texts []string) {
	t.Helper()
	for _, s := range texts {
		for _, name := range reEnvName.FindAllString(s, -1) {
			if v, ok := envvars.Lookup(name); !ok || !v.Suggestible() {
				t.Errorf("advice names %s, which is not a suggestible variable: %q", name, s)
			}
		}
	}
}

// writeJSON encodes a report as explain/render.WriteJSON does (the
// renderer imports this package; its tests check the plain output).
func writeJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}
