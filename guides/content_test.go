package guides_test

// Tests over the real embedded guides (both languages): structure, the
// contract's ids, signatures against their sample lines, links, the ids
// and scenarios guides tell readers to use, and every environment variable
// they name. They run over whatever guide files exist, and fail with the
// file name when one is wrong.

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/scenario"
	"github.com/ncclwiz/ncclwiz/steps"
)

// contractSignatures is the guide → signature table of /work/contracts.md
// (signature ids from nccl-failures.md §2).
var contractSignatures = map[string][]string{
	"shm-no-space":          {"shm-create-nospace", "shm-create-failed"},
	"shm-sigbus":            {"shm-sigbus"},
	"shm-stale-segments":    nil,
	"shm-removeipc":         {"shm-attach-enoent", "shm-unlink-enoent"},
	"shm-cumem-host":        {"shm-attach-size0", "cumem-host-alloc"},
	"watchdog-timeout":      {"watchdog-timeout", "watchdog-seq-status"},
	"heartbeat-monitor":     {"heartbeat-monitor"},
	"device-mapping":        {"barrier-device-unknown", "duplicate-gpu"},
	"socket-interface":      {"no-socket-interface"},
	"socket-connect":        {"socket-connect-failed", "socket-msg-truncated"},
	"consequence-errors":    {"peer-closed", "nccl-remote-error", "nccl-unhandled-system-error", "nccl-unhandled-cuda-error", "proxy-failure", "nccl-async-teardown"},
	"ib-roce":               {"ib-completion-error", "roce-gid"},
	"memlock":               {"ib-memlock"},
	"p2p-acs-iommu":         {"p2p-hang-acs-iommu", "p2p-disabled-nvlink"},
	"consumer-gpu-p2p":      {"accelerate-rtx40"},
	"cuda-driver":           {"cuda-init-failure"},
	"fabric-manager":        {"fabric-manager-not-ready"},
	"nvls":                  {"nvls-alloc-failure"},
	"nvml-visibility":       {"nvml-gpu-not-visible"},
	"nccl-version-mismatch": {"nccl-version-mismatch"},
	"port-clash":            {"bootstrap-mismatch", "master-port-in-use"},
	"rendezvous-timeout":    {"store-rendezvous-timeout"},
	"gpu-oom-init":          {"gpu-oom-init"},
	"fd-exhaustion":         {"fd-exhaustion"},
	"gpu-xid":               {"gpu-xid"},
	"env-deprecated":        {"deprecated-env-name"},
	"stale-ranks":           nil,
}

// addedSignatures are ids beyond the reference's catalogue that real logs
// need: the other ncclGetErrorString codes PyTorch wraps and torchrun's
// failure summary. Published ids stay stable like the contract's.
var addedSignatures = map[string][]string{
	"consequence-errors": {"nccl-invalid-usage", "nccl-internal-error", "nccl-invalid-argument", "torchrun-child-failed"},
}

// learnTrack is the contract's onboarding order.
var learnTrack = []string{"nccl-intro", "reading-nccl-debug", "container-shm", "env-reference", "pytorch-timeouts", "single-gpu-fallback", "multi-node-basics"}

// zhCore are the guides that must exist in Chinese.
var zhCore = []string{"shm-no-space", "container-shm", "pytorch-timeouts", "socket-interface", "single-gpu-fallback", "nccl-intro"}

// contractChecks and contractFixes are the ids of /work/contracts.md; the
// registries add what is implemented beyond them.
var (
	contractChecks = []string{"shm.mount", "shm.segments", "host.container", "host.ipc", "env.nccl", "gpu.inventory", "gpu.processes", "gpu.topology", "gpu.visible", "gpu.fabric", "nccl.stack", "net.interfaces", "net.rendezvous", "net.rdma", "host.pcie"}
	contractFixes  = []string{"shm.cleanup", "proc.stale", "shm.remount", "shm.persist", "container.shm", "env.export", "launch.single-gpu", "systemd.removeipc", "limits.memlock"}
)

// Section headings every failure guide has, in order, per language (a
// heading may go on, e.g. "## Fix (safest first)").
var failureSections = map[string][]string{
	"en": {"## Symptom", "## Why it happens", "## Confirm", "## Fix", "## Verify"},
	"zh": {"## 症状", "## 原因", "## 确认", "## 修复", "## 验证"},
}

var tryItHeading = map[string]string{"en": "## Try it", "zh": "## 动手试试"}

func load(t *testing.T) *guides.Library {
	t.Helper()
	l, err := guides.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return l
}

// all returns every guide file in both languages (no fallbacks).
func allGuides(l *guides.Library) []*guides.Guide {
	var out []*guides.Guide
	for _, lang := range guides.Languages {
		for _, g := range l.List(lang) {
			if g.Lang == lang {
				out = append(out, g)
			}
		}
	}
	return out
}

func TestEveryContractGuideExists(t *testing.T) {
	l := load(t)
	for _, id := range append(mapsKeys(contractSignatures), learnTrack...) {
		if _, ok := l.Get(id, "en"); !ok {
			t.Errorf("guide %s is missing (guides/content/en/%s.md)", id, id)
		}
	}
	if n := len(l.IDs()); n < 30 {
		t.Errorf("%d guides; the library promises at least 30", n)
	}
}

func mapsKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestGuidesHaveRequiredFieldsAndSections(t *testing.T) {
	l := load(t)
	for _, g := range allGuides(l) {
		if len(g.Tags) == 0 {
			t.Errorf("%s: tags are required", g.File)
		}
		for _, s := range g.Sources {
			if strings.TrimSpace(s) == "" {
				t.Errorf("%s: empty source", g.File)
			}
		}
		if strings.HasPrefix(strings.TrimSpace(g.Body), "# ") {
			t.Errorf("%s: the body must not repeat the title as a level-1 heading", g.File)
		}
		if g.Order > 0 {
			continue
		}
		var heads []string
		for _, line := range strings.Split(g.Body, "\n") {
			if strings.HasPrefix(line, "## ") {
				heads = append(heads, line)
			}
		}
		pos := -1
		for _, want := range failureSections[g.Lang] {
			i := slices.IndexFunc(heads, func(h string) bool { return strings.HasPrefix(h, want) })
			switch {
			case i < 0:
				t.Errorf("%s: missing section %q", g.File, want)
			case i < pos:
				t.Errorf("%s: section %q is out of order", g.File, want)
			default:
				pos = i
			}
		}
	}
}

func TestLearnTrack(t *testing.T) {
	l := load(t)
	for _, lang := range guides.Languages {
		var got []string
		for _, g := range l.Learn(lang) {
			got = append(got, g.ID)
		}
		if !slices.Equal(got, learnTrack) {
			t.Errorf("Learn(%s) = %v, want %v", lang, got, learnTrack)
		}
	}
	for i, id := range learnTrack {
		for _, lang := range guides.Languages {
			g, ok := l.Get(id, lang)
			if !ok {
				continue
			}
			if g.Order != i+1 {
				t.Errorf("%s: order %d, want %d", g.File, g.Order, i+1)
			}
			h := tryItHeading[g.Lang]
			j := strings.LastIndex(g.Body, "\n"+h+"\n")
			if j < 0 {
				t.Errorf("%s: no %q section", g.File, h)
				continue
			}
			tail := g.Body[j:]
			if strings.Contains(tail[1:], "\n## ") {
				t.Errorf("%s: %q must be the last section", g.File, h)
			}
			if !strings.Contains(tail, "`ncclwiz ") {
				t.Errorf("%s: %q names no ncclwiz command", g.File, h)
			}
		}
		prev, next := l.LearnNeighbours(id, "en")
		if (i == 0) != (prev == nil) || (i == len(learnTrack)-1) != (next == nil) {
			t.Errorf("LearnNeighbours(%s) = %v, %v", id, prev, next)
		}
	}
}

func TestSignaturesMatchTheContractAndTheirSamples(t *testing.T) {
	l := load(t)
	declared := map[string]string{}
	for _, s := range l.Signatures() {
		declared[s.ID] = s.GuideID
	}
	for id, want := range contractSignatures {
		g, ok := l.Get(id, "en")
		if !ok {
			continue // reported by TestEveryContractGuideExists
		}
		want = append(slices.Clone(want), addedSignatures[id]...)
		var got []string
		for _, s := range g.Signatures {
			got = append(got, s.ID)
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("%s declares signatures %v, the contract says %v", g.File, got, want)
		}
	}
	for _, s := range l.Signatures() {
		file := filepath.Join("testdata", "signatures", s.ID+".txt")
		pos, neg, err := readSamples(file)
		if err != nil {
			t.Errorf("signature %s (guide %s): %v", s.ID, s.GuideID, err)
			continue
		}
		if len(pos) == 0 {
			t.Errorf("%s: no sample line for signature %s", file, s.ID)
		}
		for _, line := range pos {
			if !s.Re.MatchString(line) {
				t.Errorf("%s: signature %s does not match %q", file, s.ID, line)
			}
		}
		for _, line := range neg {
			if s.Re.MatchString(line) {
				t.Errorf("%s: signature %s matches the negative sample %q", file, s.ID, line)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "signatures", "*.txt"))
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), ".txt")
		if _, ok := declared[id]; !ok {
			t.Errorf("%s: no guide declares signature %s", f, id)
		}
	}
}

func readSamples(path string) (pos, neg []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "!"):
			neg = append(neg, line[1:])
		default:
			pos = append(pos, line)
		}
	}
	return pos, neg, sc.Err()
}

var (
	cmdGuideRe    = regexp.MustCompile("ncclwiz guides ([a-z0-9-]+)")
	cmdOnlyRe     = regexp.MustCompile("--only[ =]([a-z0-9.,-]+)")
	cmdApplyRe    = regexp.MustCompile("--apply[ =]([a-z0-9.,-]+)")
	cmdScenarioRe = regexp.MustCompile("--scenario[ =]([a-z0-9-]+)")
)

func TestLinksAndReferencedIDsResolve(t *testing.T) {
	l := load(t)
	checkIDs, categories := knownChecks(t)
	fixIDs := append(slices.Clone(contractFixes), steps.IDs()...)
	scen, err := scenario.List()
	if err != nil {
		t.Fatal(err)
	}
	var scenarios []string
	for _, s := range scen {
		scenarios = append(scenarios, s.Name)
	}
	for _, g := range allGuides(l) {
		for _, id := range append(guides.Links(g.Body), g.Related...) {
			if _, ok := l.Get(id, "en"); !ok {
				t.Errorf("%s: link or related guide %q does not exist", g.File, id)
			}
			if id == g.ID {
				t.Errorf("%s: links to itself", g.File)
			}
		}
		for _, c := range g.Checks {
			if !slices.Contains(checkIDs, c) {
				t.Errorf("%s: unknown check %q in front matter", g.File, c)
			}
		}
		for _, f := range g.Fixes {
			if !slices.Contains(fixIDs, f) {
				t.Errorf("%s: unknown fix %q in front matter", g.File, f)
			}
		}
		for _, m := range cmdGuideRe.FindAllStringSubmatch(g.Body, -1) {
			if _, ok := l.Get(m[1], "en"); !ok {
				t.Errorf("%s: `ncclwiz guides %s` names no guide", g.File, m[1])
			}
		}
		for _, m := range cmdOnlyRe.FindAllStringSubmatch(g.Body, -1) {
			for _, c := range strings.Split(strings.Trim(m[1], ",."), ",") {
				if !slices.Contains(checkIDs, c) && !slices.Contains(categories, c) {
					t.Errorf("%s: --only %s: no check or category %q", g.File, m[1], c)
				}
			}
		}
		for _, m := range cmdApplyRe.FindAllStringSubmatch(g.Body, -1) {
			for _, f := range strings.Split(strings.Trim(m[1], ",."), ",") {
				if !slices.Contains(fixIDs, f) {
					t.Errorf("%s: --apply %s: no fix %q", g.File, m[1], f)
				}
			}
		}
		for _, m := range cmdScenarioRe.FindAllStringSubmatch(g.Body, -1) {
			if !slices.Contains(scenarios, m[1]) {
				t.Errorf("%s: --scenario %s does not exist (have %v)", g.File, m[1], scenarios)
			}
		}
	}
}

// knownChecks returns the check ids of the registry (and checks that every
// contract id is registered), and their categories (the first part of an
// id, which --only accepts).
func knownChecks(t *testing.T) (ids, categories []string) {
	reg, err := all.Registry()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range contractChecks {
		if _, ok := reg.Get(id); !ok {
			t.Errorf("contract check %s is not registered", id)
		}
	}
	for _, c := range reg.All() {
		ids = append(ids, c.ID)
		categories = append(categories, string(c.Category))
	}
	for _, id := range ids {
		categories = append(categories, strings.SplitN(id, ".", 2)[0])
	}
	sort.Strings(ids)
	return slices.Compact(ids), categories
}

func TestChineseGuides(t *testing.T) {
	l := load(t)
	for _, id := range zhCore {
		g, ok := l.Get(id, "zh")
		if !ok || g.Lang != "zh" {
			t.Errorf("no Chinese guide for %s (guides/content/zh/%s.md)", id, id)
			continue
		}
		en, _ := l.Get(id, "en")
		if han(g.Title) == 0 || han(g.Summary) == 0 {
			t.Errorf("%s: title and summary must be in Chinese", g.File)
		}
		// A real translation, not a stub: most letters are Chinese and it
		// keeps the English guide's code blocks.
		if han(g.Body) < len([]rune(en.Body))/12 {
			t.Errorf("%s: %d Chinese characters for a %d-character English guide", g.File, han(g.Body), len([]rune(en.Body)))
		}
		if strings.Count(g.Body, "```") != strings.Count(en.Body, "```") {
			t.Errorf("%s: %d code fences, the English guide has %d", g.File, strings.Count(g.Body, "```"), strings.Count(en.Body, "```"))
		}
	}
}

func han(s string) int {
	n := 0
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			n++
		}
	}
	return n
}

func TestFailureGuidesCiteSeveralSources(t *testing.T) {
	l := load(t)
	for _, g := range l.List("en") {
		if g.Order == 0 && len(g.Sources) < 2 {
			t.Errorf("%s: a failure guide cites %d source(s); name the docs and the source file or thread", g.File, len(g.Sources))
		}
	}
}

func TestSearchFindsTheRightGuide(t *testing.T) {
	l := load(t)
	for q, want := range map[string]string{
		"shm full":                   "shm-no-space",
		"watchdog timeout":           "watchdog-timeout",
		"NCCL_SOCKET_IFNAME":         "socket-interface",
		"bus error":                  "shm-sigbus",
		"RemoveIPC":                  "shm-removeipc",
		"fabric manager":             "fabric-manager",
		"single gpu":                 "single-gpu-fallback",
		"kubernetes emptyDir":        "container-shm",
		"init_process_group timeout": "pytorch-timeouts",
		"MASTER_ADDR firewall":       "multi-node-basics",
	} {
		hits := l.Search(q, "en")
		if len(hits) == 0 || hits[0].ID != want {
			var got []string
			for _, h := range hits {
				got = append(got, h.ID)
			}
			t.Errorf("Search(%q) = %v, want %s first", q, got, want)
		}
	}
	if hits := l.Search("共享内存", "zh"); len(hits) == 0 {
		t.Error("a Chinese query finds nothing in the Chinese guides")
	}
	if g, ok := l.Get("gpu-xid", "zh"); !ok || g.Lang != "en" {
		t.Error("an untranslated guide does not fall back to English")
	}
}
