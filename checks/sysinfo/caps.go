package sysinfo

import (
	"strings"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// capSysAdminBit is CAP_SYS_ADMIN in the capability sets of
// /proc/PID/status (linux/capability.h).
const capSysAdminBit = 21

// CapSysAdmin reports whether ncclwiz has CAP_SYS_ADMIN in its effective
// set (CapEff of /proc/self/status): what remounting /dev/shm needs. A
// container started without --privileged or --cap-add SYS_ADMIN lacks it,
// even as root.
//
// known is false when /proc/self/status cannot be read (/proc not mounted,
// hidden): that is no evidence either way, and must not be told as "it
// lacks CAP_SYS_ADMIN".
func CapSysAdmin(h *host.Host) (has, known bool) {
	self, err := proctab.Self(h)
	if err != nil {
		return false, false
	}
	return self.CapEff&(1<<capSysAdminBit) != 0, true
}

// Remount says whether this process may remount /dev/shm inside its
// container, and why not.
type Remount struct {
	OK bool
	// Why not: no CAP_SYS_ADMIN, or an AppArmor profile that confines it
	// (Docker's docker-default denies mount even with the capability).
	Why string
}

// CanRemount decides it from CapEff and the AppArmor label of ncclwiz
// (/proc/self/attr/apparmor/current, or /proc/self/attr/current on older
// kernels): "unconfined" or no AppArmor leaves the capability in charge.
func CanRemount(h *host.Host) Remount {
	switch has, known := CapSysAdmin(h); {
	case !known:
		return Remount{Why: "ncclwiz cannot read its own capabilities (/proc/self/status is not readable: /proc is not mounted or is hidden here)"}
	case !has:
		return Remount{Why: "it lacks CAP_SYS_ADMIN"}
	}
	for _, p := range []string{"/proc/self/attr/apparmor/current", "/proc/self/attr/current"} {
		b, err := h.ReadFile(p)
		if err != nil {
			continue
		}
		label := strings.TrimSpace(strings.TrimRight(string(b), "\x00"))
		if label == "" || label == "unconfined" || !strings.Contains(label, "(enforce)") {
			break
		}
		return Remount{Why: "its AppArmor profile " + strings.TrimSuffix(label, " (enforce)") + " forbids mount, even with CAP_SYS_ADMIN"}
	}
	return Remount{OK: true}
}

// ResizeInside says whether /dev/shm can be grown from inside this
// container — the same statement the container finding, shm.mount's advice,
// shm.remount and container.shm make: only with permission to mount
// (shm.remount is then offered), and only until the container restarts.
func ResizeInside(r Remount) string {
	if r.OK {
		return "This container has CAP_SYS_ADMIN, so shm.remount can grow it now, but only until the container restarts."
	}
	return "/dev/shm cannot be resized from inside this container: " + r.Why + " (shm.remount is not possible here)."
}
