package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReportRedactsAndWritesKey(t *testing.T) {
	dir := t.TempDir()
	fix := filepath.Join(dir, "fixture")
	if err := os.MkdirAll(filepath.Join(fix, "dev/shm"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := "name: gpu-node-17.example.org\nuid: 1000\nhome: /home/alice\nenv:\n  USER: alice\n  NCCL_TIMEOUT: \"1800\"\n  MASTER_ADDR: 10.20.30.40\n  HF_TOKEN: hf_abcdefghijklmnopqrstuvwxyz123\n"
	if err := os.WriteFile(filepath.Join(fix, "host.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report.md")
	var stdout, stderr bytes.Buffer
	a := &App{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Env: []string{"NO_COLOR=1"}}
	if err := Execute(a, []string{"report", "--fixture", fix, "-o", out}); err != nil {
		t.Fatalf("report: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, leaked := range []string{"gpu-node-17", "alice", "10.20.30.40", "hf_abc"} {
		if strings.Contains(doc, leaked) {
			t.Errorf("report leaks %q", leaked)
		}
	}
	for _, want := range []string{"# ncclwiz report", "## Problems", "NCCL_TIMEOUT does not exist", "node-A", "## JSON"} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	st, err := os.Stat(out + ".map.json")
	if err != nil {
		t.Fatalf("no pseudonym key: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", st.Mode().Perm())
	}
	if !strings.Contains(stderr.String(), "keep it private") {
		t.Errorf("stderr = %q", stderr.String())
	}
}
