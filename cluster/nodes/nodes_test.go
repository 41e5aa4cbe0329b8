package nodes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHosts(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "a,b,c", want: "a b c"},
		{in: " a  b,,c ", want: "a b c"},
		{in: "gpu[01-03,07]", want: "gpu01 gpu02 gpu03 gpu07"},
		{in: "n[8-10]", want: "n8 n9 n10"},
		{in: "rack[1-2]-n[1-2]", want: "rack1-n1 rack1-n2 rack2-n1 rack2-n2"},
		{in: "root@10.0.0.1,a,a", want: "root@10.0.0.1 a"},
		{in: "gpu[01-03],gpu04", want: "gpu01 gpu02 gpu03 gpu04"},
		{in: "-oProxyCommand=x", err: "must not start with '-'"},
		{in: "a;reboot", err: "not allowed"},
		{in: "a b$(x)", err: "not allowed"},
		{in: "n[3-1]", err: "bad range"},
		{in: "n[1-x]", err: "bad range"},
		{in: "n[1-2", err: "without ']'"},
		{in: "n]1", err: "without '['"},
		{in: "n[0-9999999]", err: "more than"},
	}
	for _, tt := range tests {
		got, err := ParseHosts(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tt.want {
			t.Errorf("%q: %v %v, want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestReadHostfile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := ReadHostfile(context.Background(), write("mpi", "# MPI hostfile\nnode1 slots=8\nnode2 slots=8 # spare\n\n node[3-4] max_slots=8\nnode1\n"))
	if err != nil || strings.Join(got, " ") != "node1 node2 node3 node4" {
		t.Errorf("got %v %v", got, err)
	}
	if _, err := ReadHostfile(context.Background(), write("empty", "# nothing\n\n")); err == nil || !strings.Contains(err.Error(), "no hosts") {
		t.Errorf("empty hostfile: %v", err)
	}
	if _, err := ReadHostfile(context.Background(), write("bad", "ok\nn|x\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: %v", err)
	}
	if _, err := ReadHostfile(context.Background(), filepath.Join(dir, "missing")); err == nil {
		t.Error("missing hostfile: no error")
	}
}

// FuzzParseHosts: any text gives hosts or an error, never a panic, and
// every host it accepts is safe on an ssh/pdsh command line.
func FuzzParseHosts(f *testing.F) {
	for _, s := range []string{"a,b", "gpu[01-04,07]", "r[1-2]-n[1-3]", "n[", "n[9-1]", "-o", "a;b", "n[0-99999999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hs, err := ParseHosts(s)
		if err != nil {
			return
		}
		if len(hs) > MaxNodes {
			t.Fatalf("%d hosts", len(hs))
		}
		for _, h := range hs {
			if h == "" || strings.HasPrefix(h, "-") || strings.ContainsAny(h, " ;|&$`'\"\\\n") {
				t.Fatalf("unsafe host %q from %q", h, s)
			}
		}
	})
}
