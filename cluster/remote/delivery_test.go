package remote

import (
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/cluster"
)

// The delivery note names the checksum of the build each node got: an
// arm64 node gets the --binary arm64 build, whose sum is not this one's.
func TestDeliveryNotesNameEachBuild(t *testing.T) {
	amd := binInfo{arch: "amd64", sum: strings.Repeat("a", 64)}
	arm := binInfo{arch: "arm64", sum: strings.Repeat("b", 64)}
	copied := func(name string) cluster.Node { return cluster.Node{Name: name, Delivery: "copied"} }
	for _, tc := range []struct {
		name    string
		nodes   []cluster.Node
		ds      []delivered
		want    []string
		notWant []string
	}{
		{"one build", []cluster.Node{copied("a1"), copied("a2")}, []delivered{{why: "is missing", bin: amd}, {why: "is missing", bin: amd}},
			[]string{"on 2 nodes (sha256 aaaaaaaaaaaa…", "there /tmp/ncclwiz is missing"}, []string{"bbbb", "linux/"}},
		{"two builds", []cluster.Node{copied("a1"), copied("g1"), copied("g2")}, []delivered{{bin: amd}, {bin: arm}, {bin: arm}},
			[]string{"on 3 nodes", "the linux/amd64 build, sha256 aaaaaaaaaaaa…, on 1", "the linux/arm64 build, sha256 bbbbbbbbbbbb…, on 2"}, nil},
		{"shared and copied", []cluster.Node{{Name: "s1", Delivery: "shared"}, copied("g1")}, []delivered{{}, {bin: arm}},
			[]string{"shared path /tmp/ncclwiz", "on 1 node (sha256 bbbbbbbbbbbb…"}, []string{"aaaa"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(deliveryNotes(Options{RemotePath: "/tmp/ncclwiz"}, tc.nodes, tc.ds), "\n")
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("notes lack %q:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("notes hold %q:\n%s", w, got)
				}
			}
		})
	}
}
