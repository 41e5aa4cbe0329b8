package guideui

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/list"

	"github.com/ncclwiz/ncclwiz/guides"
)

// item is one guide in the list.
type item struct {
	g    *guides.Guide
	step int // position in the Learn track, 0 outside it
	// english marks a guide shown in English because it has no translation
	// in the language asked for: the list says so rather than mix silently.
	english bool
}

func (i item) Title() string {
	t := i.g.Title
	if i.step > 0 {
		t = fmt.Sprintf("%d. %s", i.step, t)
	}
	if i.english {
		t += " [English]"
	}
	return t
}

func (i item) Description() string { return i.g.Summary }

// FilterValue is what the list's filter matches: title (first, so match
// positions highlight in it), then id, tags and summary, so "docker",
// "shm" or "timeout" all find their guides.
func (i item) FilterValue() string {
	return i.g.Title + "\n" + i.g.ID + " " + strings.Join(i.g.Tags, " ") + " " + i.g.Summary
}

// wordFilter keeps the items containing every word of term (a fuzzy
// subsequence match finds "timeout" in two thirds of the guides). Items
// whose title holds the words come first; the matched title runes are
// highlighted.
func wordFilter(term string, targets []string) []list.Rank {
	words := strings.Fields(strings.ToLower(term))
	var inTitle, rest []list.Rank
	for i, t := range targets {
		lt := strings.ToLower(t)
		title, _, _ := strings.Cut(lt, "\n")
		var idx []int
		all, titleHit := true, true
		for _, w := range words {
			if !strings.Contains(lt, w) {
				all = false
				break
			}
			if at := strings.Index(title, w); at >= 0 {
				start := utf8.RuneCountInString(title[:at])
				for k := range utf8.RuneCountInString(w) {
					idx = append(idx, start+k)
				}
			} else {
				titleHit = false
			}
		}
		if !all {
			continue
		}
		sort.Ints(idx)
		r := list.Rank{Index: i, MatchedIndexes: slices.Compact(idx)}
		if titleHit {
			inTitle = append(inTitle, r)
		} else {
			rest = append(rest, r)
		}
	}
	return append(inTitle, rest...)
}

func (m Model) newList() list.Model {
	var items []list.Item
	title := fmt.Sprintf("ncclwiz guides (%d)", len(m.lib.IDs()))
	switch {
	case m.opt.IDs != nil:
		for _, g := range m.sequence() {
			items = append(items, item{g: g})
		}
		title = m.opt.Title
		if title == "" {
			title = fmt.Sprintf("%d guides", len(items))
		}
	case m.learn:
		track := m.lib.Learn(m.opt.Lang)
		for i, g := range track {
			items = append(items, item{g: g, step: i + 1})
		}
		title = fmt.Sprintf("Learn: %d steps, in order", len(track))
	default:
		// The list shows titles, so it is in the order of its titles (the
		// library's is by ID, which reads as no order at all).
		gs := slices.Clone(m.lib.List(m.opt.Lang))
		slices.SortStableFunc(gs, func(a, b *guides.Guide) int {
			return strings.Compare(strings.ToLower(a.Title), strings.ToLower(b.Title))
		})
		for _, g := range gs {
			items = append(items, item{g: g})
		}
	}
	if lang := guides.NormalizeLang(m.opt.Lang); lang != "" && lang != guides.English {
		for i, it := range items {
			x := it.(item)
			x.english = x.g.Lang != lang
			items[i] = x
		}
	}
	d := list.NewDefaultDelegate()
	d.Styles = list.NewDefaultItemStyles(m.opt.Dark)
	l := list.New(items, d, m.width, m.height)
	l.Title = title
	l.Styles = list.DefaultStyles(m.opt.Dark)
	l.SetStatusBarItemName("guide", "guides")
	l.DisableQuitKeybindings()
	l.Filter = wordFilter
	extra := []key.Binding{m.keys.Open, m.keys.Track, m.keys.Quit}
	if m.opt.IDs != nil {
		extra = []key.Binding{m.keys.Open, m.keys.Quit} // a fixed set: no track to switch to
	}
	extra = append(extra, m.opt.Keys...)
	l.AdditionalShortHelpKeys = func() []key.Binding { return extra }
	l.AdditionalFullHelpKeys = func() []key.Binding { return extra }
	return l
}
