package cli

import (
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// complete runs cobra's hidden __complete command, as the shell scripts do,
// and returns the offered values (descriptions dropped).
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	out, errOut, code := runCLI(t, nil, append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %q: exit %d: %s", args, code, errOut)
	}
	var vals []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, ":") || l == "" {
			continue // the directive line
		}
		v, _, _ := strings.Cut(l, "\t")
		vals = append(vals, v)
	}
	return vals
}

func TestCompletionOffersFlagValues(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    []string
		notWant []string
	}{
		{"scenario", []string{"--scenario", ""}, []string{"docker-small-shm", "healthy-h100"}, nil},
		{"scenario on a subcommand", []string{"check", "--scenario", "dock"}, []string{"docker-small-shm"}, []string{"healthy-h100"}},
		{"only: ids and categories", []string{"check", "--only", "sh"}, []string{"shm", "shm.segments"}, []string{"env"}},
		{"only: second item keeps the first", []string{"check", "--only", "shm,env."}, []string{"shm,env.nccl"}, []string{"shm,shm"}},
		{"fix --apply", []string{"fix", "--apply", "shm.cleanup,proc"}, []string{"shm.cleanup,proc.stale"}, []string{"shm.cleanup,shm.cleanup"}},
		{"env --shell", []string{"env", "--shell", ""}, []string{"bash", "fish", "k8s"}, nil},
		{"test --backend", []string{"test", "--backend", ""}, []string{"auto", "torchrun", "nccl-tests"}, nil},
		{"test --rungs", []string{"test", "--rungs", "single,"}, []string{"single,all", "single,fix"}, []string{"single,single"}},
		{"lang", []string{"guides", "--lang", ""}, []string{"en", "zh"}, nil},
		{"guide IDs", []string{"guides", ""}, []string{"shm-no-space", "stale-ranks"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := complete(t, c.args...)
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("completion of %q lacks %q; got %q", c.args, w, got)
				}
			}
			for _, w := range c.notWant {
				if slices.Contains(got, w) {
					t.Errorf("completion of %q offers %q; got %q", c.args, w, got)
				}
			}
		})
	}
}

func TestVersionFlagMatchesVersionCommand(t *testing.T) {
	a, _, code := runCLI(t, nil, "--version")
	b, _, code2 := runCLI(t, nil, "version")
	if code != 0 || code2 != 0 {
		t.Fatalf("exit codes %d, %d", code, code2)
	}
	if a != b || !strings.HasPrefix(a, "ncclwiz ") {
		t.Fatalf("--version printed %q, version printed %q", a, b)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	cases := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"go install module@version", debug.BuildInfo{Main: debug.Module{Version: "v0.4.1"}}, "v0.4.1"},
		{"pseudo-version wins over vcs", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124-abcdef"}, Settings: vcs("0123456789abcdef", "false")}, "v0.0.0-20261124-abcdef"},
		{"go build in a clean checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef0123", "false")}, "devel-0123456789ab"},
		{"go build with local edits", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef0123", "true")}, "devel-0123456789ab-dirty"},
		{"no vcs stamp", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := versionFromBuildInfo(&c.bi); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestFallbackWithoutDashDashSaysToAddIt(t *testing.T) {
	_, errOut, code := runCLI(t, nil, "fallback", "torchrun", "--nproc_per_node=8", "train.py")
	if code != 2 {
		t.Fatalf("exit %d, want 2 (usage): %s", code, errOut)
	}
	if !strings.Contains(errOut, "unknown flag: --nproc_per_node") || !strings.Contains(errOut, "put -- before the command") {
		t.Fatalf("the error does not say to add --:\n%s", errOut)
	}
}
