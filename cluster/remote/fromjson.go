package remote

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ncclwiz/ncclwiz/cluster"
	"github.com/ncclwiz/ncclwiz/internal/saferead"
)

// maxReportBytes bounds one report file read by --from-json, and
// maxReportsBytes all of them together (a thousand nodes' reports are a
// few tens of MiB).
const (
	maxReportBytes  = 32 << 20
	maxReportsBytes = 256 << 20
)

// FromJSON reads reports collected by any other means: every *.json file
// in dir is one node, named after the file (node7.json → node7). A file
// that is not a report is a failed node, never a silent gap. The directory
// is opened once and each file is opened relative to it, never following
// a symlink and never blocking (a FIFO is refused, not waited on); what
// was opened is checked, not what the name was a moment before (saferead).
func FromJSON(ctx context.Context, dir string) (Outcome, error) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return Outcome{}, fmt.Errorf("read reports: %w", &os.PathError{Op: "open", Path: dir, Err: err})
	}
	d := os.NewFile(uintptr(dfd), dir)
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return Outcome{}, fmt.Errorf("read reports: %w", err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return Outcome{}, fmt.Errorf("no *.json reports in %s (save each node's `ncclwiz check --json` there as NODE.json)", dir)
	}
	sort.Strings(names)
	out := Outcome{Notes: []string{fmt.Sprintf("%d reports read from %s; no clock offsets (no round trip)", len(names), dir)}}
	total := 0
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return Outcome{}, fmt.Errorf("read reports: %w", err)
		}
		n := cluster.Node{Name: strings.TrimSuffix(name, ".json"), Delivery: "json"}
		b, err := saferead.At(ctx, int(d.Fd()), name, name, saferead.Options{Limit: maxReportBytes})
		if err == nil {
			if total += len(b); total > maxReportsBytes {
				err = fmt.Errorf("not read: the reports before it already hold %d MiB, the most --from-json reads", maxReportsBytes>>20)
			}
		}
		if err == nil {
			n.Report, err = parseReport(b)
		}
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return Outcome{}, fmt.Errorf("read reports: %w", err)
			}
			n.Status, n.Reason, n.Error = cluster.StatusFailed, "bad-report", err.Error()
		} else {
			n.Status = cluster.StatusOK
		}
		out.Nodes = append(out.Nodes, n)
	}
	return out, nil
}
