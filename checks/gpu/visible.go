package gpu

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// VisibleEntry is one item of CUDA_VISIBLE_DEVICES.
type VisibleEntry struct {
	Raw string
	// Index is set for numeric entries; UUID for GPU-/MIG- entries.
	Index int
	UUID  string
	// Problem says why CUDA will not use it (and everything after it).
	Problem string
	// GPU is the physical GPU it maps to (-1 when unknown).
	GPU int
}

// ParseVisible parses CUDA_VISIBLE_DEVICES against the GPUs NVML listed
// (which may be empty when NVML is unavailable). CUDA uses the entries in
// order and stops at the first invalid one (CUDA C++ Programming Guide,
// "CUDA Environment Variables").
func ParseVisible(value string, devs []Device) []VisibleEntry {
	var out []VisibleEntry
	seen := map[int]bool{}
	for _, raw := range strings.Split(value, ",") {
		raw = strings.TrimSpace(raw)
		e := VisibleEntry{Raw: raw, Index: -1, GPU: -1}
		switch {
		case raw == "":
			e.Problem = "empty entry"
		case strings.HasPrefix(raw, "GPU-") || strings.HasPrefix(raw, "MIG-"):
			e.UUID = raw
			if len(devs) > 0 && strings.HasPrefix(raw, "GPU-") {
				matches := 0
				for _, d := range devs {
					if strings.HasPrefix(d.UUID, raw) {
						e.GPU, matches = d.Index, matches+1
					}
				}
				switch matches {
				case 0:
					e.Problem = "no GPU with this UUID here"
				case 1:
				default:
					e.Problem, e.GPU = "UUID prefix matches several GPUs", -1
				}
			}
		default:
			n, err := strconv.Atoi(raw)
			switch {
			case err != nil || n < 0:
				e.Problem = "not an index or a GPU-/MIG- UUID"
			case len(devs) > 0 && n >= len(devs):
				e.Index, e.Problem = n, fmt.Sprintf("index %d but this machine has %s", n, units.Count(len(devs), "GPU"))
			default:
				e.Index, e.GPU = n, n
			}
		}
		if e.Problem == "" && e.GPU >= 0 {
			if seen[e.GPU] {
				e.Problem = fmt.Sprintf("GPU %d is listed twice", e.GPU)
			}
			seen[e.GPU] = true
		}
		out = append(out, e)
	}
	return out
}

func runVisible(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	value, set := h.LookupEnv("CUDA_VISIBLE_DEVICES")
	order := h.Getenv("CUDA_DEVICE_ORDER")
	s := Probe(ctx, h)
	devs := s.Devices
	if !set {
		f := checks.Finding{Severity: checks.OK, Title: "CUDA_VISIBLE_DEVICES is unset: every GPU is visible"}
		if s.OK() {
			f.Title = fmt.Sprintf("CUDA_VISIBLE_DEVICES is unset: all %s visible", units.Count(len(devs), "GPU is", "GPUs are"))
		}
		return append([]checks.Finding{f}, orderFinding(order, devs)...), nil
	}
	if strings.TrimSpace(value) == "" {
		return []checks.Finding{{Severity: checks.Error, Title: "CUDA_VISIBLE_DEVICES is set but empty: no GPU is visible",
			Detail: "An empty value hides every GPU, so CUDA reports 'no CUDA-capable device is detected'. Unset it, or list the GPUs to use.",
			Guide:  "cuda-driver", Evidence: map[string]any{"value": ""}}}, nil
	}
	entries := ParseVisible(value, devs)
	var mapping []string
	var fs []checks.Finding
	usable := 0
	for i, e := range entries {
		if e.Problem != "" {
			after := ""
			if i < len(entries)-1 {
				after = fmt.Sprintf(" CUDA stops at an invalid entry, so the %d entr(ies) after it are invisible too.", len(entries)-1-i)
			}
			fs = append(fs, checks.Finding{Severity: checks.Error,
				Title:  fmt.Sprintf("CUDA_VISIBLE_DEVICES=%s: entry %q: %s", value, e.Raw, e.Problem),
				Detail: "CUDA uses the entries in order and ignores everything from the first invalid one." + after + " Ranks that pick a GPU by local rank may then collide or find none.",
				Guide:  "device-mapping", Evidence: map[string]any{"value": value}})
			break
		}
		usable++
		if e.GPU >= 0 {
			mapping = append(mapping, fmt.Sprintf("cuda:%d → GPU %d (%s)", i, e.GPU, nameOf(devs, e.GPU)))
		} else {
			mapping = append(mapping, fmt.Sprintf("cuda:%d → %s", i, e.Raw))
		}
	}
	head := checks.Finding{Severity: checks.OK, Title: fmt.Sprintf("CUDA_VISIBLE_DEVICES=%s: %s visible", value, units.Count(usable, "GPU")),
		Evidence: map[string]any{"value": value, "mapping": mapping}}
	if len(fs) == 0 && usable > 1 && !contiguous(entries) {
		head.Severity = checks.Info
		head.Detail = "The visible GPUs are renumbered from 0 in the order listed; torch's cuda:N is the N-th entry, not physical GPU N."
	}
	fs = append([]checks.Finding{head}, fs...)
	return append(fs, orderFinding(order, devs)...), nil
}

func nameOf(devs []Device, i int) string {
	if i < len(devs) {
		return devs[i].Name
	}
	return "?"
}

func contiguous(es []VisibleEntry) bool {
	for i, e := range es {
		if e.Index != i {
			return false
		}
	}
	return true
}

// orderFinding explains CUDA_DEVICE_ORDER when it matters: CUDA numbers the
// fastest GPU first by default, NVML/nvidia-smi by PCI bus ID, and on mixed
// machines the two differ.
func orderFinding(order string, devs []Device) []checks.Finding {
	models := map[string]bool{}
	for _, d := range devs {
		models[d.Name] = true
	}
	if len(models) < 2 || order == "PCI_BUS_ID" {
		return nil
	}
	return []checks.Finding{{Severity: checks.Warn, Title: "Mixed GPUs and CUDA_DEVICE_ORDER is not PCI_BUS_ID",
		Detail: "CUDA numbers the fastest GPU first (FASTEST_FIRST, the default) while nvidia-smi and NVML number by PCI bus ID, so cuda:0 may not be nvidia-smi's GPU 0. Set CUDA_DEVICE_ORDER=PCI_BUS_ID so both agree.",
		Guide:  "device-mapping"}}
}
