// Package all lists every check ncclwiz knows, in report order.
package all

import (
	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/envcheck"
	"github.com/ncclwiz/ncclwiz/checks/gpu"
	"github.com/ncclwiz/ncclwiz/checks/netcheck"
	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/checks/shm"
	"github.com/ncclwiz/ncclwiz/checks/sysinfo"
)

// Registry returns all checks. Each domain package contributes its checks
// through a Checks() function; add new domains here.
func Registry() (*checks.Registry, error) {
	var cs []checks.Check
	for _, domain := range [][]checks.Check{
		shm.Checks(),
		sysinfo.Checks(),
		envcheck.Checks(),
		procs.Checks(),
		gpu.Checks(),
		netcheck.Checks(),
	} {
		cs = append(cs, domain...)
	}
	return checks.NewRegistry(cs...)
}
