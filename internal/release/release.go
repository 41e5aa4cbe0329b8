// Package release checks what ships: the release binaries' glibc needs,
// that they start (LD_BIND_NOW=1, arm64 under qemu, an older Debian
// userland), the .deb in a container, install.sh against a local file
// server, the Python wheel in a venv, the release configs against each
// other, and the module versions against known advisories. It holds only
// test helpers; scripts/release.sh makes the artifacts (NCCLWIZ_DIST points
// the tests at them; without it they build the two binaries themselves and
// skip what needs packages).
package release

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// GlibcTarget is the oldest glibc the release binaries must load on
// (RHEL/CentOS 7; aarch64's first glibc).
const GlibcTarget = "2.17"

// Need is one dynamic symbol a binary imports.
type Need struct {
	Symbol, Library, Version string // Version is "" for an unversioned reference
}

// Needs lists the binary's imported dynamic symbols, with the library and
// version the dynamic linker will ask for, and its DT_NEEDED libraries.
func Needs(path string) ([]Need, []string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, nil, fmt.Errorf("needed libraries of %s: %w", path, err)
	}
	syms, err := f.ImportedSymbols()
	if err != nil {
		return nil, nil, fmt.Errorf("imported symbols of %s: %w", path, err)
	}
	var out []Need
	for _, s := range syms {
		out = append(out, Need{Symbol: s.Name, Library: s.Library, Version: s.Version})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Symbol < out[j].Symbol })
	return out, libs, nil
}

var glibcVer = regexp.MustCompile(`^GLIBC_(\d+)\.(\d+)(?:\.(\d+))?$`)

// CompareVersions compares dotted versions ("2.17" < "2.34").
func CompareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// HighestGlibc is the highest GLIBC_x.y version among needs ("" if none).
func HighestGlibc(needs []Need) string {
	best := ""
	for _, n := range needs {
		if m := glibcVer.FindStringSubmatch(n.Version); m != nil {
			v := strings.TrimPrefix(n.Version, "GLIBC_")
			if best == "" || CompareVersions(v, best) > 0 {
				best = v
			}
		}
	}
	return best
}

// OldestDefinition maps each dynamic symbol a shared library defines to the
// oldest GLIBC version it is defined at: a symbol that glibc defines at
// GLIBC_2.2.5 (amd64) or GLIBC_2.17 (aarch64) was there in 2.17.
func OldestDefinition(lib string) (map[string]string, error) {
	f, err := elf.Open(lib)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", lib, err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return nil, fmt.Errorf("symbols of %s: %w", lib, err)
	}
	out := map[string]string{}
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF || !glibcVer.MatchString(s.Version) {
			continue
		}
		v := strings.TrimPrefix(s.Version, "GLIBC_")
		if old, ok := out[s.Name]; !ok || CompareVersions(v, old) < 0 {
			out[s.Name] = v
		}
	}
	return out, nil
}

// Advisory is one row of docs/development.md's advisory table.
type Advisory struct {
	Module, ID, Fixed string
}

var advisoryRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|\\s*([^|]+?)\\s*\\|\\s*`(v[^`]+)`\\s*\\|")

// ReadAdvisories parses the rows of the "Advisories checked" table of
// docs/development.md: | `module` | ID (CVE) | `fixed in` | note |.
func ReadAdvisories(path string) ([]Advisory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Advisory
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			in = strings.Contains(line, "Advisories checked")
		case in:
			if m := advisoryRow.FindStringSubmatch(line); m != nil {
				out = append(out, Advisory{Module: m[1], ID: m[2], Fixed: m[3]})
			}
		}
	}
	return out, sc.Err()
}

// semverLess compares module versions (vX.Y.Z, pre-releases and
// pseudo-versions before their release), enough for advisory ranges.
func semverLess(a, b string) bool {
	split := func(v string) ([3]int, string) {
		v = strings.TrimPrefix(v, "v")
		v, _, _ = strings.Cut(v, "+")
		core, pre, _ := strings.Cut(v, "-")
		var n [3]int
		for i, p := range strings.SplitN(core, ".", 3) {
			n[i], _ = strconv.Atoi(p)
		}
		return n, pre
	}
	na, pa := split(a)
	nb, pb := split(b)
	if na != nb {
		for i := range na {
			if na[i] != nb[i] {
				return na[i] < nb[i]
			}
		}
	}
	switch {
	case pa == pb:
		return false
	case pa == "":
		return false
	case pb == "":
		return true
	}
	return pa < pb
}

// Vulnerable lists the advisories a module version is still inside.
func Vulnerable(advs []Advisory, module, version string) []Advisory {
	var out []Advisory
	for _, a := range advs {
		if a.Module == module && semverLess(version, a.Fixed) {
			out = append(out, a)
		}
	}
	return out
}
