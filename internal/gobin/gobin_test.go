package gobin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildOnce: the second call returns the same file without building
// again (its modification time is unchanged), and a static build is a
// different file that runs.
func TestBuildOnce(t *testing.T) {
	a := Build(t, "./internal/gobin/testdata/hello", true)
	st1, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	b := Build(t, "./internal/gobin/testdata/hello", true)
	st2, err := os.Stat(b)
	if err != nil || a != b || !st2.ModTime().Equal(st1.ModTime()) {
		t.Fatalf("second build: %s %v (first %s)", b, err, a)
	}
	c := Build(t, "./internal/gobin/testdata/hello", false)
	if c == a || filepath.Base(a) != "hello" {
		t.Fatalf("static and cgo builds share %s", c)
	}
	for _, bin := range []string{a, c} {
		out, err := exec.Command(bin).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "hello") {
			t.Errorf("%s: %v %q", bin, err, out)
		}
	}
}
