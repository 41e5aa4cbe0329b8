package tui

import (
	"fmt"
	"testing/fstest"

	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/guides/render"
	"github.com/ncclwiz/ncclwiz/guideui"
)

// testGuides are a few guides in the library's format: the two /dev/shm
// guides the fake machines' findings name, the hang guide, and two Learn
// steps. Bodies are short and plain, so tests read them on screen.
var testGuides = []struct{ id, title, body string }{
	{"shm-stale-segments", "Orphaned segments in /dev/shm", "## Symptom\n\nline one\n\nthe needle is here\n"},
	{"shm-no-space", "/dev/shm is too small", "## Symptom\n\nfailed to extend\n"},
	{"hang", "My job is hanging", "## Reading each source\n\nhang guide body\n"},
	{"nccl-intro", "What NCCL does", "## Collectives\n\nall-reduce\n"},
	{"reading-nccl-debug", "Reading NCCL_DEBUG", "## INFO lines\n\ntransport lines\n"},
}

// testLibrary loads testGuides through the real parser.
func testLibrary() *guides.Library {
	fsys := fstest.MapFS{}
	for i, g := range testGuides {
		order := 0
		if g.id == "nccl-intro" || g.id == "reading-nccl-debug" {
			order = i
		}
		fsys["content/en/"+g.id+".md"] = &fstest.MapFile{Data: fmt.Appendf(nil,
			"---\nid: %s\ntitle: %q\nsummary: \"about %s\"\nlang: en\norder: %d\nsources:\n  - \"test\"\n---\n%s", g.id, g.title, g.id, order, g.body)}
	}
	lib, err := guides.LoadFS(fsys, "content")
	if err != nil {
		panic(err) // the table above is wrong
	}
	return lib
}

// withGuides connects d to the test library, as cli's wizardDeps does to
// the real one.
func withGuides(d Deps) Deps {
	lib := testLibrary()
	d.Guide = func(id string) (GuideDoc, bool) {
		g, ok := lib.Get(id, "en")
		if !ok {
			return GuideDoc{}, false
		}
		return GuideDoc{ID: g.ID, Title: g.Title, Summary: g.Summary}, true
	}
	d.Browser = func(o guideui.Options) guideui.Model {
		o.Style = render.NoTTY
		return guideui.New(lib, o)
	}
	return d
}
