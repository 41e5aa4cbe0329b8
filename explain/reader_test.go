package explain

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll collects the lines of a LineReader.
func readAll(t testing.TB, r io.Reader, max int) ([]string, []bool, ReadStats, error) {
	t.Helper()
	lr := NewLineReader(r, max)
	var lines []string
	var trunc []bool
	for lr.Next() {
		lines = append(lines, string(lr.Bytes()))
		trunc = append(trunc, lr.Truncated())
		if lr.N() != int64(len(lines)) {
			t.Fatalf("N() = %d, want %d", lr.N(), len(lines))
		}
	}
	return lines, trunc, lr.Stats(), lr.Err()
}

func TestLineReader(t *testing.T) {
	giant := strings.Repeat("x", 3<<20) // larger than any buffer
	tests := []struct {
		name  string
		in    string
		max   int
		want  []string
		trunc []bool
	}{
		{"empty", "", 0, nil, nil},
		{"one line no newline", "abc", 0, []string{"abc"}, []bool{false}},
		{"lf", "a\nb\n", 0, []string{"a", "b"}, []bool{false, false}},
		{"crlf", "a\r\nb\r\n", 0, []string{"a", "b"}, []bool{false, false}},
		{"blank lines", "\n\n\n", 0, []string{"", "", ""}, []bool{false, false, false}},
		{"interior cr kept", "50%\r60%\r\n", 0, []string{"50%\r60%"}, []bool{false}},
		{"cut at max", "abcdefgh\nxy\n", 4, []string{"abcd", "xy"}, []bool{true, false}},
		{"exactly max", "abcd\n", 4, []string{"abcd"}, []bool{false}},
		{"giant line then normal", giant + "\nnext\n", 1024, []string{giant[:1024], "next"}, []bool{true, false}},
		{"giant last line", "first\n" + giant, 1024, []string{"first", giant[:1024]}, []bool{false, true}},
		{"utf8 not split", "ab\u00e9\u00e9\n", 3, []string{"ab"}, []bool{true}},
		{"nul bytes", "a\x00b\n", 0, []string{"a\x00b"}, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time too: reads must not depend on chunking.
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				lines, trunc, st, err := readAll(t, r, tt.max)
				if err != nil {
					t.Fatal(err)
				}
				if len(lines) != len(tt.want) {
					t.Fatalf("got %d lines, want %d", len(lines), len(tt.want))
				}
				for i := range lines {
					if lines[i] != tt.want[i] || trunc[i] != tt.trunc[i] {
						t.Errorf("line %d = %.20q (trunc %v), want %.20q (trunc %v)", i, lines[i], trunc[i], tt.want[i], tt.trunc[i])
					}
				}
				if st.Bytes != int64(len(tt.in)) {
					t.Errorf("Bytes = %d, want %d", st.Bytes, len(tt.in))
				}
			}
		})
	}
}

func TestLineReaderStats(t *testing.T) {
	in := "ok\nnul\x00\x00here\nbad \xff\xfe utf8\n" + strings.Repeat("y", 5000) + "\n"
	_, _, st, _ := readAll(t, strings.NewReader(in), 1000)
	if st.NULBytes != 2 || st.BadUTF8Lines != 1 || st.TruncatedLines != 1 || st.Lines != 4 {
		t.Errorf("stats = %+v", st)
	}
	if st.Longest != 5001 {
		t.Errorf("Longest = %d, want 5001", st.Longest)
	}
}

// A read error mid-stream ends the input with Err set and the lines read
// so far kept.
func TestLineReaderError(t *testing.T) {
	r := io.MultiReader(strings.NewReader("one\ntwo\n"), iotest.ErrReader(io.ErrUnexpectedEOF))
	lines, _, _, err := readAll(t, r, 0)
	if err == nil || len(lines) != 2 {
		t.Fatalf("lines=%q err=%v", lines, err)
	}
}

func TestGzipDetectedByMagic(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	io.WriteString(zw, "hello\nworld\n")
	zw.Close()
	// A second member, as rotated logs concatenated with cat have.
	zw = gzip.NewWriter(&buf)
	io.WriteString(zw, "again\n")
	zw.Close()
	r, gz, err := openMaybeGzip(&buf)
	if err != nil || !gz {
		t.Fatalf("gz=%v err=%v", gz, err)
	}
	lines, _, _, err := readAll(t, r, 0)
	if err != nil || strings.Join(lines, ",") != "hello,world,again" {
		t.Fatalf("lines=%q err=%v", lines, err)
	}
	// Plain text stays plain, even one starting with 0x1f.
	r, gz, err = openMaybeGzip(strings.NewReader("\x1fplain\n"))
	if err != nil || gz {
		t.Fatalf("gz=%v err=%v", gz, err)
	}
	lines, _, _, _ = readAll(t, r, 0)
	if len(lines) != 1 {
		t.Fatalf("lines=%q", lines)
	}
}
