package units

import "testing"

func TestBytes(t *testing.T) {
	for in, want := range map[uint64]string{0: "0 B", 512: "512 B", 9637892: "9.2 MiB", 64 << 20: "64 MiB", 1536 << 20: "1.5 GiB", 3 << 40: "3 TiB"} {
		if got := Bytes(in); got != want {
			t.Errorf("Bytes(%d) = %s, want %s", in, got, want)
		}
	}
}
