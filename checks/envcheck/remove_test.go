package envcheck

import (
	"context"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/host"
	ft "github.com/ncclwiz/ncclwiz/internal/fixturetest"
)

// Where a variable is set, in every startup-file syntax; comments, other
// names with the same prefix and mere uses are not settings.
func TestFindSetters(t *testing.T) {
	h := ft.Tree(t, map[string]any{
		"/home/u/.bashrc": "export NCCL_TIMEOUT=1800\n# export NCCL_TIMEOUT=1\necho $NCCL_TIMEOUT\nexport NCCL_TIMEOUT_X=2\n" +
			"  declare -x NCCL_TIMEOUT=3\nNCCL_TIMEOUT=4 python train.py\nreadonly NCCL_TIMEOUT=5\n",
		"/home/u/.zshrc":                   "typeset -gx NCCL_TIMEOUT=6\n",
		"/home/u/.config/fish/config.fish": "set -gx NCCL_TIMEOUT 7\nset -q NCCL_TIMEOUTX\n",
		"/etc/environment":                 "NCCL_TIMEOUT=\"8\"\n",
		"/etc/profile.d/nccl.sh":           "export PATH=/x NCCL_DEBUG=INFO\nexport NCCL_TIMEOUT=9\n",
		"/etc/profile.d/nccl.csh":          "setenv NCCL_TIMEOUT 10\n",
		"/etc/csh.cshrc":                   "setenv NCCL_TIMEOUT 11\n",
	}, host.FixtureSpec{UID: 1000, Home: "/home/u"})
	got := FindSetters(context.Background(), h, []string{"NCCL_TIMEOUT"})["NCCL_TIMEOUT"]
	want := []string{
		"~/.bashrc:1: export NCCL_TIMEOUT=1800", "~/.bashrc:5: declare -x NCCL_TIMEOUT=3", "~/.bashrc:6: NCCL_TIMEOUT=4 python train.py",
		"~/.bashrc:7: readonly NCCL_TIMEOUT=5", "~/.zshrc:1: typeset -gx NCCL_TIMEOUT=6", "~/.config/fish/config.fish:1: set -gx NCCL_TIMEOUT 7",
		"/etc/environment:1: NCCL_TIMEOUT=\"8\"", "/etc/profile.d/nccl.sh:2: export NCCL_TIMEOUT=9",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Without a home directory only the system files are read.
	h.Home = ""
	if got := FindSetters(context.Background(), h, []string{"NCCL_TIMEOUT"})["NCCL_TIMEOUT"]; len(got) != 2 {
		t.Errorf("no home: %q", got)
	}
}
