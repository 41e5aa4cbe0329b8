package units

import (
	"testing"
	"time"
)

func TestBytes(t *testing.T) {
	for in, want := range map[uint64]string{0: "0 B", 512: "512 B", 9637892: "9.2 MiB", 64 << 20: "64 MiB", 1536 << 20: "1.5 GiB", 3 << 40: "3 TiB"} {
		if got := Bytes(in); got != want {
			t.Errorf("Bytes(%d) = %s, want %s", in, got, want)
		}
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		s, p string
		want string
	}{{1, "GPU", "", "1 GPU"}, {0, "GPU", "", "0 GPUs"}, {8, "GPU", "", "8 GPUs"}, {2, "process", "processes", "2 processes"}, {1, "process", "processes", "1 process"}} {
		var got string
		if c.p == "" {
			got = Count(c.n, c.s)
		} else {
			got = Count(c.n, c.s, c.p)
		}
		if got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.s, got, c.want)
		}
	}
}

func TestCountGroupsAndWord(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Count(1024, "rank"), "1,024 ranks"},
		{Count(int64(9637892), "byte"), "9,637,892 bytes"},
		{Count(uint64(999), "link"), "999 links"},
		{Digits(-1234567), "-1,234,567"},
		{Digits(0), "0"},
		{Digits(int64(100000)), "100,000"},
		{Word(1, "holds", "hold"), "holds"},
		{Word(0, "entry", "entries"), "entries"},
		{Word(uint64(2), "has", "have"), "have"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{15 * time.Second: "15 s", 300 * time.Second: "5 min", 60 * time.Minute: "60 min",
		7260 * time.Second: "2 h 1 min", 3 * time.Hour: "3 h", 3 * 24 * time.Hour: "3 days", -5 * time.Second: "0 s"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}
