package guideui

import (
	"strings"
	"testing"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ncclwiz/ncclwiz/guides"
	"github.com/ncclwiz/ncclwiz/guides/render"
	"github.com/ncclwiz/ncclwiz/internal/keytest"
)

func lib(t *testing.T) *guides.Library {
	t.Helper()
	l, err := guides.Load()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// keyMsg names a key press as bubbletea v2 reports it.
func keyMsg(s string) tea.KeyPressMsg { return keytest.Press(s) }

// run executes cmd and feeds its messages back into m, like the program
// loop, skipping commands that wait (cursor blink, status timers).
func run(t *testing.T, m Model, cmd tea.Cmd) (Model, []tea.Msg) {
	t.Helper()
	var seen []tea.Msg
	queue := []tea.Cmd{cmd}
	for steps := 0; len(queue) > 0 && steps < 100; steps++ {
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		ch := make(chan tea.Msg, 1)
		go func() { ch <- c() }()
		var msg tea.Msg
		select {
		case msg = <-ch:
		case <-time.After(150 * time.Millisecond):
			continue // a timer; nothing the test needs
		}
		if b, ok := msg.(tea.BatchMsg); ok {
			queue = append(queue, b...)
			continue
		}
		if msg == nil {
			continue
		}
		seen = append(seen, msg)
		var next tea.Cmd
		m, next = m.Update(msg)
		queue = append(queue, next)
	}
	// A render slower than the timeout above (the race detector, a busy
	// machine) was skipped: finish it, as the program would.
	if m.viewing && m.v.guide != nil && (m.v.loading || m.v.width != m.textWidth()) {
		m, _ = m.Update(m.renderCmd(m.v.guide)())
	}
	return m, seen
}

// press sends keys one by one, running the resulting commands.
func press(t *testing.T, m Model, keys ...string) (Model, []tea.Msg) {
	t.Helper()
	var all []tea.Msg
	for _, k := range keys {
		var cmd tea.Cmd
		m, cmd = m.Update(keyMsg(k))
		var seen []tea.Msg
		m, seen = run(t, m, cmd)
		all = append(all, seen...)
	}
	return m, all
}

func typeText(t *testing.T, m Model, s string) Model {
	t.Helper()
	for _, r := range s {
		m, _ = press(t, m, string(r))
	}
	return m
}

func sized(t *testing.T, opt Options, w, h int) Model {
	t.Helper()
	m := New(lib(t), opt)
	m, _ = run(t, m, m.SetSize(w, h))
	return m
}

func assertFits(t *testing.T, view string, w, h int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) > h {
		t.Errorf("view has %d lines for a %d-line window", len(lines), h)
	}
	for i, l := range lines {
		if lw := ansi.StringWidth(l); lw > w {
			t.Errorf("line %d is %d cells wide in a %d-cell window: %q", i+1, lw, w, ansi.Strip(l))
		}
	}
}

func TestFilterOpenScrollSearchBackQuit(t *testing.T) {
	m := sized(t, Options{Style: render.ASCII}, 100, 30)
	if !strings.Contains(m.View(), "ncclwiz guides") {
		t.Fatalf("list view lacks its title:\n%s", m.View())
	}
	// Filter the list to the /dev/shm guides.
	m, _ = press(t, m, "/")
	m = typeText(t, m, "sigbus")
	m, _ = press(t, m, "enter")
	vis := m.list.VisibleItems()
	if len(vis) == 0 || vis[0].(item).g.ID != "shm-sigbus" {
		var ids []string
		for _, it := range vis {
			ids = append(ids, it.(item).g.ID)
		}
		t.Fatalf("filter 'sigbus' shows %v", ids)
	}
	// Open it.
	m, _ = press(t, m, "enter")
	if !m.Viewing() || m.Current().ID != "shm-sigbus" {
		t.Fatalf("enter did not open the guide")
	}
	view := ansi.Strip(m.View())
	for _, want := range []string{"Symptom", "Bus error", "0%", "/ search"} {
		if !strings.Contains(view, want) {
			t.Errorf("viewer lacks %q:\n%s", want, view)
		}
	}
	assertFits(t, m.View(), 100, 30)
	// Scroll.
	before := m.v.vp.YOffset()
	m, _ = press(t, m, "pgdown")
	if m.v.vp.YOffset() <= before {
		t.Errorf("pgdown did not scroll (offset %d → %d)", before, m.v.vp.YOffset())
	}
	m, _ = press(t, m, "g")
	if m.v.vp.YOffset() != 0 {
		t.Errorf("g did not go to the top")
	}
	// Search.
	m, _ = press(t, m, "/")
	if !m.v.searching {
		t.Fatal("/ did not open the search prompt")
	}
	m = typeText(t, m, "shm")
	m, _ = press(t, m, "enter")
	n := len(m.v.matches)
	if n < 2 {
		t.Fatalf("search 'shm' found %d matches", n)
	}
	if !strings.Contains(ansi.Strip(m.View()), "match 1/") {
		t.Errorf("status lacks the match counter:\n%s", ansi.Strip(m.View()))
	}
	m, _ = press(t, m, "n")
	if m.v.cur != 1 {
		t.Errorf("n moved to match %d, want 1", m.v.cur)
	}
	m, _ = press(t, m, "N", "N")
	if m.v.cur != n-1 {
		t.Errorf("N twice from 1 should wrap to %d, got %d", n-1, m.v.cur)
	}
	line := m.v.matches[m.v.cur].line
	if line < m.v.vp.YOffset() || line >= m.v.vp.YOffset()+m.v.vp.Height() {
		t.Errorf("current match on line %d is not visible (offset %d, height %d)", line, m.v.vp.YOffset(), m.v.vp.Height())
	}
	// esc clears the search, then goes back to the list on the same guide.
	m, _ = press(t, m, "esc")
	if m.v.query != "" || !m.Viewing() {
		t.Fatal("first esc should clear the search and stay in the guide")
	}
	m, _ = press(t, m, "esc")
	if m.Viewing() {
		t.Fatal("second esc should go back to the list")
	}
	if it := m.list.SelectedItem().(item); it.g.ID != "shm-sigbus" {
		t.Errorf("back to the list selects %s", it.g.ID)
	}
	// esc clears the filter; q leaves the browser.
	m, _ = press(t, m, "esc")
	if m.list.IsFiltered() {
		t.Error("esc did not clear the filter")
	}
	_, msgs := press(t, m, "q")
	if len(msgs) == 0 {
		t.Fatal("q sent nothing")
	}
	if _, ok := msgs[len(msgs)-1].(ExitMsg); !ok {
		t.Errorf("q sent %T, want ExitMsg", msgs[len(msgs)-1])
	}
}

func TestLearnTrackNextPrevious(t *testing.T) {
	m := sized(t, Options{Style: render.NoTTY, Learn: true}, 80, 24)
	var ids []string
	for _, it := range m.list.Items() {
		ids = append(ids, it.(item).g.ID)
	}
	if len(ids) != 7 || ids[0] != "nccl-intro" || ids[6] != "multi-node-basics" {
		t.Fatalf("Learn list = %v", ids)
	}
	if !strings.Contains(ansi.Strip(m.View()), "1. ") {
		t.Errorf("Learn items are not numbered:\n%s", ansi.Strip(m.View()))
	}
	m, _ = press(t, m, "enter")
	if m.Current().ID != "nccl-intro" || !strings.Contains(ansi.Strip(m.View()), "Learn 1/7") {
		t.Fatalf("did not open step 1:\n%s", ansi.Strip(m.View()))
	}
	m, _ = press(t, m, "]")
	if m.Current().ID != "reading-nccl-debug" {
		t.Fatalf("] opened %s", m.Current().ID)
	}
	m, _ = press(t, m, "G")
	if !strings.Contains(ansi.Strip(m.View()), "] next: ") {
		t.Errorf("the end of a Learn guide does not point to the next one:\n%s", ansi.Strip(m.View()))
	}
	m, _ = press(t, m, "[", "[")
	if m.Current().ID != "nccl-intro" {
		t.Fatalf("[ twice from step 2 should stay at step 1, got %s", m.Current().ID)
	}
	for range 6 {
		m, _ = press(t, m, "]")
	}
	m, _ = press(t, m, "]", "G")
	if m.Current().ID != "multi-node-basics" || !strings.Contains(ansi.Strip(m.View()), "end of the Learn track") {
		t.Errorf("at the last step: %s\n%s", m.Current().ID, ansi.Strip(m.View()))
	}
	m, _ = press(t, m, "q")
	if m.Viewing() || m.list.SelectedItem().(item).g.ID != "multi-node-basics" {
		t.Error("back to the Learn list should select the last guide read")
	}
	m, _ = press(t, m, "tab")
	if len(m.list.Items()) < 30 {
		t.Errorf("tab should switch to every guide, got %d", len(m.list.Items()))
	}
}

func TestResizeReRendersAndFits(t *testing.T) {
	m := sized(t, Options{Style: render.Dark}, 120, 40)
	m, _ = run(t, m, Open("env-reference"))
	if m.v.width != MaxTextWidth {
		t.Errorf("rendered for %d columns on a 120-column window, want the %d cap", m.v.width, MaxTextWidth)
	}
	m, _ = press(t, m, "pgdown", "pgdown")
	for _, size := range [][2]int{{60, 20}, {80, 24}, {33, 12}, {12, 6}} {
		var cmd tea.Cmd
		m, cmd = m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		if cmd == nil {
			t.Fatalf("resize to %v did not re-render", size)
		}
		m, _ = run(t, m, cmd)
		if m.v.width != size[0] {
			t.Errorf("after resize to %v the text is %d wide", size, m.v.width)
		}
		assertFits(t, m.View(), size[0], size[1])
		if m.v.vp.YOffset() == 0 {
			t.Errorf("resize to %v lost the reading position", size)
		}
	}
	// The list also fits small windows.
	m, _ = press(t, m, "q")
	m, _ = run(t, m, m.SetSize(40, 12))
	assertFits(t, m.View(), 40, 12)
}

func TestStaleRenderIgnored(t *testing.T) {
	m := sized(t, Options{Style: render.ASCII}, 80, 24)
	m, _ = run(t, m, Open("shm-no-space"))
	before := m.v.lines
	m, _ = m.Update(renderedMsg{id: "gpu-xid", lang: "en", width: 80, text: "WRONG"})
	m, _ = m.Update(renderedMsg{id: "shm-no-space", lang: "en", width: 50, text: "WRONG"})
	if strings.Join(m.v.lines, "\n") != strings.Join(before, "\n") {
		t.Error("a rendering for another guide or width replaced the open one")
	}
}

func TestChineseAndFallback(t *testing.T) {
	m := sized(t, Options{Style: render.ASCII, Lang: "zh_CN.UTF-8"}, 80, 24)
	m, _ = run(t, m, Open("container-shm"))
	if m.Current().Lang != "zh" || !strings.Contains(ansi.Strip(m.View()), "为什么重要") {
		t.Errorf("zh guide not shown:\n%s", ansi.Strip(m.View()))
	}
	m, _ = run(t, m, Open("gpu-xid"))
	if m.Current().Lang != "en" || !strings.Contains(ansi.Strip(m.View()), "英文版") {
		t.Errorf("English fallback not marked:\n%s", ansi.Strip(m.View()))
	}
	assertFits(t, m.View(), 80, 24)
	// Search works on Chinese text.
	m, _ = run(t, m, Open("nccl-intro"))
	m, _ = press(t, m, "/")
	m = typeText(t, m, "传输")
	m, _ = press(t, m, "enter")
	if len(m.v.matches) == 0 {
		t.Error("no match for 传输 in the Chinese NCCL introduction")
	}
}

func TestOpenOptionAndUnknownGuide(t *testing.T) {
	m := New(lib(t), Options{Open: "pytorch-timeouts", Style: render.NoTTY})
	m, _ = run(t, m, m.Init())
	if !m.Viewing() || m.Current().ID != "pytorch-timeouts" {
		t.Fatal("Options.Open did not open the guide")
	}
	m, _ = press(t, m, "esc")
	m, _ = run(t, m, Open("no-such-guide"))
	if m.Viewing() {
		t.Error("an unknown id opened something")
	}
}

func TestFindAll(t *testing.T) {
	for _, c := range []struct {
		line, needle string
		want         [][2]int
	}{
		{"NCCL nccl NcCl", "nccl", [][2]int{{0, 4}, {5, 9}, {10, 14}}},
		{"aaaa", "aa", [][2]int{{0, 2}, {2, 4}}},
		{"共享内存 shm", "shm", [][2]int{{9, 12}}},
		{"共享内存", "内存", [][2]int{{4, 8}}},
		{"nothing", "x", nil},
		{"", "x", nil},
	} {
		got := findAll(c.line, []rune(c.needle))
		if len(got) != len(c.want) {
			t.Errorf("findAll(%q, %q) = %v, want %v", c.line, c.needle, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("findAll(%q, %q) = %v, want %v", c.line, c.needle, got, c.want)
			}
		}
	}
}

func TestWordFilter(t *testing.T) {
	targets := []string{
		"Watchdog caught collective operation timeout\nwatchdog-timeout timeout hang",
		"Too many open files\nfd-exhaustion files sockets",
		"Timeouts in PyTorch\npytorch-timeouts learn timeout the watchdog",
		"Rendezvous\nrendezvous-timeout store",
	}
	got := wordFilter("timeout", targets)
	var idx []int
	for _, r := range got {
		idx = append(idx, r.Index)
	}
	// Title hits first (0, 2), then the rest (3); "files" never matches.
	if len(idx) != 3 || idx[0] != 0 || idx[1] != 2 || idx[2] != 3 {
		t.Errorf("wordFilter(timeout) = %v", idx)
	}
	if r := got[0]; len(r.MatchedIndexes) != 7 || r.MatchedIndexes[0] != 37 {
		t.Errorf("highlighted runes %v, want 37..43 (\"timeout\" in the title)", r.MatchedIndexes)
	}
	if got := wordFilter("watchdog pytorch", targets); len(got) != 1 || got[0].Index != 2 {
		t.Errorf("every word must match: %v", got)
	}
	if got := wordFilter("", targets); len(got) != len(targets) {
		t.Errorf("an empty filter keeps everything: %v", got)
	}
}

// A subset in a given order (the wizard's guides for what it found),
// embedded: ] and [ step through the subset, esc from a guide opened with
// Open leaves at once, esc from a guide picked in the list returns to the
// list, and esc on the list leaves.
func TestSubsetEmbedded(t *testing.T) {
	ids := []string{"shm-no-space", "no-such-guide", "shm-stale-segments", "gpu-xid"}
	parent := key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "fixes"))
	m := sized(t, Options{Style: render.NoTTY, IDs: ids, Title: "Guides for what was found", Embedded: true, Keys: []key.Binding{parent}}, 100, 24)
	var got []string
	for _, it := range m.list.Items() {
		got = append(got, it.(item).g.ID)
	}
	if strings.Join(got, ",") != "shm-no-space,shm-stale-segments,gpu-xid" {
		t.Fatalf("subset list = %v", got)
	}
	if v := ansi.Strip(m.View()); !strings.Contains(v, "Guides for what was found") || !strings.Contains(v, "esc back") || strings.Contains(v, "q quit") {
		t.Errorf("embedded subset list view:\n%s", v)
	}
	m, _ = press(t, m, "tab")
	if len(m.list.Items()) != 3 {
		t.Errorf("tab switched a fixed subset to %d guides", len(m.list.Items()))
	}
	// Picked from the list: ] steps to the next of the subset, esc returns
	// to the list on the guide read last.
	m, _ = press(t, m, "down", "enter")
	if m.Current() == nil || m.Current().ID != "shm-stale-segments" {
		t.Fatalf("enter opened %v", m.Current())
	}
	if v := ansi.Strip(m.View()); !strings.Contains(v, "guide 2/3") || !strings.Contains(v, "tab fixes") {
		t.Errorf("header lacks the position in the subset, or help the parent's key:\n%s", v)
	}
	m, _ = press(t, m, "]")
	if m.Current().ID != "gpu-xid" {
		t.Fatalf("] opened %s, want gpu-xid", m.Current().ID)
	}
	m, msgs := press(t, m, "esc")
	if m.Viewing() || len(msgs) != 0 {
		t.Fatalf("esc in a guide picked from the list: viewing %v, msgs %v", m.Viewing(), msgs)
	}
	if it := m.list.SelectedItem().(item); it.g.ID != "gpu-xid" {
		t.Errorf("back on the list at %s", it.g.ID)
	}
	_, msgs = press(t, m, "esc")
	if len(msgs) == 0 {
		t.Fatal("esc on the list sent nothing")
	}
	if _, ok := msgs[len(msgs)-1].(ExitMsg); !ok {
		t.Errorf("esc on the list sent %T", msgs[len(msgs)-1])
	}
	// Opened directly: the first esc closes the search, the next leaves.
	m, _ = run(t, m, Open("shm-no-space"))
	m, _ = press(t, m, "/")
	m = typeText(t, m, "shm")
	m, _ = press(t, m, "enter")
	if m, msgs = press(t, m, "esc"); len(msgs) != 0 || !m.Viewing() {
		t.Fatalf("esc with a search open should clear it: viewing %v, msgs %v", m.Viewing(), msgs)
	}
	if _, msgs = press(t, m, "esc"); len(msgs) == 0 {
		t.Fatal("esc in a guide opened with Open did not leave")
	} else if _, ok := msgs[len(msgs)-1].(ExitMsg); !ok {
		t.Errorf("esc in a guide opened with Open sent %T", msgs[len(msgs)-1])
	}
	// Standalone (not embedded), the same esc returns to the list.
	s := sized(t, Options{Style: render.NoTTY, IDs: ids}, 80, 24)
	s, _ = run(t, s, Open("gpu-xid"))
	if s, msgs = press(t, s, "esc"); s.Viewing() || len(msgs) != 0 {
		t.Errorf("standalone esc: viewing %v, msgs %v", s.Viewing(), msgs)
	}
}

// While a guide renders, the frame keeps its height and the help sits on
// the last line, where it will stay.
func TestRenderingKeepsTheHelp(t *testing.T) {
	m := sized(t, Options{Style: render.NoTTY}, 80, 24)
	m, _ = m.Update(Open("shm-no-space")())
	lines := strings.Split(ansi.Strip(m.View()), "\n")
	if !m.v.loading || len(lines) != 24 || !strings.Contains(lines[1], "rendering") || !strings.Contains(lines[23], "esc back") {
		t.Errorf("while rendering (%d lines):\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// Issue 25 item 15: with --lang zh the Learn track does not mix languages
// silently: a step shown in English because it has no translation is
// marked [English]; translated ones are not.
func TestLearnMarksUntranslated(t *testing.T) {
	m := sized(t, Options{Style: render.ASCII, Lang: "zh", Learn: true}, 100, 40)
	v := ansi.Strip(m.View())
	marked, plain := 0, 0
	for _, it := range m.list.Items() {
		x := it.(item)
		if x.english != (x.g.Lang != "zh") {
			t.Errorf("%s (%s): english mark %v", x.g.ID, x.g.Lang, x.english)
		}
		if x.english {
			marked++
		} else {
			plain++
		}
	}
	if marked == 0 || plain == 0 || !strings.Contains(v, "[English]") {
		t.Errorf("%d marked, %d translated:\n%s", marked, plain, v)
	}
}
