package linetext

import "bytes"

// StripANSI appends src to dst[:0] without terminal escape sequences (CSI
// colour codes from Python loggers and progress bars, OSC titles and
// hyperlinks, two-byte ESC sequences) and without NUL bytes (crashed writers
// leave NUL-filled holes in log files). An unterminated sequence at the end
// of the line is dropped.
func StripANSI(dst, src []byte) []byte {
	dst = dst[:0]
	for i := 0; i < len(src); {
		c := src[i]
		if c == 0 {
			i++
			continue
		}
		if c != 0x1b {
			// Copy the run up to the next ESC or NUL in one go.
			j := i + 1
			for j < len(src) && src[j] != 0x1b && src[j] != 0 {
				j++
			}
			dst = append(dst, src[i:j]...)
			i = j
			continue
		}
		i = skipEscape(src, i)
	}
	return dst
}

// skipEscape returns the index just after the escape sequence at src[i].
func skipEscape(src []byte, i int) int {
	if i+1 >= len(src) {
		return len(src)
	}
	switch src[i+1] {
	case '[': // CSI: parameters, intermediates, one final byte
		j := i + 2
		for j < len(src) && src[j] >= 0x20 && src[j] <= 0x3f {
			j++
		}
		if j < len(src) && src[j] >= 0x40 && src[j] <= 0x7e {
			return j + 1
		}
		return j
	case ']', 'P', '_', '^', 'X': // OSC, DCS, APC, PM, SOS: until BEL or ST
		j := i + 2
		for j < len(src) {
			if src[j] == 0x07 {
				return j + 1
			}
			if src[j] == 0x1b && j+1 < len(src) && src[j+1] == '\\' {
				return j + 2
			}
			j++
		}
		return j
	default: // two-byte sequence (ESC 7, ESC =, ESC c, …) or ESC ( B charset
		if src[i+1] == '(' || src[i+1] == ')' {
			if i+2 < len(src) {
				return i + 3
			}
			return len(src)
		}
		return i + 2
	}
}

// NeedsCleaning reports whether a line carries escapes or NULs.
func NeedsCleaning(line []byte) bool {
	return bytes.IndexByte(line, 0x1b) >= 0 || bytes.IndexByte(line, 0) >= 0
}
