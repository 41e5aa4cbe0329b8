package explain

import (
	"strings"
	"testing"
)

func TestContinuation(t *testing.T) {
	warn := "node1:5:9 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<4"
	tests := []struct {
		name, prev, next, want string
	}{
		{"bare continuation", warn, "1235> failed : Connection refused", "1235> failed : Connection refused"},
		{"repeated rank prefix", "[rank3]:" + warn, "[rank3]:1235> failed", "1235> failed"},
		{"pdsh prefix", "gpu7: " + warn, "gpu7: 1235> failed", "1235> failed"},
		{"other rank", "[rank3]:" + warn, "[rank2]:1235> failed", ""},
		{"next NCCL line", warn, "node1:5:9 [0] NCCL INFO misc/socket.cc:565 -> 2", ""},
		{"indented traceback", warn, "  File \"x.py\", line 3", ""},
		{"exception", warn, "RuntimeError: NCCL error", ""},
		{"dotted exception", warn, "torch.distributed.DistBackendError: NCCL error", ""},
		{"glog line", warn, "E0412 09:41:02.331000 139822 api.py:869] failed", ""},
		{"blank", warn, "", ""},
		{"bracketed", warn, "[W socket.cpp:401] x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(continuation([]byte(tt.prev), []byte(tt.next), len(tt.prev), 0)); got != tt.want {
				t.Errorf("continuation = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMayBeCutAndJoin(t *testing.T) {
	long := "node1:5:9 [0] transport/shm.cc:10 NCCL WARN Error while creating shared memory segment /dev/shm/x (size"
	for _, tt := range []struct {
		line string
		want bool
	}{
		{long, true},
		{"node1:5:9 [0] NCCL WARN short", false},
		{long + ".", false},
		{long + ":", true},                // wrapped at the colon: the next line decides
		{strings.Repeat("x", 100), false}, // neither warning nor error
	} {
		if got := mayBeCut([]byte(tt.line)); got != tt.want {
			t.Errorf("mayBeCut(%q) = %v", tt.line, got)
		}
	}
	// A cut at a terminal width loses nothing; a word wrap ate a space.
	at80 := strings.Repeat("a", 79) + "b"
	if got := string(joinLines(nil, []byte(at80), []byte("cd"), !termWidths[len(at80)])); got != at80+"cd" {
		t.Errorf("terminal cut joined as %q", got)
	}
	if got := string(joinLines(nil, []byte(long), []byte("9637888)"), !termWidths[len(long)])); got != long+" 9637888)" {
		t.Errorf("word wrap joined as %q", got)
	}
}

// Lines wrapped over several lines, across the held line's input end.
func TestJoinedMatching(t *testing.T) {
	e := testExplainer(t)
	three := "gpu1:1:1 [0] misc/socket.cc:622 NCCL WARN socketTryAccept: Accept failed: Too many\nopen\nfiles\n"
	for name, log := range map[string]string{
		"three lines": three,
		"held at EOF": "gpu1:1:1 [0] misc/socket.cc:622 NCCL WARN socketTryAccept: Accept failed: Too many open files",
	} {
		r := analyze(t, e, log)
		if root := rootOf(r); root == nil || root.ID != "fd-exhaustion" || root.Evidence[0].Line != 1 {
			t.Errorf("%s: diagnoses %v", name, diagIDs(r))
		}
	}
}
