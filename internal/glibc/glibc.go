// Package glibc reads what a Linux binary asks of the C library: the
// symbols and GLIBC versions the dynamic linker resolves at start. The
// release tests hold the binaries to glibc 2.17 with it, and cluster check
// compares a binary's need with a node's glibc before sending it there.
package glibc

import (
	"debug/elf"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/ncclwiz/ncclwiz/internal/dotted"
)

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

// HighestGlibc is the highest GLIBC_x.y version among needs ("" if none).
func HighestGlibc(needs []Need) string {
	best := ""
	for _, n := range needs {
		if m := glibcVer.FindStringSubmatch(n.Version); m != nil {
			v := strings.TrimPrefix(n.Version, "GLIBC_")
			if best == "" || dotted.Compare(v, best) > 0 {
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
		if old, ok := out[s.Name]; !ok || dotted.Compare(v, old) < 0 {
			out[s.Name] = v
		}
	}
	return out, nil
}

// Required is the highest GLIBC version the binary at path asks for: ""
// when it asks for none (a static binary, or one built like the release).
func Required(path string) (string, error) {
	needs, _, err := Needs(path)
	if err != nil {
		return "", err
	}
	return HighestGlibc(needs), nil
}
