// Package keytest builds key presses for model tests the way bubbletea v2
// delivers them from a terminal, so tests and the real program agree on
// names such as "space" (not " "), "shift+tab" and "ctrl+c".
package keytest

import (
	"maps"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"
)

var named = map[string]rune{
	"enter":     tea.KeyEnter,
	"esc":       tea.KeyEscape,
	"tab":       tea.KeyTab,
	"up":        tea.KeyUp,
	"down":      tea.KeyDown,
	"left":      tea.KeyLeft,
	"right":     tea.KeyRight,
	"pgdown":    tea.KeyPgDown,
	"pgup":      tea.KeyPgUp,
	"home":      tea.KeyHome,
	"end":       tea.KeyEnd,
	"backspace": tea.KeyBackspace,
	"delete":    tea.KeyDelete,
}

// Press returns the KeyPressMsg for a key named as KeyPressMsg.String()
// names it ("enter", "shift+tab", "ctrl+x", "space"); any other string is
// taken as the printable key it spells.
func Press(s string) tea.KeyPressMsg {
	if c, ok := named[s]; ok {
		return tea.KeyPressMsg{Code: c}
	}
	switch {
	case s == "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case s == "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case strings.HasPrefix(s, "ctrl+") && len(s) == len("ctrl+")+1:
		return tea.KeyPressMsg{Code: rune(s[len(s)-1]), Mod: tea.ModCtrl}
	}
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

// All lists every key a user can press in the wizard, by name: letters,
// digits, punctuation, the named keys, shift+tab and ctrl+letter. ctrl+c
// is included; callers that must keep running leave it out.
func All() []string {
	var out []string
	for r := 'a'; r <= 'z'; r++ {
		out = append(out, string(r), strings.ToUpper(string(r)), "ctrl+"+string(r))
	}
	for r := '0'; r <= '9'; r++ {
		out = append(out, string(r))
	}
	for _, r := range "/?.,-=[];'`\\!@#$%^&*()_+{}:\"<>|~" {
		out = append(out, string(r))
	}
	names := slices.Sorted(maps.Keys(named))
	return append(append(out, names...), "space", "shift+tab")
}
