package guides

import (
	"strings"
	"testing"
	"testing/fstest"
)

const okGuide = `---
id: %ID%
title: "A title"
summary: "A summary."
lang: %LANG%
tags: [shm]
signatures:
  - id: sig-%ID%
    pattern: 'failed to extend (/dev/shm/nccl-\S+) to (\d+) bytes'
    role: cause
    fields: [path, bytes]
checks: [shm.mount]
fixes: [shm.cleanup]
related: []
sources:
  - "a source"
---
## Symptom

Body text.
`

func guideText(id, lang string) string {
	return strings.NewReplacer("%ID%", id, "%LANG%", lang).Replace(okGuide)
}

func TestLoadFSErrorsNameTheFile(t *testing.T) {
	cases := []struct {
		name    string
		files   map[string]string
		wantErr []string // substrings of the error
	}{
		{"no front matter", map[string]string{"c/en/a.md": "# hi\n"}, []string{"c/en/a.md", "no front matter"}},
		{"unclosed front matter", map[string]string{"c/en/a.md": "---\nid: a\n"}, []string{"c/en/a.md", "not closed"}},
		{"bad yaml", map[string]string{"c/en/a.md": "---\nid: [a\n---\nbody\n"}, []string{"c/en/a.md", "front matter"}},
		{"unknown field", map[string]string{"c/en/a.md": strings.Replace(guideText("a", "en"), "tags:", "tagz:", 1)}, []string{"c/en/a.md", "tagz"}},
		{"id mismatch", map[string]string{"c/en/b.md": guideText("a", "en")}, []string{"c/en/b.md", "does not match"}},
		{"lang mismatch", map[string]string{"c/en/a.md": guideText("a", "zh")}, []string{"c/en/a.md", "lang"}},
		{"missing title", map[string]string{"c/en/a.md": strings.Replace(guideText("a", "en"), `title: "A title"`, `title: ""`, 1)}, []string{"c/en/a.md", "title"}},
		{"missing sources", map[string]string{"c/en/a.md": strings.Replace(guideText("a", "en"), "sources:\n  - \"a source\"\n", "", 1)}, []string{"c/en/a.md", "sources"}},
		{"bad regexp", map[string]string{"c/en/a.md": strings.Replace(guideText("a", "en"), `(\d+) bytes`, `(\d+ bytes`, 1)}, []string{"c/en/a.md", "sig-a"}},
		{"bad role", map[string]string{"c/en/a.md": strings.Replace(guideText("a", "en"), "role: cause", "role: root", 1)}, []string{"c/en/a.md", "role"}},
		{"too many fields", map[string]string{"c/en/a.md": strings.Replace(guideText("a", "en"), "[path, bytes]", "[path, bytes, extra]", 1)}, []string{"c/en/a.md", "fields"}},
		{"empty-matching pattern", map[string]string{"c/en/a.md": strings.Replace(guideText("a", "en"), `'failed to extend (/dev/shm/nccl-\S+) to (\d+) bytes'`, `'(x)?(y)?'`, 1)}, []string{"c/en/a.md", "empty line"}},
		{"empty body", map[string]string{"c/en/a.md": strings.SplitAfter(guideText("a", "en"), "---\n")[0] + strings.SplitAfter(guideText("a", "en"), "---\n")[1] + "\n"}, []string{"c/en/a.md", "no body"}},
		{"duplicate signature", map[string]string{
			"c/en/a.md": guideText("a", "en"),
			"c/en/b.md": strings.Replace(guideText("b", "en"), "id: sig-b", "id: sig-a", 1),
		}, []string{"signature sig-a", "c/en/a.md", "c/en/b.md"}},
		{"translation without original", map[string]string{"c/en/a.md": guideText("a", "en"), "c/zh/b.md": strings.Replace(guideText("b", "zh"), "signatures:\n  - id: sig-b\n    pattern: 'failed to extend (/dev/shm/nccl-\\S+) to (\\d+) bytes'\n    role: cause\n    fields: [path, bytes]\n", "", 1)}, []string{"c/zh/b.md", "no English original"}},
		{"translation redeclares signatures", map[string]string{"c/en/a.md": guideText("a", "en"), "c/zh/a.md": guideText("a", "zh")}, []string{"c/zh/a.md", "inherit signatures"}},
		{"unsupported language dir", map[string]string{"c/fr/a.md": guideText("a", "fr")}, []string{"c/fr/a.md", "not a supported language"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for p, s := range tc.files {
				fsys[p] = &fstest.MapFile{Data: []byte(s)}
			}
			_, err := LoadFS(fsys, "c")
			if err == nil {
				t.Fatalf("LoadFS succeeded; want an error containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestTranslationsInheritAndFallBack(t *testing.T) {
	zh := strings.Replace(guideText("a", "zh"), "signatures:\n  - id: sig-a\n    pattern: 'failed to extend (/dev/shm/nccl-\\S+) to (\\d+) bytes'\n    role: cause\n    fields: [path, bytes]\n", "", 1)
	zh = strings.Replace(zh, `title: "A title"`, `title: "标题"`, 1)
	zh = strings.Replace(zh, "checks: [shm.mount]\nfixes: [shm.cleanup]\n", "", 1)
	fsys := fstest.MapFS{
		"c/en/a.md": {Data: []byte(guideText("a", "en"))},
		"c/en/b.md": {Data: []byte(strings.Replace(guideText("b", "en"), "\n", "\r\n", -1))},
		"c/zh/a.md": {Data: []byte(zh)},
	}
	l, err := LoadFS(fsys, "c")
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range []string{"zh", "zh-CN", "zh_CN.UTF-8"} {
		g, ok := l.Get("a", lang)
		if !ok || g.Title != "标题" || g.Lang != "zh" {
			t.Fatalf("Get(a, %s) = %+v", lang, g)
		}
		if len(g.Signatures) != 1 || g.Signatures[0].Re == nil || len(g.Checks) != 1 || g.Fixes[0] != "shm.cleanup" {
			t.Errorf("zh guide did not inherit metadata: %+v", g)
		}
	}
	if g, ok := l.Get("b", "zh"); !ok || g.Lang != "en" {
		t.Errorf("b in zh should fall back to English, got %+v", g)
	}
	if g, _ := l.Get("b", "en"); strings.Contains(g.Body, "\r") {
		t.Errorf("CRLF kept in body: %q", g.Body)
	}
	if len(l.Signatures()) != 2 {
		t.Errorf("signatures = %d, want 2 (translations add none)", len(l.Signatures()))
	}
	if g, ok := l.BySignature("sig-b", "zh"); !ok || g.ID != "b" {
		t.Errorf("BySignature(sig-b) = %v %v", g, ok)
	}
	if _, ok := l.BySignature("nope", "en"); ok {
		t.Error("BySignature(nope) found something")
	}
	if !l.Translated("a", "zh") || l.Translated("b", "zh") {
		t.Error("Translated is wrong")
	}
}

func TestNormalizeLang(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "zh": "zh", "ZH": "zh", "zh-CN": "zh", "zh_TW.UTF-8": "zh", "en_US.UTF-8": "en",
		"C.UTF-8": "", "POSIX": "", "fr_FR": "", "zhx": "",
	} {
		if got := NormalizeLang(in); got != want {
			t.Errorf("NormalizeLang(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSearchAndSuggest(t *testing.T) {
	fsys := fstest.MapFS{}
	for id, text := range map[string]string{
		"shm-no-space":    "The /dev/shm tmpfs is full.",
		"socket-iface":    "NCCL_SOCKET_IFNAME names no interface.",
		"pytorch-timeout": "The watchdog timeout; 共享内存 is not involved.",
	} {
		g := strings.Replace(guideText(id, "en"), "Body text.", text, 1)
		fsys["c/en/"+id+".md"] = &fstest.MapFile{Data: []byte(g)}
	}
	l, err := LoadFS(fsys, "c")
	if err != nil {
		t.Fatal(err)
	}
	ids := func(gs []*Guide) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.ID)
		}
		return out
	}
	for q, want := range map[string]string{
		"tmpfs full":         "shm-no-space",
		"/dev/shm":           "shm-no-space",
		"NCCL_SOCKET_IFNAME": "socket-iface",
		"WATCHDOG":           "pytorch-timeout",
		"共享内存":               "pytorch-timeout",
	} {
		got := ids(l.Search(q, "en"))
		if len(got) != 1 || got[0] != want {
			t.Errorf("Search(%q) = %v, want [%s]", q, got, want)
		}
	}
	if got := l.Search("tmpfs watchdog", "en"); len(got) != 0 {
		t.Errorf("all words must match; got %v", ids(got))
	}
	if got := l.Search("  ", "en"); got != nil {
		t.Errorf("empty query matched %v", ids(got))
	}
	if got := l.Suggest("shm-no-spce", 3); len(got) == 0 || got[0] != "shm-no-space" {
		t.Errorf("Suggest(shm-no-spce) = %v", got)
	}
	if got := l.Suggest("watchdog", 3); len(got) == 0 || got[0] != "pytorch-timeout" {
		t.Errorf("Suggest(watchdog) = %v", got)
	}
}

func TestLinksAndDocument(t *testing.T) {
	body := "See [the shm guide](guide:shm-no-space) and [x](guide:a-b).\n"
	if got := Links(body); strings.Join(got, ",") != "shm-no-space,a-b" {
		t.Errorf("Links = %v", got)
	}
	g := &Guide{Title: "T", Body: body, Sources: []string{"s1"}, Lang: "en"}
	doc := g.Document()
	for _, want := range []string{"# T\n", "the shm guide (`ncclwiz guides shm-no-space`)", "## Sources", "- s1"} {
		if !strings.Contains(doc, want) {
			t.Errorf("Document() lacks %q:\n%s", want, doc)
		}
	}
}
