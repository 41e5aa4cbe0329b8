package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// FixtureFile is the description file at the top of a fixture tree. The tree
// itself holds proc/, sys/, etc/, dev/shm/ … exactly as on a real machine.
const FixtureFile = "host.yaml"

// FixtureSpec is what host.yaml may say about the parts of a machine that
// are not files: statfs answers, environment, identity, command outputs.
type FixtureSpec struct {
	Name   string            `yaml:"name"`
	UID    int               `yaml:"uid"`
	EUID   *int              `yaml:"euid"`
	Home   string            `yaml:"home"`
	ShmDir string            `yaml:"shm_dir"`
	Env    map[string]string `yaml:"env"`
	// Statfs maps a host path (e.g. /dev/shm) to its statfs answer.
	Statfs map[string]StatFS `yaml:"statfs"`
	// Commands maps "name arg1 arg2" to a canned result.
	Commands map[string]FixtureCommand `yaml:"commands"`
	// Now pins the clock (RFC 3339), so ages of files are stable.
	Now string `yaml:"now"`
	// Interfaces is the network interface list (`ip -d addr` as data);
	// absent means the fixture says nothing about interfaces.
	Interfaces []NetInterface `yaml:"interfaces"`
	// Hosts maps names to addresses for Resolve (looked up before the tree's /etc/hosts).
	Hosts map[string][]string `yaml:"hosts"`
	// Connect maps "host:port" to ok, refused, timeout or unreachable.
	Connect map[string]string `yaml:"connect"`
}

// FixtureCommand is a canned command result.
type FixtureCommand struct {
	Stdout string `yaml:"stdout"`
	Stderr string `yaml:"stderr"`
	Exit   int    `yaml:"exit"`
}

// LoadFixture builds a Host from a fixture tree. NVML is left nil; tests and
// scenarios attach a simulated server themselves.
func LoadFixture(dir string) (*Host, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %w", dir, err)
	}
	var spec FixtureSpec
	b, err := os.ReadFile(filepath.Join(abs, FixtureFile))
	switch {
	case err == nil:
		if err := yaml.Unmarshal(b, &spec); err != nil {
			return nil, fmt.Errorf("fixture %s: parse %s: %w", dir, FixtureFile, err)
		}
	case os.IsNotExist(err):
	default:
		return nil, fmt.Errorf("fixture %s: %w", dir, err)
	}
	return FromSpec(abs, spec)
}

// FromSpec builds a fixture Host rooted at root from an in-memory spec.
func FromSpec(root string, spec FixtureSpec) (*Host, error) {
	h := &Host{
		Kind:   "fixture",
		Name:   spec.Name,
		Root:   root,
		ShmDir: spec.ShmDir,
		UID:    spec.UID,
		EUID:   spec.UID,
		Home:   spec.Home,
	}
	if h.Name == "" {
		h.Name = filepath.Base(root)
	}
	if spec.EUID != nil {
		h.EUID = *spec.EUID
	}
	if h.Home == "" {
		h.Home = "/root"
		if h.UID != 0 {
			h.Home = "/home/user"
		}
	}
	for k, v := range spec.Env {
		h.Env = append(h.Env, k+"="+v)
	}
	stat := spec.Statfs
	h.StatfsFunc = func(p string) (StatFS, error) {
		rel := "/" + strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		if s, ok := stat[rel]; ok {
			return s, nil
		}
		return StatFS{}, fmt.Errorf("no statfs data for %s in fixture", rel)
	}
	h.Runner = fixtureRunner(spec.Commands)
	h.Net = fixtureNet(root, spec)
	if spec.Now != "" {
		t, err := time.Parse(time.RFC3339, spec.Now)
		if err != nil {
			return nil, fmt.Errorf("fixture now: %w", err)
		}
		h.Clock = func() time.Time { return t }
	}
	return h, nil
}

type fixtureRunner map[string]FixtureCommand

func (f fixtureRunner) Run(_ context.Context, _ time.Duration, name string, args ...string) (CommandResult, error) {
	key := strings.TrimSpace(name + " " + strings.Join(args, " "))
	c, ok := f[key]
	if !ok {
		return CommandResult{ExitCode: -1}, fmt.Errorf("%s: %w", name, ErrCommandNotFound)
	}
	return CommandResult{Stdout: []byte(c.Stdout), Stderr: []byte(c.Stderr), ExitCode: c.Exit}, nil
}
