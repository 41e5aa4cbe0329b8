package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/host"
)

func newVersionCmd(a *App) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the ncclwiz version and build details",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := a.VersionString()
			nv := "with NVML (cgo)"
			if !host.NVMLAvailableInBuild {
				nv = "without NVML (built with CGO_ENABLED=0)"
			}
			_, err := fmt.Fprintf(a.Stdout, "ncclwiz %s (%s, %s/%s, %s)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH, nv)
			return err
		},
	}
}

// VersionString is the version set at build time, the module version when
// installed with go install, or "dev".
func (a *App) VersionString() string {
	if a.Version != "" {
		return a.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
