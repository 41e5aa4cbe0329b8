package report

import (
	"encoding/json"
	"strings"
	"testing"
)

// Issue 25 item 10: evidence is for people — the segment's name first,
// sizes and ages in human units, no raw inode, nothing "unknown" — for the
// evidence as checks make it and as it comes back from JSON (floats).
func TestHumanEvidence(t *testing.T) {
	ev := map[string]any{
		"dir": "/dev/shm", "pid_namespace": "unknown", "all_holders_visible": true, "fs_size_bytes": int64(8 << 20),
		"segments": []map[string]any{{"name": "nccl-Ab12Cd", "kind": "nccl", "size": int64(9637888), "allocated": int64(9637888),
			"uid": 1000, "age_seconds": int64(15), "state": "in use", "inode": uint64(8), "holders": []string{"20447/python3 via fd"}}},
		"recommended_env_reason": map[string]string{"NCCL_DEBUG": "why"},
	}
	var fromJSON map[string]any
	b, _ := json.Marshal(ev)
	if err := json.Unmarshal(b, &fromJSON); err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]map[string]any{"as made": ev, "from JSON": fromJSON} {
		got := strings.Join(HumanEvidence(e), "\n")
		for _, want := range []string{"dir: /dev/shm", "all holders visible: yes", "fs size 8 MiB", "segments:",
			"  - nccl-Ab12Cd — in use, nccl, 15 s old, allocated 9.2 MiB, size 9.2 MiB, held by 20447/python3 via fd, uid: 1000"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: lacks %q:\n%s", name, want, got)
			}
		}
		for _, not := range []string{"unknown", "inode", "age_seconds", "9637888", "recommended_env_reason"} {
			if strings.Contains(got, not) {
				t.Errorf("%s: shows %q:\n%s", name, not, got)
			}
		}
	}
	if got := WrapEvidence("  - nccl-Ab12Cd — in use, allocated 9.2 MiB, 15 s old, held by 20447/python3 via fd", 40); len(got) < 2 || !strings.HasPrefix(got[1], "    ") {
		t.Errorf("wrapped: %q", got)
	}
	for s, want := range map[float64]string{15: "15 s", 300: "5 min", 7260: "2 h 1 min", 3 * 86400: "3 days"} {
		if got := duration(s); got != want {
			t.Errorf("duration(%v) = %q, want %q", s, got, want)
		}
	}
}
