package catalog

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/guides"
)

func load(t testing.TB) *Catalog {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// signatureIDs are the diagnosis ids the guides declare.
func signatureIDs(t testing.TB) map[string]bool {
	t.Helper()
	lib, err := guides.Load()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, s := range lib.Signatures() {
		ids[s.ID] = true
	}
	return ids
}

// TestEveryMessageHasADiagnosis fails on a message the catalogue neither
// names a cause for nor places in a subsystem (a new NCCL source file, a
// rule that stopped fitting), and on a diagnosis id nobody defines.
func TestEveryMessageHasADiagnosis(t *testing.T) {
	c := load(t)
	sigs := signatureIDs(t)
	known := func(id string) bool { return sigs[id] || c.Known(id) }
	for _, m := range c.Messages {
		switch {
		case m.Cause == "" && m.Subsystem == nil:
			t.Errorf("%s message %q (%s) has no diagnosis: add a rule or a subsystem for its file to catalog.yaml", m.Source, m.Format, m.File)
		case m.Cause != "" && !known(m.Cause):
			t.Errorf("%s message %q names an unknown diagnosis %q", m.Source, m.Format, m.Cause)
		}
		for _, r := range m.values {
			if !known(r.Cause) {
				t.Errorf("value rule %q names an unknown diagnosis %q", r.Value, r.Cause)
			}
		}
	}
	for _, e := range c.Cuda {
		if e.Cause != "" && !known(e.Cause) {
			t.Errorf("CUDA error %d names an unknown diagnosis %q", e.Code, e.Cause)
		}
	}
	lib, _ := guides.Load()
	for _, cs := range c.Causes {
		if _, ok := lib.Get(cs.Guide, guides.English); !ok {
			t.Errorf("cause %s routes to guide %q, which does not exist", cs.ID, cs.Guide)
		}
		if sigs[cs.ID] {
			t.Errorf("cause %s is also a guide signature: declare it once", cs.ID)
		}
	}
	for _, s := range c.Subsystems {
		if _, ok := lib.Get(s.Guide, guides.English); !ok {
			t.Errorf("subsystem %s routes to guide %q, which does not exist", s.Prefix, s.Guide)
		}
	}
}

// TestEveryRuleIsUsed fails on a rule no message fits (a typo, or a
// message that left NCCL).
func TestEveryRuleIsUsed(t *testing.T) {
	c := load(t)
	for _, r := range c.Rules {
		used := false
		for _, m := range c.Messages {
			if !m.IsNCCL() || r.Format != "" && !strings.Contains(m.Format, r.Format) {
				continue
			}
			if r.Value != "" || r.fitsFiles(m) {
				used = true
				break
			}
		}
		if !used {
			t.Errorf("rule %+v fits no NCCL message", r)
		}
	}
}

// sample renders a format with plausible values.
func sample(f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		if i+1 < len(f) && f[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		j := i + 1
		for j < len(f) && strings.IndexByte("-+ #0*.123456789hlLqjzt", f[j]) >= 0 {
			j++
		}
		if j >= len(f) {
			b.WriteString(f[i:])
			break
		}
		switch f[j] {
		case 'd', 'i', 'u':
			b.WriteString("3")
		case 'x', 'X':
			b.WriteString("1a2b")
		case 'p':
			b.WriteString("0x7f01c0")
		case 'f', 'g', 'e':
			b.WriteString("1.5")
		case 'c':
			b.WriteString("x")
		default:
			b.WriteString("sample value")
		}
		i = j
	}
	return b.String()
}

// diagnosisOf names a hit's diagnosis: its cause, or its subsystem.
func diagnosisOf(cause string, s *Subsystem) string {
	if cause != "" {
		return cause
	}
	if s != nil {
		return "subsystem:" + s.Name
	}
	return ""
}

// TestEveryMessageMatchesItsOwnText is the generated test of each row:
// the message rendered with sample values is found again, with the row's
// diagnosis (another row of the same diagnosis may win: NCCL prints some
// texts from several files).
func TestEveryMessageMatchesItsOwnText(t *testing.T) {
	c := load(t)
	for _, m := range c.Messages {
		for i, f := range m.Formats() {
			if m.formats[i].regexp() == nil || m.formats[i].tolerant() == nil {
				_, src, tol := parseFormat(m.formats[i].match, true)
				t.Errorf("%s %q: its regexp %q or %q does not compile", m.Source, f, src, tol)
			}
			text := sample(m.matchText(f))
			q := Query{Text: text, NCCL: m.IsNCCL()}
			if m.IsNCCL() {
				q.File = m.files()[0]
			}
			h, ok := c.Match(q)
			want := diagnosisOf(m.Cause, m.Subsystem)
			if m.IsNCCL() && m.Subsystem != nil {
				if s, ok := c.SubsystemOf(q.File); ok {
					want = diagnosisOf(m.Cause, s)
				}
			}
			switch {
			case !ok:
				t.Errorf("%s %q: its own text %q is not found", m.Source, f, text)
			case h.Message != m && diagnosisOf(h.Cause, h.Subsystem) != want && !valueRefined(m, text):
				t.Errorf("%s %q: its own text is taken by %s %q (%s, want %s)", m.Source, f, h.Message.Source, h.Message.Format, diagnosisOf(h.Cause, h.Subsystem), want)
			}
		}
	}
}

// valueRefined tells a sample whose text a value rule refines.
func valueRefined(m *Message, text string) bool {
	for _, r := range m.values {
		if strings.Contains(text, r.Value) {
			return true
		}
	}
	return false
}

var update = flag.Bool("update", false, "rewrite docs/explain-catalog.md")

// TestDocTable keeps docs/explain-catalog.md the catalogue's table: every
// message with its source, release range and diagnosis.
func TestDocTable(t *testing.T) {
	c := load(t)
	got := DocTable(c)
	path := filepath.Join("..", "..", "docs", "explain-catalog.md")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./explain/catalog -run TestDocTable -update)", err)
	}
	if string(want) != got {
		t.Fatalf("docs/explain-catalog.md is stale: go test ./explain/catalog -run TestDocTable -update")
	}
}

func TestStats(t *testing.T) {
	c := load(t)
	st := c.Stats()
	t.Logf("%+v", st)
	if st.NCCLFormats < 900 || st.NCCLMinors != 27 {
		t.Errorf("nccl.tsv looks truncated: %+v", st)
	}
	srcs := fmt.Sprint(st.Sources)
	for _, s := range []string{"pytorch", "gloo", "openmpi", "slurm", "vllm", "jax/xla", "paddle", "horovod"} {
		if !slices.Contains(st.Sources, s) {
			t.Errorf("no %s messages in %s", s, srcs)
		}
	}
}
