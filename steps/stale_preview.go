package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
	"github.com/ncclwiz/ncclwiz/internal/safefile"
)

// Preview is what the user last saw of proc.stale's plan — `ncclwiz fix`,
// `fix --dry-run`, `fix --json` or the plan printed before a prompt —
// pinned by PID and start time, so that `fix --apply proc.stale --yes`
// acts on exactly those processes and says why any dropped out.
type Preview struct {
	When time.Time `json:"when"`
	// Boot is the kernel's boot id: PIDs and start times mean nothing
	// after a reboot.
	Boot  string      `json:"boot_id"`
	Stale []PinnedPID `json:"stale"`
}

// PinnedPID is one process as it was previewed.
type PinnedPID struct {
	PID     int    `json:"pid"`
	Start   uint64 `json:"start_ticks"`
	Command string `json:"command"`
}

// PreviewMaxAge is how long a preview stands for what the user saw.
const PreviewMaxAge = time.Hour

// previewPath is $XDG_STATE_HOME/ncclwiz/stale-preview-pid-N.json
// (default ~/.local/state): per user, like the consent it records, and per
// PID namespace.
func previewPath(h *host.Host) (string, error) {
	dir := h.Getenv("XDG_STATE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		if h.Home == "" {
			return "", errors.New("no home directory to keep the preview in")
		}
		dir = filepath.Join(h.Home, ".local", "state")
	}
	// PIDs mean something only in one PID namespace: a preview seen in a
	// container is not one seen on the host.
	ns := "pid"
	if l, err := h.Readlink("/proc/self/ns/pid"); err == nil {
		ns = strings.NewReplacer(":", "-", "[", "", "]", "").Replace(l)
	}
	return filepath.Join(dir, "ncclwiz", "stale-preview-"+ns+".json"), nil
}

func bootID(h *host.Host) string {
	b, _ := h.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// RecordPreview keeps proc.stale's targets of plan as the user's last
// preview (nothing when the plan has no proc.stale: the previous preview
// then no longer stands). A practice scenario keeps nothing.
func RecordPreview(h *host.Host, plan []Fix) error {
	if h.Simulated {
		return nil
	}
	p, err := previewPath(h)
	if err != nil {
		return err
	}
	rec := Preview{When: h.Now(), Boot: bootID(h), Stale: []PinnedPID{}}
	for _, fx := range plan {
		for _, t := range fx.stale {
			rec.Stale = append(rec.Stale, PinnedPID{PID: t.PID, Start: t.Start, Command: t.Command})
		}
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("keep the preview: %w", err)
	}
	if err := safefile.Write(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("keep the preview: %w", err)
	}
	return nil
}

// LastPreview returns the user's last preview, or nil (and why) when there
// is none, it is older than PreviewMaxAge, or from before a reboot.
func LastPreview(h *host.Host) (*Preview, string) {
	if h.Simulated {
		return nil, "a practice scenario keeps no preview"
	}
	p, err := previewPath(h)
	if err != nil {
		return nil, err.Error()
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "no preview was shown before (`ncclwiz fix` shows one)"
	}
	if err != nil {
		return nil, err.Error()
	}
	var rec Preview
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Sprintf("the last preview (%s) cannot be read: %v", p, err)
	}
	switch age := h.Now().Sub(rec.When); {
	case rec.Boot != bootID(h):
		return nil, "the last preview was shown before the machine restarted"
	case age > PreviewMaxAge || age < -time.Minute:
		return nil, fmt.Sprintf("the last preview is %s old (more than %s)", age.Round(time.Minute), PreviewMaxAge)
	}
	return &rec, ""
}

// restrictToPreview keeps the targets the preview showed (same PID and
// start time) and says why the others are left alone and why previewed
// processes dropped out.
func restrictToPreview(ctx context.Context, h *host.Host, targets []rank, pv *Preview) (keep []rank, skipped []string) {
	when := pv.When.Local().Format("15:04:05")
	seen := map[int]bool{}
	for _, t := range targets {
		shown := false
		for _, p := range pv.Stale {
			shown = shown || (p.PID == t.PID && p.Start == t.Start)
		}
		if !shown {
			skipped = append(skipped, fmt.Sprintf("pid %d (%s): not in the preview you saw at %s, so left alone — `ncclwiz fix` shows it now", t.PID, clipText(t.Command, 60), when))
			continue
		}
		seen[t.PID] = true
		keep = append(keep, t)
	}
	for _, p := range pv.Stale {
		if !seen[p.PID] {
			skipped = append(skipped, fmt.Sprintf("pid %d (%s), in the preview at %s: %s", p.PID, clipText(p.Command, 60), when, whyDropped(ctx, h, p)))
		}
	}
	return keep, skipped
}

// whyDropped says why a previewed process is no longer a target.
func whyDropped(ctx context.Context, h *host.Host, p PinnedPID) string {
	now, err := proctab.ReadProcess(ctx, h, p.PID, proctab.Options{})
	switch {
	case err != nil || now.Exited():
		return "it has ended"
	case now.StartTicks != p.Start:
		return "its PID now names another process"
	}
	as, err := procs.Assess(ctx, h, procs.Options{})
	if err != nil {
		return "it could not be judged again: " + err.Error()
	}
	for _, a := range as {
		if a.PID == p.PID {
			return fmt.Sprintf("judged %s now (%s); left alone", a.Verdict, a.Reason())
		}
	}
	return "it is no longer judged a leftover rank; left alone"
}
