package host

import (
	"strconv"
	"strings"
)

// UnescapeMount decodes the octal escapes the kernel writes in
// /proc/self/mountinfo and fstab(5) expects for space, tab, newline and
// backslash (\040, \011, \012, \134). Anything else is left as written.
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// EscapeMount is UnescapeMount's inverse for the characters that would
// split a mount-table field.
func EscapeMount(s string) string {
	return strings.NewReplacer(" ", `\040`, "\t", `\011`, "\n", `\012`, `\`, `\134`).Replace(s)
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
