package units

import "testing"

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
