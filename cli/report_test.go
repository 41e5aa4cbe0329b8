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

// reportFixture is a fixture host with names to pseudonymise, so report
// writes a key.
func reportFixture(t *testing.T) string {
	t.Helper()
	fix := filepath.Join(t.TempDir(), "fixture")
	if err := os.MkdirAll(filepath.Join(fix, "dev/shm"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := "name: gpu-node-17.example.org\nuid: 1000\nhome: /home/alice\nenv:\n  USER: alice\n  MASTER_ADDR: 10.20.30.40\n"
	if err := os.WriteFile(filepath.Join(fix, "host.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return fix
}

// TestReportOutputFiles reproduces issue 14 item 8: `report -o F` followed
// a symlink planted at F.map.json (overwriting its target) and wrote the
// pseudonym key into an existing world-readable file. Now a symlink at F or
// F.map.json is refused before anything is written; an existing file is
// replaced by a new one (a hard link to the old file keeps the old bytes,
// so nothing was written through it) and the key is 0600.
func TestReportOutputFiles(t *testing.T) {
	fix := reportFixture(t)
	const precious = "someone else's file\n"
	run := func(out string) (string, int) {
		_, stderr, code := runCLI(t, []string{"NO_COLOR=1"}, "report", "--fixture", fix, "-o", out)
		return stderr, code
	}
	for _, planted := range []string{".map.json", ""} {
		t.Run("symlink at F"+planted, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte(precious), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "report.md")
			if err := os.Symlink(victim, out+planted); err != nil {
				t.Fatal(err)
			}
			stderr, code := run(out)
			// The path is named, not redacted (issue 22 item 19: "pseudonym
			// key: [redacted] is a symbolic link").
			if code != 2 || !strings.Contains(stderr, "symbolic link") || !strings.Contains(stderr, out+planted+" is a symbolic link") {
				t.Errorf("exit %d, stderr %q; want a refusal naming the symlink", code, stderr)
			}
			if b, _ := os.ReadFile(victim); string(b) != precious {
				t.Errorf("the symlink's target was written: %q", b)
			}
			if fi, err := os.Lstat(out + planted); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the symlink itself was replaced: %v", err)
			}
			if planted != "" {
				if _, err := os.Stat(out); err == nil {
					t.Error("the report was written although its key could not be")
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 2 {
				t.Errorf("files left in the directory: %v", entries)
			}
		})
	}
	t.Run("existing world-readable files", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "report.md")
		for _, p := range []string{out, out + ".map.json"} {
			if err := os.WriteFile(p, []byte(precious), 0o644); err != nil {
				t.Fatal(err)
			}
			// A second name for the same inode shows whether the old file
			// was written through or replaced.
			if err := os.Link(p, p+".link"); err != nil {
				t.Fatal(err)
			}
		}
		if stderr, code := run(out); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, p := range []string{out + ".link", out + ".map.json.link"} {
			if b, _ := os.ReadFile(p); string(b) != precious {
				t.Errorf("%s was written through: %q", filepath.Base(p), b)
			}
		}
		key, err := os.ReadFile(out + ".map.json")
		if err != nil || !strings.Contains(string(key), "gpu-node-17.example.org") {
			t.Fatalf("key: %v %q", err, key)
		}
		if fi, _ := os.Stat(out + ".map.json"); fi.Mode().Perm() != 0o600 {
			t.Errorf("key mode %v, want 0600", fi.Mode().Perm())
		}
		if doc, _ := os.ReadFile(out); !strings.Contains(string(doc), "# ncclwiz report") {
			t.Errorf("report not replaced: %q", doc)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
	})
	t.Run("directory at F", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "report.md")
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		if stderr, code := run(out); code != 2 || !strings.Contains(stderr, "not a regular file") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
}
