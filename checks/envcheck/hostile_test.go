package envcheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/hostiletest"
)

func TestMain(m *testing.M) {
	hostiletest.Main(map[string]hostiletest.Reader{
		"nccl-conf": readConf("NCCL_CONF_FILE"),
		"home-conf": readConf("HOME"),
		"startup":   readStartup,
	})
	os.Exit(m.Run())
}

// readConf is env.nccl with the config file at p, named by
// NCCL_CONF_FILE or found as ~/.nccl.conf: nil when NCCL_DEBUG=INFO was
// read from it, else the problem it reported.
func readConf(how string) hostiletest.Reader {
	return func(ctx context.Context, p string) error {
		h := host.Local(host.LocalOptions{NoNVML: true})
		h.Env = []string{"NCCL_CONF_FILE=" + p}
		if how == "HOME" {
			h.Env, h.Home = nil, filepath.Dir(p)
		}
		ss, probs := Collect(ctx, h)
		for _, s := range ss {
			if s.Name == "NCCL_DEBUG" && s.Value == "INFO" {
				return nil
			}
		}
		var msgs []string
		for _, pr := range probs {
			msgs = append(msgs, pr.Text)
		}
		if len(msgs) == 0 {
			return errors.New("nothing read and nothing said")
		}
		return errors.New(strings.Join(msgs, "; "))
	}
}

// readStartup looks for a setting in ~/.bashrc at p.
func readStartup(ctx context.Context, p string) error {
	h := host.Local(host.LocalOptions{NoNVML: true})
	h.Home = filepath.Dir(p)
	if len(FindSetters(ctx, h, []string{"NCCL_DEBUG"})["NCCL_DEBUG"]) == 1 {
		return nil
	}
	return errors.New("not found")
}

// TestHostileConfigFiles (issue 22 item 11): NCCL_CONF_FILE=/dev/zero took
// 3.4 GB and timed out; the config and startup-file readers against every
// hostile input.
func TestHostileConfigFiles(t *testing.T) {
	valid := []byte("NCCL_DEBUG=INFO\n")
	dir := func(t *testing.T) string { return t.TempDir() }
	t.Run("NCCL_CONF_FILE", func(t *testing.T) { hostiletest.Suite(t, "nccl-conf", dir, "nccl.conf", valid, true) })
	t.Run("~/.nccl.conf", func(t *testing.T) { hostiletest.Suite(t, "home-conf", dir, ".nccl.conf", valid, true) })
	t.Run("~/.bashrc", func(t *testing.T) {
		hostiletest.Suite(t, "startup", dir, ".bashrc", []byte("export NCCL_DEBUG=INFO\n"), false)
	})
}

// TestUnreadableConfigIsAFinding: the check says it could not read the
// file, and still makes its other recommendations (env --shell printed
// "Nothing to set" after the check timed out).
func TestUnreadableConfigIsAFinding(t *testing.T) {
	h := host.Local(host.LocalOptions{NoNVML: true})
	h.Env = []string{"NCCL_CONF_FILE=/dev/zero"}
	fs, err := run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	got := titles(fs)
	if !strings.Contains(got, "An NCCL config file could not be read") || !strings.Contains(got, "NCCL_DEBUG is not set") {
		t.Errorf("findings:\n%s", got)
	}
	for _, f := range fs {
		if f.Title == "An NCCL config file could not be read" && !strings.Contains(f.Detail, "/dev/zero is a character device") {
			t.Errorf("detail: %s", f.Detail)
		}
	}
}

// TestInvalidUTF8Name (issue 22 item 17): env $'NCCL_\xff=1' and such a
// line in ~/.nccl.conf panicked the check (a regexp built from the name).
func TestInvalidUTF8Name(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".nccl.conf"), []byte("NCCL_\xfe\xff=2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("export NCCL_\xff=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := host.Local(host.LocalOptions{NoNVML: true})
	h.Env, h.Home = []string{"NCCL_\xff=1", "NCCL_DEBUG=INFO"}, home
	res := checks.Run(context.Background(), h, Checks(), checks.Options{})
	for _, f := range checks.Flatten(res) {
		if f.Severity == checks.Error || res[0].Panicked {
			t.Fatalf("%s: %s", f.Title, f.Detail)
		}
	}
	got := titles(checks.Flatten(res))
	if strings.Count(got, "is not a valid variable name") != 2 || strings.Contains(got, "\xff") && !strings.Contains(got, `\xff`) {
		t.Errorf("findings:\n%s", got)
	}
	if w := FindSetters(context.Background(), h, []string{"NCCL_\xff"})["NCCL_\xff"]; len(w) != 1 {
		t.Errorf("set in: %q", w)
	}
}

// FuzzSetsName: any name and line, valid UTF-8 or not, never panics, and
// a line built as "export NAME=…" is found for any name without spaces.
func FuzzSetsName(f *testing.F) {
	f.Add("NCCL_\xff", "export NCCL_\xff=1")
	f.Add("NCCL_TIMEOUT", "set -gx NCCL_TIMEOUT 7")
	f.Fuzz(func(t *testing.T, name, line string) {
		_ = setsName(line, name)
		if name != "" && !strings.ContainsAny(name, " \t\n\f\r=") && !setsName("export "+name+"=1", name) {
			t.Errorf("export %q=1 not found", name)
		}
	})
}

// TestRealVariablesAreNotInvented (issue 22 item 14): NCCL variables the
// hand-written table did not list were called invented and unset by the
// snippets. Every name some NCCL release reads is known now: no warning,
// no removal; one only older releases read is an Info without a fix.
func TestRealVariablesAreNotInvented(t *testing.T) {
	names := []string{"NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_CROSS_NIC", "NCCL_TOPO_FILE",
		"NCCL_GRAPH_FILE", "NCCL_IGNORE_CPU_AFFINITY", "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_NVB_DISABLE", "NCCL_P2P_NET_CHUNKSIZE",
		"NCCL_IB_SPLIT_DATA_ON_QPS"}
	h := host.Local(host.LocalOptions{NoNVML: true})
	h.Home = t.TempDir()
	h.Env = []string{"NCCL_DEBUG=INFO", "NCCL_WORK_FIFO_DEPTH=4"}
	for _, n := range names {
		h.Env = append(h.Env, n+"=x")
	}
	fs, err := run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.Severity.IsProblem() || f.Evidence["recommended_unset"] != nil {
			t.Errorf("%s: %s %v", f.Severity, f.Title, f.Evidence["recommended_unset"])
		}
	}
	if got := titles(fs); !strings.Contains(got, "NCCL_WORK_FIFO_DEPTH is read only by older NCCL releases") {
		t.Errorf("findings:\n%s", got)
	}
}
