package release

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ncclwiz/ncclwiz/internal/gobin"
)

type content struct {
	Src      string `yaml:"src"`
	Dst      string `yaml:"dst"`
	Packager string `yaml:"packager"`
	Type     string `yaml:"type"`
	Expand   bool   `yaml:"expand"`
	FileInfo struct {
		Mode int `yaml:"mode"`
	} `yaml:"file_info"`
}

type pkgInfo struct {
	Name        string    `yaml:"name"`
	PackageName string    `yaml:"package_name"`
	Maintainer  string    `yaml:"maintainer"`
	Description string    `yaml:"description"`
	Vendor      string    `yaml:"vendor"`
	Homepage    string    `yaml:"homepage"`
	License     string    `yaml:"license"`
	Section     string    `yaml:"section"`
	Priority    string    `yaml:"priority"`
	Bindir      string    `yaml:"bindir"`
	Formats     []string  `yaml:"formats"`
	Contents    []content `yaml:"contents"`
}

type goreleaser struct {
	Version int `yaml:"version"`
	Builds  []struct {
		Env     []string `yaml:"env"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
		Ldflags []string `yaml:"ldflags"`
	} `yaml:"builds"`
	Archives []struct {
		NameTemplate string `yaml:"name_template"`
	} `yaml:"archives"`
	Checksum struct {
		NameTemplate string `yaml:"name_template"`
		Algorithm    string `yaml:"algorithm"`
	} `yaml:"checksum"`
	Nfpms []pkgInfo `yaml:"nfpms"`
}

func loadConfigs(t *testing.T) (goreleaser, pkgInfo) {
	t.Helper()
	root := gobin.ModuleRoot()
	var g goreleaser
	var n pkgInfo
	for file, v := range map[string]any{".goreleaser.yaml": &g, "packaging/nfpm.yaml": &n} {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	return g, n
}

// key is a content entry with its source reduced to the file's name (the
// two configs stage the generated files in different directories).
func key(c content) string {
	return fmt.Sprintf("%s <- %s [%s] %s %o", c.Dst, path.Base(c.Src), c.Packager, c.Type, c.FileInfo.Mode)
}

var scriptArchive = regexp.MustCompile(`"\$DIST/ncclwiz_linux_\$arch\.tar\.gz"`)

func compareConfigs(g goreleaser, n pkgInfo) error {
	var errs []string
	fail := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	if g.Version != 2 || len(g.Builds) != 1 || len(g.Nfpms) != 1 || len(g.Archives) != 1 {
		return fmt.Errorf(".goreleaser.yaml: want version 2 and one build, archive and nfpm: %+v", g)
	}
	b := g.Builds[0]
	if strings.Join(b.Env, ",") != "CGO_ENABLED=0" || strings.Join(b.Goos, ",") != "linux" || strings.Join(b.Goarch, ",") != "amd64,arm64" {
		fail("build: env %v goos %v goarch %v, want CGO_ENABLED=0 linux amd64,arm64 (as scripts/release.sh)", b.Env, b.Goos, b.Goarch)
	}
	if len(b.Ldflags) != 1 || b.Ldflags[0] != "-s -w -X main.version={{ .Version }}" {
		fail("ldflags %v differ from scripts/release.sh's", b.Ldflags)
	}
	if g.Archives[0].NameTemplate != "{{ .ProjectName }}_{{ .Os }}_{{ .Arch }}" {
		fail("archive name %q: install.sh and scripts/release.sh expect ncclwiz_linux_ARCH.tar.gz", g.Archives[0].NameTemplate)
	}
	if g.Checksum.NameTemplate != "checksums.txt" || g.Checksum.Algorithm != "sha256" {
		fail("checksum %+v: install.sh reads a sha256 checksums.txt", g.Checksum)
	}
	gp := g.Nfpms[0]
	for _, f := range [][3]string{
		{"name", gp.PackageName, n.Name}, {"maintainer", gp.Maintainer, n.Maintainer}, {"description", gp.Description, n.Description},
		{"vendor", gp.Vendor, n.Vendor}, {"homepage", gp.Homepage, n.Homepage}, {"license", gp.License, n.License},
		{"section", gp.Section, n.Section}, {"priority", gp.Priority, n.Priority},
	} {
		if f[1] != f[2] {
			fail("%s: .goreleaser.yaml %q, packaging/nfpm.yaml %q", f[0], f[1], f[2])
		}
	}
	if strings.Join(gp.Formats, ",") != "deb,rpm" {
		fail("formats %v", gp.Formats)
	}
	var gk, nk []string
	for _, c := range gp.Contents {
		gk = append(gk, key(c))
	}
	// nfpm.yaml names the binary itself; goreleaser adds it at bindir.
	bin := content{Src: "ncclwiz", Dst: path.Join(gp.Bindir, "ncclwiz")}
	bin.FileInfo.Mode = 0o755
	gk = append(gk, key(bin))
	for _, c := range n.Contents {
		if strings.Contains(c.Src, "${") && !c.Expand {
			fail("packaging/nfpm.yaml: %s uses a variable without expand: true", c.Src)
		}
		c.Src = strings.ReplaceAll(c.Src, "${NCCLWIZ_BIN}", "ncclwiz")
		nk = append(nk, key(c))
	}
	sort.Strings(gk)
	sort.Strings(nk)
	if strings.Join(gk, "\n") != strings.Join(nk, "\n") {
		fail("package contents differ:\n.goreleaser.yaml:\n  %s\npackaging/nfpm.yaml:\n  %s", strings.Join(gk, "\n  "), strings.Join(nk, "\n  "))
	}
	script, err := os.ReadFile(filepath.Join(gobin.ModuleRoot(), "scripts", "release.sh"))
	if err != nil {
		return err
	}
	if !scriptArchive.Match(script) || !strings.Contains(string(script), `ldflags="-s -w -X main.version=$VERSION"`) {
		fail("scripts/release.sh no longer names archives ncclwiz_linux_$arch.tar.gz or builds with the release ldflags")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// TestConfigCheckCanFail: a package entry that only one config has is
// reported.
func TestConfigCheckCanFail(t *testing.T) {
	g, n := loadConfigs(t)
	n.Contents = n.Contents[1:]
	if err := compareConfigs(g, n); err == nil || !strings.Contains(err.Error(), "package contents differ") {
		t.Fatalf("dropping %s from nfpm.yaml went unnoticed: %v", n.Contents[0].Dst, err)
	}
}
