package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A small repository with three release tags (v2.10 after v2.2, as
// numbers) and every way NCCL reads a variable: the generator finds each
// name, its first and last release, and nothing from a comment.
func TestCollectNCCL(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is needed")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, "src", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q")
	write("a.cc", "NCCL_PARAM(Foo, \"FOO\", 0);\nNCCL_PARAM(Keep, \"KEEP\", 1);\n")
	run("add", "-A")
	run("commit", "-qm", "one")
	run("tag", "v2.1.0-1")
	write("a.cc", "NCCL_PARAM(Keep, \"KEEP\", 1);\nconst char* s = ncclGetEnv(\"NCCL_BAR\");\n// getenv(\"NCCL_GONE\") is no longer read\n")
	write("graph/paths.cc", "NCCLCHECK(ncclGetLevel(&l, \"NCCL_P2P_DISABLE\", \"NCCL_P2P_LEVEL\"));\n")
	run("add", "-A")
	run("commit", "-qm", "two")
	run("tag", "v2.2.0-1")
	write("debug.cc", "DEFINE_NCCL_PARAM(ncclParamX, int, NCCL_BAZ, 0,\n  flags, parser, \"desc\");\n")
	run("add", "-A")
	run("commit", "-qm", "three")
	run("tag", "v2.10.0-1")
	run("tag", "nccl4py-v0.1.0") // not a release
	reads, tags, err := CollectNCCL(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 3 || tags[2].Release != "2.10.0" {
		t.Fatalf("tags %+v", tags)
	}
	got := map[string]string{}
	for _, r := range reads {
		got[r.Name] = r.First + "-" + r.Last + " " + r.File
	}
	want := map[string]string{
		"NCCL_FOO":         "2.1.0-2.1.0 src/a.cc",
		"NCCL_KEEP":        "2.1.0-2.10.0 src/a.cc",
		"NCCL_BAR":         "2.2.0-2.10.0 src/a.cc",
		"NCCL_P2P_DISABLE": "2.2.0-2.10.0 src/graph/paths.cc",
		"NCCL_P2P_LEVEL":   "2.2.0-2.10.0 src/graph/paths.cc",
		"NCCL_BAZ":         "2.10.0-2.10.0 src/debug.cc",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("names %v", got)
	}
	src, err := Render(reads, tags, []TorchName{{"TORCH_NCCL_X", "somewhere"}})
	if err != nil || !strings.Contains(string(src), `{"NCCL_BAR", "2.2.0", "2.10.0", "src/a.cc"}`) {
		t.Errorf("render: %v\n%s", err, src)
	}
}

// TestGeneratedTableIsFresh regenerates the table from NVIDIA/nccl when
// NCCLWIZ_NCCL_GIT names a clone with its tags (CI has none; a developer
// updating the table runs it) and compares it with the committed one.
func TestGeneratedTableIsFresh(t *testing.T) {
	dir := os.Getenv("NCCLWIZ_NCCL_GIT")
	if dir == "" {
		t.Skip("set NCCLWIZ_NCCL_GIT to a clone of github.com/NVIDIA/nccl to check envvars/read_gen.go")
	}
	reads, tags, err := CollectNCCL(dir)
	if err != nil {
		t.Fatal(err)
	}
	torch, err := readTorch("torch.txt")
	if err != nil {
		t.Fatal(err)
	}
	src, err := Render(reads, tags, torch)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../read_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != string(src) {
		t.Error("envvars/read_gen.go is stale: go run ./envvars/gen -nccl " + dir)
	}
}
