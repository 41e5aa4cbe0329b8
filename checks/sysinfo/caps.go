package sysinfo

import (
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/host"
)

// capSysAdminBit is CAP_SYS_ADMIN in the capability sets of
// /proc/PID/status (linux/capability.h).
const capSysAdminBit = 21

// CapSysAdmin reports whether ncclwiz has CAP_SYS_ADMIN in its effective
// set (CapEff of /proc/self/status): what remounting /dev/shm needs. A
// container started without --privileged or --cap-add SYS_ADMIN lacks it,
// even as root.
func CapSysAdmin(h *host.Host) bool {
	b, err := h.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "CapEff:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			return err == nil && v&(1<<capSysAdminBit) != 0
		}
	}
	return false
}
