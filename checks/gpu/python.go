package gpu

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/checks/procs"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/proctab"
)

// Python is the interpreter the training job uses, and how ncclwiz knows.
// One rule finds it for nccl.stack and for `ncclwiz test` (issue 25 item
// 8), so both look at the same torch:
//
//  1. --python, when given (an explicit choice beats any guess);
//  2. the interpreter of the job's ranks on this machine — the newest of
//     the user's rank processes, running or left over from the last job:
//     its virtualenv or conda env ($VIRTUAL_ENV, $CONDA_PREFIX in its
//     environment), else its command's interpreter (an absolute path, or
//     looked up on its own PATH);
//  3. the virtualenv or conda env active where ncclwiz runs;
//  4. python3, then python, on PATH.
type Python struct {
	// Path is the interpreter ("" when none was found); From says which
	// rule chose it, in words ("--python", "the job's rank pid 4242
	// ($VIRTUAL_ENV)", "PATH").
	Path, From string
	// Why says why none was found.
	Why string
}

// String names the interpreter and where it came from.
func (p Python) String() string {
	if p.Path == "" {
		return "no Python interpreter (" + p.Why + ")"
	}
	return p.Path + " (" + p.From + ")"
}

// pythonEnv are the variables of a rank's environment the rule reads.
var pythonEnv = []string{"VIRTUAL_ENV", "CONDA_PREFIX", "PATH"}

// JobPython applies the rule on h; explicit is --python ("" when not given).
func JobPython(ctx context.Context, h *host.Host, explicit string) Python {
	if explicit != "" {
		if strings.Contains(explicit, "/") {
			return Python{Path: explicit, From: "--python"}
		}
		if p := lookPath(h, explicit, h.Getenv("PATH")); p != "" {
			return Python{Path: p, From: "--python, on PATH"}
		}
		return Python{Why: "--python " + explicit + " is not on PATH"}
	}
	if p, ok := rankPython(ctx, h); ok {
		return p
	}
	for _, k := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if d := h.Getenv(k); d != "" {
			if p := envPython(h, d); p != "" {
				return Python{Path: p, From: "$" + k}
			}
		}
	}
	for _, n := range []string{"python3", "python"} {
		if p := lookPath(h, n, h.Getenv("PATH")); p != "" {
			return Python{Path: p, From: "PATH"}
		}
	}
	return Python{Why: "no running or leftover rank, no active virtualenv or conda env, and no python3 or python on PATH"}
}

// rankPython is the interpreter of the newest rank process of the user's
// on this machine (a live job's, or a leftover of the last one).
func rankPython(ctx context.Context, h *host.Host) (Python, bool) {
	t, err := proctab.Read(ctx, h, proctab.Options{EnvKeys: append(slicesClone(procs.EnvKeys), pythonEnv...)})
	if err != nil {
		return Python{}, false
	}
	// A rank's interpreter path names a file only in the rank's own mount
	// namespace: a container's (or another test node's) /usr/bin/python3 is
	// not ours, so only ranks that see the same files are asked.
	ownMnt, _ := h.Readlink("/proc/self/ns/mnt")
	var ranks []proctab.Process
	for _, p := range t.All() {
		// Only the user's own processes: root never runs another user's
		// interpreter to learn about it.
		if procs.IsRank(p) && p.UID() == h.EUID && !p.Exited() && len(p.Cmdline) > 0 && sameMountNS(h, ownMnt, p.PID) {
			ranks = append(ranks, p)
		}
	}
	sort.SliceStable(ranks, func(i, j int) bool { return ranks[i].StartTicks > ranks[j].StartTicks })
	for _, p := range ranks {
		for _, k := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
			if d := p.Env[k]; d != "" {
				if py := envPython(h, d); py != "" {
					return Python{Path: py, From: fmt.Sprintf("the job's rank pid %d ($%s)", p.PID, k)}, true
				}
			}
		}
		cmd := p.Cmdline[0]
		if !strings.HasPrefix(path.Base(cmd), "python") {
			continue // a launcher-less binary rank: not Python
		}
		if !strings.Contains(cmd, "/") {
			cmd = lookPath(h, cmd, p.Env["PATH"])
		}
		if cmd != "" && executable(h, cmd) {
			return Python{Path: cmd, From: fmt.Sprintf("the job's rank pid %d", p.PID)}, true
		}
	}
	return Python{}, false
}

// sameMountNS says whether process pid shares the mount namespace whose
// link is own. Unknown (an unreadable link) counts as different: a guess
// must not pick a file from another file system view.
func sameMountNS(h *host.Host, own string, pid int) bool {
	l, err := h.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	return err == nil && own != "" && l == own
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// envPython is the interpreter of a virtualenv or conda env: its
// bin/python, which activating the env puts first on PATH.
func envPython(h *host.Host, dir string) string {
	for _, n := range []string{"python", "python3"} {
		p := path.Join(dir, "bin", n)
		if fi, err := h.Lstat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

// lookPath finds name on the colon-separated dirs, through the host seam.
func lookPath(h *host.Host, name, dirs string) string {
	for _, d := range strings.Split(dirs, ":") {
		if d == "" || !strings.HasPrefix(d, "/") {
			continue
		}
		if p := path.Join(d, name); executable(h, p) {
			return p
		}
	}
	return ""
}

// executable reports whether p is a file with an execute bit, or a
// symlink (a virtualenv's python is one; its target is the base
// interpreter, which exec follows).
func executable(h *host.Host, p string) bool {
	fi, err := h.Lstat(p)
	if err != nil {
		return false
	}
	return fi.Mode()&fs.ModeSymlink != 0 || (fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0)
}

// sitePackages are the directories the interpreter imports from: asked of
// the interpreter itself (no import of torch: a few milliseconds), else —
// where it cannot run (fixture trees, simulations) — derived from its path.
func sitePackages(ctx context.Context, h *host.Host, py string) []string {
	if !h.Simulated && h.Runner != nil {
		// sys.path is where it imports from (site-packages, user site,
		// .pth additions) — not site's defaults, which a -S or isolated
		// interpreter does not use.
		res, err := h.Run(ctx, 5*time.Second, py, "-B", "-c", "import sys\nfor p in sys.path: print(p)")
		if err == nil && res.ExitCode == 0 {
			var out []string
			for _, l := range strings.Split(string(res.Stdout), "\n") {
				if l = strings.TrimSpace(l); strings.HasSuffix(l, "-packages") && !containsStr(out, l) {
					out = append(out, l)
				}
			}
			if len(out) > 0 {
				return out
			}
		}
	}
	// <prefix>/bin/python → <prefix>/lib/python3.*/{site,dist}-packages;
	// the system interpreter also reads Debian's /usr/lib/python3/dist-packages.
	prefix := path.Dir(path.Dir(py))
	var out []string
	for _, root := range []string{path.Join(prefix, "lib"), path.Join(prefix, "local/lib")} {
		ents, err := h.ReadDir(root)
		if err != nil {
			continue
		}
		var vers []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "python3") {
				vers = append(vers, e.Name())
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(vers)))
		for _, v := range vers {
			for _, sub := range []string{"site-packages", "dist-packages"} {
				out = append(out, path.Join(root, v, sub))
			}
		}
	}
	if h.Home != "" {
		if ents, err := h.ReadDir(h.Home + "/.local/lib"); err == nil {
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "python3") {
					out = append(out, path.Join(h.Home, ".local/lib", e.Name(), "site-packages"))
				}
			}
		}
	}
	return out
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
