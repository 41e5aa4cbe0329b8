package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/host"
)

// versionInfo is `version --json` (docs/version.schema.json, schema 1).
type versionInfo struct {
	Schema    int    `json:"schema"`
	Tool      string `json:"tool"`
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	NVML      bool   `json:"nvml"`
}

func newVersionCmd(a *App) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the ncclwiz version and build details (plain, or --json)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return writeJSON(a, a.versionInfo())
			}
			_, err := fmt.Fprintln(a.Stdout, a.versionLine())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the build details as JSON (docs/version.schema.json)")
	return cmd
}

func (a *App) versionInfo() versionInfo {
	v := versionInfo{Schema: 1, Tool: "ncclwiz", Version: a.VersionString(),
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, NVML: host.NVMLAvailableInBuild}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Revision, v.Modified = vcsRevision(bi)
	}
	return v
}

// versionLine is what both `version` and `--version` print.
func (a *App) versionLine() string {
	v := a.versionInfo()
	nv := "NVML by dlopen"
	if !v.NVML {
		nv = "without NVML (static -tags nonvml build)"
	}
	return fmt.Sprintf("ncclwiz %s (%s, %s/%s, %s)", v.Version, v.GoVersion, v.OS, v.Arch, nv)
}

// VersionString is the version set at build time (-ldflags -X), else the
// module version of a `go install`, else the VCS revision a `go build` in a
// checkout stamps, else "dev".
func (a *App) VersionString() string {
	if a.Version != "" {
		return a.Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return versionFromBuildInfo(bi)
}

func versionFromBuildInfo(bi *debug.BuildInfo) string {
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	rev, modified := vcsRevision(bi)
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel-" + rev
	if modified {
		v += "-dirty"
	}
	return v
}

// vcsRevision reads the commit and dirty flag `go build` stamps (-buildvcs).
func vcsRevision(bi *debug.BuildInfo) (rev string, modified bool) {
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev, modified
}
