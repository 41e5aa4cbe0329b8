// Package release checks what ships: the release binaries' glibc needs,
// that they start (LD_BIND_NOW=1, arm64 under qemu, an older Debian
// userland), the .deb in a container, the .rpm installed with rpm into an
// older Debian root, install.sh against a local file server, the Python
// wheel in a venv and with pipx, the release configs against each
// other, and the module versions against known advisories. It holds only
// test helpers; scripts/release.sh makes the artifacts (NCCLWIZ_DIST points
// the tests at them; without it they build the two binaries themselves and
// skip what needs packages).
package release

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// GlibcTarget is the oldest glibc the release binaries must load on
// (RHEL/CentOS 7; aarch64's first glibc).
const GlibcTarget = "2.17"

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
