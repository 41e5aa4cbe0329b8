package remote

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ncclwiz/ncclwiz/cluster"
)

// maxReportBytes bounds one report file read by --from-json.
const maxReportBytes = 32 << 20

// FromJSON reads reports collected by any other means: every *.json file
// in dir is one node, named after the file (node7.json → node7). A file
// that is not a report is a failed node, never a silent gap.
func FromJSON(dir string) (Outcome, error) {
	ents, err := os.ReadDir(dir)
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
	for _, name := range names {
		n := cluster.Node{Name: strings.TrimSuffix(name, ".json"), Delivery: "json"}
		b, err := readBounded(filepath.Join(dir, name))
		if err == nil {
			n.Report, err = parseReport(b)
		}
		if err != nil {
			n.Status, n.Reason, n.Error = cluster.StatusFailed, "bad-report", err.Error()
		} else {
			n.Status = cluster.StatusOK
		}
		out.Nodes = append(out.Nodes, n)
	}
	return out, nil
}

func readBounded(path string) ([]byte, error) {
	// Lstat: a report directory is read as files, a symlink is not followed
	// somewhere else.
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", filepath.Base(path))
	}
	if fi.Size() > maxReportBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB", filepath.Base(path), maxReportBytes>>20)
	}
	return os.ReadFile(path)
}
