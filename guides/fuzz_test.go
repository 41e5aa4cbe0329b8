package guides

import (
	"strings"
	"testing"
)

// FuzzParse: any file gives a guide or an error, never a panic, and a
// guide that parses has what the library relies on.
func FuzzParse(f *testing.F) {
	f.Add([]byte(guideText("a", "en")))
	f.Add([]byte("---\n---\nbody\n"))
	f.Add([]byte("---\nid: a\ntitle: t\nsummary: s\nsources: [x]\nsignatures:\n  - {id: x, pattern: '(', role: cause}\n---\nbody\n"))
	f.Add([]byte("\ufeff---\r\nid: a\r\n---\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Parse(b)
		if err != nil {
			return
		}
		if !idRe.MatchString(g.ID) || strings.TrimSpace(g.Title) == "" || strings.TrimSpace(g.Summary) == "" ||
			strings.TrimSpace(g.Body) == "" || len(g.Sources) == 0 {
			t.Fatalf("accepted an incomplete guide: %+v", g)
		}
		for _, s := range g.Signatures {
			if s.Re == nil || s.Re.MatchString("") {
				t.Fatalf("signature %s not compiled or matches the empty line", s.ID)
			}
		}
		_ = g.Document()
	})
}
