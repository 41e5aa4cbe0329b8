package envcheck

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// StartupFiles are where a variable is usually exported for every shell:
// the user's files (~ is the home directory) and the system-wide ones.
// /etc/profile.d/*.sh is listed too.
var StartupFiles = []string{"~/.bashrc", "~/.bash_profile", "~/.bash_login", "~/.profile", "~/.zshenv", "~/.zprofile", "~/.zshrc",
	"~/.config/fish/config.fish", "/etc/environment", "/etc/profile", "/etc/bash.bashrc", "/etc/zsh/zshenv"}

// setsName reports whether line sets the variable name in sh/bash/zsh
// (with or without export, declare -x, typeset -x, readonly),
// /etc/environment, fish (set -gx NAME …) or csh (setenv NAME …). It is
// a plain scan, not a regexp built from name: a name is data from the
// environment or a config file and may hold any bytes, invalid UTF-8
// included (a regexp of it did not compile, and ncclwiz panicked).
func setsName(line, name string) bool {
	s := trimSpace(line)
	if rest, ok := cutWord(s, "setenv"); ok {
		return nameThenEnd(rest, name)
	}
	if rest, ok := cutWord(s, "set"); ok {
		return nameThenEnd(skipFlags(rest), name)
	}
	for _, kw := range []string{"export", "declare", "typeset", "readonly"} {
		if rest, ok := cutWord(s, kw); ok {
			if strings.HasPrefix(skipFlags(rest), name+"=") {
				return true
			}
			break
		}
	}
	return strings.HasPrefix(s, name+"=")
}

// isSpace is \s of RE2: space, \t, \n, \f, \r.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

func trimSpace(s string) string {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	return s
}

// cutWord cuts kw and the whitespace after it (at least one) from s.
func cutWord(s, kw string) (string, bool) {
	if !strings.HasPrefix(s, kw) || len(s) == len(kw) || !isSpace(s[len(kw)]) {
		return s, false
	}
	return trimSpace(s[len(kw):]), true
}

// skipFlags drops leading option words (-gx -x …) and their spacing.
func skipFlags(s string) string {
	for len(s) > 1 && s[0] == '-' {
		i := 1
		for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
			i++
		}
		if i == 1 || i == len(s) || !isSpace(s[i]) {
			return s
		}
		s = trimSpace(s[i:])
	}
	return s
}

// nameThenEnd: s starts with name followed by whitespace or nothing.
func nameThenEnd(s, name string) bool {
	return strings.HasPrefix(s, name) && (len(s) == len(name) || isSpace(s[len(name)]))
}

// maxStartupFile bounds a startup file read while looking for a setting.
const maxStartupFile = 4 << 20

// FindSetters reads the startup files through the host seam and returns,
// per name, where it is set: "~/.bashrc:12: export NCCL_TIMEOUT=1800"
// (line text sanitised, secrets redacted). It only reads; deleting the
// lines is the user's step.
// A file that is not a regular file of at most 4 MiB (a FIFO, /dev/zero
// through a symlink) is passed over: it cannot be where a setting lives.
func FindSetters(ctx context.Context, h *host.Host, names []string) map[string][]string {
	out := map[string][]string{}
	if len(names) == 0 {
		return out
	}
	files := append([]string(nil), StartupFiles...)
	if ents, err := h.ReadDir("/etc/profile.d"); err == nil {
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".sh") {
				files = append(files, "/etc/profile.d/"+e.Name())
			}
		}
	}
	for _, shown := range files {
		p := shown
		if rest, ok := strings.CutPrefix(shown, "~/"); ok {
			if h.Home == "" {
				continue
			}
			p = path.Join(h.Home, rest)
		}
		b, err := h.ReadRegular(ctx, p, maxStartupFile, true)
		if err != nil {
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			if t := strings.TrimSpace(line); t == "" || t[0] == '#' {
				continue
			}
			for _, n := range names {
				if setsName(line, n) {
					out[n] = append(out[n], fmt.Sprintf("%s:%d: %s", shown, i+1, textsafe.Clean(strings.TrimSpace(line))))
				}
			}
		}
	}
	return out
}

// timeoutCode is what NCCL_TIMEOUT was meant to do: PyTorch's collective
// timeout, an argument of init_process_group (there is no variable; the
// NCCL default is 10 minutes, reference §3.1 and ProcessGroupNCCL.hpp
// kProcessGroupNCCLDefaultTimeout). A plain number is read as seconds,
// the unit scripts that set it usually mean.
func timeoutCode(value string) string {
	if n, err := strconv.Atoi(strings.TrimSpace(value)); err == nil && n > 0 {
		return fmt.Sprintf("torch.distributed.init_process_group(\"nccl\", timeout=datetime.timedelta(seconds=%d))  # NCCL_TIMEOUT=%d read as seconds", n, n)
	}
	return "torch.distributed.init_process_group(\"nccl\", timeout=datetime.timedelta(minutes=30))  # the default for NCCL is 10 minutes"
}

// removal is the env.export fix for a setting that should go: unset it (and
// delete it where it is set), and for a renamed variable set the new name
// to the same value.
type removal struct {
	name, reason string
	// rename is the new name with the value to give it; "" for none.
	rename, value string
	code          string
}

// attach adds the removal to f as evidence the env.export fix reads:
// recommended_unset, recommended_code, set_in (and recommended_env for a
// rename), and names the fix.
func (r removal) attach(f *checks.Finding, s Setting, setIn map[string][]string) {
	if f.Evidence == nil {
		f.Evidence = map[string]any{}
	}
	f.Evidence["recommended_unset"] = map[string]string{r.name: r.reason}
	if r.code != "" {
		f.Evidence["recommended_code"] = map[string]string{r.name: r.code}
	}
	where := append([]string(nil), setIn[r.name]...)
	if s.Source != "environment" && s.Line > 0 {
		where = append(where, fmt.Sprintf("%s:%d: %s=%s", s.Source, s.Line, s.Name, textsafe.RedactEnv(s.Name, s.Value)))
	}
	if len(where) > 0 {
		sort.Strings(where)
		f.Evidence["set_in"] = map[string][]string{r.name: where}
		f.Detail = strings.TrimSpace(f.Detail + " Set in " + strings.Join(where, "; ") + ": delete it there too (ncclwiz fix shows how).")
	}
	if r.rename != "" {
		f.Evidence["recommended_env"] = map[string]string{r.rename: r.value}
		f.Evidence["recommended_env_reason"] = map[string]string{r.rename: "the current name of " + r.name + ", with the value it had"}
	}
	f.Fixes = append(f.Fixes, "env.export")
}
