// Command gen builds envvars/read_gen.go, the table of every environment
// variable NCCL and PyTorch read, with the release range and source file
// of each NCCL name. ncclwiz calls a name "invented" only when no release
// reads it, so this table, not a hand-written list, decides.
//
//	go run ./envvars/gen -nccl /path/to/nccl.git -o envvars/read_gen.go
//
// -nccl is a clone (or bare git directory) of github.com/NVIDIA/nccl with
// its tags. For every release tag v2.X.Y-Z the generator runs `git grep`
// over src/ for the ways NCCL reads a variable: NCCL_PARAM(name, "SUFFIX",
// default) (the variable is NCCL_SUFFIX), DEFINE_NCCL_PARAM(name, type,
// NCCL_KEY, …) (2.30+), ncclGetEnv/getenv/ncclLoadParam("NCCL_…") and
// the names given to ncclGetLevel (NCCL_P2P_LEVEL, NCCL_NET_GDR_LEVEL …).
//
// PyTorch's repository is too large to clone here, so its names come from
// envvars/gen/torch.txt (NAME, a tab, where it was read), collected from
// the ProcessGroupNCCL sources and docs; they carry no release range.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	nccl := flag.String("nccl", "", "git directory of NVIDIA/nccl with its tags")
	torch := flag.String("torch", "envvars/gen/torch.txt", "PyTorch's names: NAME<TAB>source per line")
	out := flag.String("o", "envvars/read_gen.go", "file to write")
	flag.Parse()
	if *nccl == "" {
		fmt.Fprintln(os.Stderr, "gen: -nccl DIR is required (a clone of github.com/NVIDIA/nccl)")
		os.Exit(2)
	}
	reads, tags, err := CollectNCCL(*nccl)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	tr, err := readTorch(*torch)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	src, err := Render(reads, tags, tr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Printf("gen: %d NCCL names over %d releases (%s to %s), %d PyTorch names -> %s\n",
		len(reads), len(tags), tags[0].Release, tags[len(tags)-1].Release, len(tr), *out)
}

// Tag is one NCCL release tag.
type Tag struct {
	Name    string // v2.18.5-1
	Release string // 2.18.5
	ver     [3]int
}

var reTag = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)-\d+$`)

// Read is one NCCL variable: the first and last release that read it and
// where (the file in the last release that reads it).
type Read struct {
	Name, First, Last, File string
}

// The ways a release reads a variable; the first group is the name (or
// its suffix after NCCL_ for NCCL_PARAM).
var (
	reParam  = regexp.MustCompile(`\bNCCL_PARAM\(\s*\w+\s*,\s*"([A-Z0-9_]+)"`)
	reDefine = regexp.MustCompile(`\bDEFINE_NCCL_PARAM\(\s*\w+\s*,[^,]+,\s*(NCCL_[A-Z0-9_]+)`)
	reGetenv = regexp.MustCompile(`\b(?:ncclGetEnv|getenv|ncclLoadParam)\(\s*"(NCCL_[A-Z0-9_]+)"`)
	// ncclGetLevel(&level, "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"): every
	// name it is given.
	reLevel   = regexp.MustCompile(`\bncclGetLevel\(([^;]*)`)
	reLiteral = regexp.MustCompile(`"(NCCL_[A-Z0-9_]+)"`)
	// The union, for git grep -E (POSIX classes, no \b or \w).
	grepPattern = `NCCL_PARAM\(|(ncclGetEnv|getenv|ncclLoadParam)\( *"NCCL_|ncclGetLevel\(`
)

// CollectNCCL reads every release tag of the repository at dir.
func CollectNCCL(dir string) ([]Read, []Tag, error) {
	outTags, err := git(dir, "tag", "--list", "v2.*")
	if err != nil {
		return nil, nil, err
	}
	var tags []Tag
	for _, t := range strings.Fields(string(outTags)) {
		m := reTag.FindStringSubmatch(t)
		if m == nil {
			continue
		}
		var v [3]int
		for i := range v {
			v[i], _ = strconv.Atoi(m[i+1])
		}
		tags = append(tags, Tag{Name: t, Release: fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]), ver: v})
	}
	if len(tags) == 0 {
		return nil, nil, fmt.Errorf("no v2.X.Y-Z tags in %s (fetch the tags too)", dir)
	}
	sort.Slice(tags, func(i, j int) bool {
		a, b := tags[i].ver, tags[j].ver
		if a != b {
			return a[0] < b[0] || a[0] == b[0] && (a[1] < b[1] || a[1] == b[1] && a[2] < b[2])
		}
		return tags[i].Name < tags[j].Name
	})
	// Two tags of one release (2.5.6-1, 2.5.6-2): the later one counts.
	var uniq []Tag
	for _, t := range tags {
		if n := len(uniq); n > 0 && uniq[n-1].Release == t.Release {
			uniq[n-1] = t
			continue
		}
		uniq = append(uniq, t)
	}
	tags = uniq
	byName := map[string]*Read{}
	for _, t := range tags {
		out, err := git(dir, "grep", "-n", "-E", grepPattern, t.Name, "--", "src")
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		for name, file := range parseGrep(out, t.Name) {
			r := byName[name]
			if r == nil {
				r = &Read{Name: name, First: t.Release}
				byName[name] = r
			}
			r.Last, r.File = t.Release, file
		}
	}
	reads := make([]Read, 0, len(byName))
	for _, r := range byName {
		reads = append(reads, *r)
	}
	sort.Slice(reads, func(i, j int) bool { return reads[i].Name < reads[j].Name })
	return reads, tags, nil
}

// parseGrep turns `git grep -n` output (TAG:FILE:LINE:TEXT) into the
// names read and the file each is read in.
func parseGrep(out []byte, tag string) map[string]string {
	found := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), tag+":")
		file, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		_, text, _ := strings.Cut(rest, ":")
		text = stripComment(text)
		for _, m := range reParam.FindAllStringSubmatch(text, -1) {
			found["NCCL_"+m[1]] = file
		}
		for _, re := range []*regexp.Regexp{reDefine, reGetenv} {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				found[m[1]] = file
			}
		}
		for _, m := range reLevel.FindAllStringSubmatch(text, -1) {
			for _, l := range reLiteral.FindAllStringSubmatch(m[1], -1) {
				found[l[1]] = file
			}
		}
	}
	return found
}

// stripComment drops a // comment (a commented-out read reads nothing).
func stripComment(s string) string {
	if i := strings.Index(s, "//"); i >= 0 && !strings.Contains(s[:i], `"`) {
		return s[:i]
	}
	return s
}

func git(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"--git-dir", gitDir(dir)}, args...)...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 && args[0] == "grep" {
		return nil, nil // nothing matched
	}
	if err != nil {
		return nil, fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// gitDir accepts a work tree or a git directory.
func gitDir(dir string) string {
	if fi, err := os.Stat(dir + "/.git"); err == nil && fi.IsDir() {
		return dir + "/.git"
	}
	return dir
}

// TorchName is one of PyTorch's names and where it was read.
type TorchName struct{ Name, Source string }

func readTorch(path string) ([]TorchName, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []TorchName
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, src, ok := strings.Cut(l, "\t")
		if !ok || !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(name) {
			return nil, fmt.Errorf("%s:%d: want NAME<TAB>source", path, i+1)
		}
		out = append(out, TorchName{name, strings.TrimSpace(src)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Render writes the generated Go file.
func Render(reads []Read, tags []Tag, torch []TorchName) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by go run ./envvars/gen; DO NOT EDIT.\n\n")
	b.WriteString("package envvars\n\n")
	fmt.Fprintf(&b, "// NCCL releases scanned: %s to %s (%d release tags of github.com/NVIDIA/nccl).\n", tags[0].Release, tags[len(tags)-1].Release, len(tags))
	fmt.Fprintf(&b, "const (\n\tncclFirstScanned = %q\n\tncclLastScanned = %q\n)\n\n", tags[0].Release, tags[len(tags)-1].Release)
	b.WriteString("// ncclReads: every variable some NCCL release reads, the first and last\n// release that reads it, and the file it is read in (in the last one).\n")
	b.WriteString("var ncclReads = []sourceRead{\n")
	for _, r := range reads {
		fmt.Fprintf(&b, "\t{%q, %q, %q, %q},\n", r.Name, r.First, r.Last, r.File)
	}
	b.WriteString("}\n\n")
	b.WriteString("// torchReads: PyTorch's variables and where each was read (no release\n// range: see envvars/gen/torch.txt).\n")
	b.WriteString("var torchReads = []sourceRead{\n")
	for _, t := range torch {
		fmt.Fprintf(&b, "\t{%q, \"\", \"\", %q},\n", t.Name, t.Source)
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}
