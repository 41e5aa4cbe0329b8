package hang

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

const dmesgISO = `2026-11-24T04:10:00,000000+00:00 NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.
2026-11-24T05:01:02,123456+00:00 NVRM: Xid (PCI:0000:3b:00): 94, pid=4242, name=python3, Ch 00000008
2026-11-24T05:02:00,000000+00:00 eth0: link up
2026-11-24T05:03:10,500000+00:00 INFO: task python3:4243 blocked for more than 120 seconds.
2026-11-24T05:04:00,000000+00:00 Out of memory: Killed process 4244 (python3) total-vm:1000kB, anon-rss:900kB
2026-11-24T05:04:30,000000+00:00 Out of memory: Killed process 777 (java) total-vm:1000kB
`

func TestKernelEvents(t *testing.T) {
	since := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		cmds     map[string]host.FixtureCommand
		kinds    string
		suspects string
		note     bool
	}{
		{name: "dmesg", cmds: map[string]host.FixtureCommand{"dmesg --time-format=iso": {Stdout: dmesgISO}},
			kinds: "[xid hung_task oom oom]", suspects: "[1 2]"},
		{name: "journalctl when dmesg is refused", cmds: map[string]host.FixtureCommand{
			"dmesg --time-format=iso": {Stderr: "dmesg: read kernel buffer failed: Operation not permitted", Exit: 1},
			fmt.Sprintf("journalctl -k --no-pager -o short-iso-precise --since @%d", since.Unix()): {Stdout: "2026-11-24T05:03:10.500000+00:00 gpu1 kernel: INFO: task python3:4243 blocked for more than 120 seconds.\n"}},
			kinds: "[hung_task]", suspects: "[1]"},
		{name: "unreadable", cmds: map[string]host.FixtureCommand{"dmesg --time-format=iso": {Stderr: "dmesg: read kernel buffer failed: Operation not permitted", Exit: 1}},
			kinds: "[]", suspects: "[]", note: true},
	}
	ranks := []RankSample{{Rank: 0, PID: 4242}, {Rank: 1, PID: 4243}, {Rank: 2, PID: 4244}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := ft.Tree(t, map[string]any{}, host.FixtureSpec{Commands: tc.cmds})
			evs, note := KernelEvents(context.Background(), h, since)
			var kinds []string
			for _, e := range evs {
				kinds = append(kinds, e.Kind)
			}
			if fmt.Sprint(kinds) != tc.kinds || (note != "") != tc.note {
				t.Fatalf("kinds %v note %q, want %s", kinds, note, tc.kinds)
			}
			if got := fmt.Sprint(Suspects(kernelEvidence(evs, ranks))); got != tc.suspects {
				t.Fatalf("suspects %s, want %s", got, tc.suspects)
			}
		})
	}
}
