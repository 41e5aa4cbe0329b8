package termio

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// Every query bubbletea (or x/ansi) can send is dropped; what draws the
// screen and sets modes passes unchanged, whole, however the writes cut it.
func TestStripQueries(t *testing.T) {
	queries := []string{ansi.RequestModeSynchronizedOutput, ansi.RequestModeUnicodeCore, ansi.RequestKittyKeyboard,
		ansi.RequestPrimaryDeviceAttributes, ansi.RequestSecondaryDeviceAttributes, ansi.RequestCursorPositionReport,
		ansi.RequestBackgroundColor, ansi.RequestForegroundColor, ansi.RequestCursorColor, ansi.RequestNameVersion,
		ansi.RequestTermcap("Tc"), ansi.RequestSystemClipboard, "\x1b[18t", "\x1b[?6n"}
	keep := []string{"plain text ", ansi.SetModeAltScreenSaveCursor, ansi.CursorPosition(3, 4), "\x1b[1mbold\x1b[m",
		ansi.PushKittyKeyboard(1), ansi.PopKittyKeyboard(1), ansi.SetModifyOtherKeys2, ansi.SetModeBracketedPaste,
		ansi.SetSystemClipboard("x"), "\x1b[22;0t", "\x1b7", "é✓"}
	var in, want strings.Builder
	for i, k := range keep {
		in.WriteString(k)
		want.WriteString(k)
		in.WriteString(queries[i%len(queries)])
	}
	for _, q := range queries {
		in.WriteString(q)
	}
	for cut := 0; cut <= in.Len(); cut += 7 {
		var got []byte
		var held []byte
		for _, part := range []string{in.String()[:cut], in.String()[cut:]} {
			out, rest := StripQueries(append(held, part...))
			got, held = append(got, out...), append([]byte(nil), rest...)
		}
		if string(got) != want.String() || len(held) > 0 {
			t.Fatalf("cut at %d:\n got %q\nwant %q (held %q)", cut, got, want.String(), held)
		}
	}
}
