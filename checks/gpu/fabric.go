package gpu

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

var versionRe = regexp.MustCompile(`\b(\d{3,}\.\d+(?:\.\d+)?)\b`)

// kernelDriver reads the kernel module version from /proc/driver/nvidia/version.
func kernelDriver(h *host.Host) string {
	b, err := h.ReadFile("/proc/driver/nvidia/version")
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return versionRe.FindString(first)
}

func runFabric(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	ents, err := h.ReadDir("/dev")
	if err != nil {
		return nil, err
	}
	var switches []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "nvidia-nvswitch") && e.Name() != "nvidia-nvswitchctl" {
			switches = append(switches, e.Name())
		}
	}
	if len(switches) == 0 {
		return []checks.Finding{{Severity: checks.OK, Title: "No NVSwitch here: Fabric Manager is not needed"}}, nil
	}
	driver := kernelDriver(h)
	if driver == "" {
		if s := Probe(ctx, h); s.OK() {
			driver = s.Driver
		}
	}
	ev := map[string]any{"nvswitches": len(switches), "driver": driver}
	res, err := h.Run(ctx, 5*time.Second, "systemctl", "is-active", "nvidia-fabricmanager")
	state := strings.TrimSpace(string(res.Stdout))
	if err != nil {
		return []checks.Finding{{Severity: checks.Skipped, Title: units.Count(len(switches), "NVSwitch device") + "; Fabric Manager state unknown",
			Detail:   "systemctl is not available here (a container?). On the host: systemctl status nvidia-fabricmanager. NVSwitch systems cannot run CUDA work without it.",
			Evidence: ev, Guide: "fabric-manager"}}, nil
	}
	ev["service_state"] = state
	if state != "active" {
		return []checks.Finding{{Severity: checks.Error, Title: fmt.Sprintf("NVSwitch system, but nvidia-fabricmanager is %s", state),
			Detail: "GPUs behind NVSwitch cannot run CUDA work until Fabric Manager has set up the switches: CUDA reports 'system not yet initialized' (802). " +
				"Install the Fabric Manager package matching the driver exactly, then: sudo systemctl enable --now nvidia-fabricmanager.",
			Evidence: ev, Guide: "fabric-manager"}}, nil
	}
	fm := ""
	if r, err := h.Run(ctx, 5*time.Second, "nv-fabricmanager", "--version"); err == nil {
		fm = versionRe.FindString(string(r.Stdout) + string(r.Stderr))
	}
	ev["fabricmanager_version"] = fm
	if fm != "" && driver != "" && fm != driver {
		return []checks.Finding{{Severity: checks.Error, Title: fmt.Sprintf("Fabric Manager %s does not match driver %s", fm, driver),
			Detail:   "Fabric Manager must be the same version as the driver; install the matching package and restart it (then reset the GPUs or reboot).",
			Evidence: ev, Guide: "fabric-manager"}}, nil
	}
	return []checks.Finding{{Severity: checks.OK, Title: units.Count(len(switches), "NVSwitch device") + "; nvidia-fabricmanager is active", Evidence: ev}}, nil
}
