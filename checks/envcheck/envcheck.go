// Package envcheck holds env.nccl: the NCCL and PyTorch-distributed settings
// a job started from this shell would get, from the environment and from
// NCCL's config files, judged against the known-variables table.
package envcheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/envvars"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// Checks returns env.nccl.
func Checks() []checks.Check {
	return []checks.Check{{ID: "env.nccl", Title: "NCCL and PyTorch environment", Category: "env", Tier: checks.Quick, Run: run}}
}

// Setting is one variable with where it came from.
type Setting struct {
	Name, Value string
	// Source is "environment" or the config file path.
	Source string
	// Shadowed is true for a config-file value the environment overrides
	// (NCCL reads config files with setenv(..., 0)).
	Shadowed bool
	// Line is the line number in a config file (0 for the environment).
	Line int
}

// maxConfFile bounds an NCCL config file (a few lines in practice).
const maxConfFile = 1 << 20

// Problem is a config file ncclwiz could not use, or a line in one.
type Problem struct {
	// Unread is set when the file itself could not be read (a FIFO, a
	// device such as /dev/zero, too large, unreadable).
	Unread bool
	Text   string
}

// Collect gathers NCCL_*, TORCH_NCCL_*, TORCH_DISTRIBUTED_* and related
// variables from the environment, $NCCL_CONF_FILE or ~/.nccl.conf, and
// /etc/nccl.conf, in NCCL's precedence order. Config files are read as
// regular files only, bounded and without blocking (a FIFO or /dev/zero
// named by NCCL_CONF_FILE is a Problem, never a hang), and a symlink is
// followed as NCCL follows it.
func Collect(ctx context.Context, h *host.Host) ([]Setting, []Problem) {
	var out []Setting
	var problems []Problem
	seen := map[string]bool{}
	for _, kv := range h.Env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !relevant(name) {
			continue
		}
		out = append(out, Setting{Name: name, Value: val, Source: "environment"})
		seen[name] = true
	}
	// NCCL (src/misc/param.cc): NCCL_CONF_FILE if set, else ~/.nccl.conf;
	// then /etc/nccl.conf. Earlier sources win because values are applied
	// with setenv(..., 0).
	var files []string
	if f := h.Getenv("NCCL_CONF_FILE"); f != "" {
		files = append(files, f)
	} else if h.Home != "" {
		files = append(files, strings.TrimRight(h.Home, "/")+"/.nccl.conf")
	}
	files = append(files, "/etc/nccl.conf")
	for _, f := range files {
		b, err := h.ReadRegular(ctx, f, maxConfFile, true)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				problems = append(problems, Problem{Unread: true, Text: textsafe.Clean(err.Error())})
			}
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name, val, ok := strings.Cut(line, "=")
			name = strings.TrimSpace(name)
			if !ok || name == "" || strings.ContainsAny(name, " \t") {
				problems = append(problems, Problem{Text: fmt.Sprintf("%s:%d: not NAME=value: %s", f, i+1, textsafe.Clean(line))})
				continue
			}
			out = append(out, Setting{Name: name, Value: strings.TrimSpace(val), Source: f, Shadowed: seen[name], Line: i + 1})
			seen[name] = true
		}
	}
	return out, problems
}

func relevant(name string) bool {
	if envvars.Governed(name) {
		return true
	}
	switch name {
	case "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GLOO_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT":
		return true
	}
	return false
}

// effective returns the value NCCL/PyTorch would see for name.
func effective(ss []Setting, name string) (string, bool) {
	for _, s := range ss {
		if s.Name == name && !s.Shadowed {
			return s.Value, true
		}
	}
	return "", false
}

func run(ctx context.Context, h *host.Host) ([]checks.Finding, error) {
	ss, parseProblems := Collect(ctx, h)
	var fs []checks.Finding
	list := make([]map[string]any, 0, len(ss))
	for _, s := range ss {
		e := map[string]any{"name": s.Name, "value": textsafe.RedactEnv(s.Name, s.Value), "source": s.Source}
		if s.Shadowed {
			e["shadowed_by_environment"] = true
		}
		list = append(list, e)
	}
	for _, p := range parseProblems {
		if p.Unread {
			fs = append(fs, checks.Finding{Severity: checks.Warn, Title: "An NCCL config file could not be read",
				Detail: p.Text + "\nncclwiz reads NCCL config files only as regular files of at most 1 MiB, so the settings in this one " +
					"are not judged here. NCCL reads NCCL_CONF_FILE (else ~/.nccl.conf) and /etc/nccl.conf line by line: point it at a small text file of NAME=value lines.",
				Guide: "env-reference", Evidence: map[string]any{"problem": p.Text}})
			continue
		}
		fs = append(fs, checks.Finding{Severity: checks.Warn, Title: "Unparsable line in an NCCL config file",
			Detail: p.Text + "\nNCCL ignores lines it cannot parse; the setting you meant is not applied.", Guide: "env-reference"})
	}

	var names []string
	for _, s := range ss {
		names = append(names, s.Name)
	}
	setIn := FindSetters(ctx, h, names)
	for _, s := range ss {
		if s.Shadowed {
			continue
		}
		fs = append(fs, judgeName(s, ss, setIn)...)
		fs = append(fs, judgeValue(s)...)
	}
	fs = append(fs, contradictions(ss, setIn)...)

	// Config-file values that differ from the environment surprise people.
	for _, s := range ss {
		if s.Shadowed {
			if ev, _ := effective(ss, s.Name); ev != s.Value {
				fs = append(fs, checks.Finding{Severity: checks.Info,
					Title:  fmt.Sprintf("%s in %s is overridden by the environment", s.Name, s.Source),
					Detail: fmt.Sprintf("NCCL applies config files without overwriting variables that are already set, so %s=%s from the environment wins.", s.Name, textsafe.RedactEnv(s.Name, ev)),
					Guide:  "env-reference"})
			}
		}
	}

	if _, ok := effective(ss, "NCCL_DEBUG"); !ok {
		fs = append(fs, checks.Finding{Severity: checks.Info, Title: "NCCL_DEBUG is not set",
			Detail: "Without NCCL_DEBUG=INFO a failing job only prints the generic PyTorch wrapper. Set it for the next run so ncclwiz explain can name the transport and the exact error.",
			Guide:  "reading-nccl-debug", Fixes: []string{"env.export"},
			Evidence: map[string]any{
				"recommended_env":        map[string]string{"NCCL_DEBUG": "INFO"},
				"recommended_env_reason": map[string]string{"NCCL_DEBUG": "log NCCL's version, transports and the exact error of the next run"},
			}})
	}

	summary := checks.Finding{Severity: checks.OK, Title: units.Count(len(ss), "NCCL/PyTorch setting") + " found, none suspicious",
		Evidence: map[string]any{"settings": list}}
	if len(ss) == 0 {
		summary.Title = "No NCCL_*, TORCH_NCCL_* or TORCH_DISTRIBUTED_* settings (NCCL defaults apply)"
	}
	for _, f := range fs {
		if f.Severity.IsProblem() {
			summary.Title = units.Count(len(ss), "NCCL/PyTorch setting") + " found"
			summary.Severity = checks.Info
			break
		}
	}
	return append([]checks.Finding{summary}, fs...), nil
}

// judgeName flags names that do nothing (invented, misspelt, removed) or
// have a new name, and attaches the fix: unset it, delete it where it is
// set (setIn: startup files), set the new name for a rename, and for
// NCCL_TIMEOUT the init_process_group(timeout=…) line.
func judgeName(s Setting, ss []Setting, setIn map[string][]string) []checks.Finding {
	v, known := envvars.Lookup(s.Name)
	where := ""
	if s.Source != "environment" {
		where = " (in " + s.Source + ")"
	}
	var f checks.Finding
	rm := removal{name: s.Name}
	switch {
	case !known && envvars.Governed(s.Name) && !shellName(s.Name):
		// No snippet can unset a name a shell cannot spell (invalid UTF-8,
		// punctuation); say where it comes from instead of offering a fix
		// that would be dropped.
		return []checks.Finding{{Severity: checks.Warn, Title: fmt.Sprintf("%s%s is not a valid variable name", textsafe.Sanitize(s.Name), where),
			Detail: "Its name holds bytes no shell can spell (not letters, digits and _), so neither NCCL nor PyTorch reads it and no " +
				"snippet can unset it: delete it where it is set (a config file line, a launcher's or container's environment), or start the job with env -u.",
			Guide: "env-reference", Evidence: map[string]any{"name": textsafe.Sanitize(s.Name)}}}
	case !known && envvars.Governed(s.Name):
		f = checks.Finding{Severity: checks.Warn, Title: fmt.Sprintf("%s%s is not a known NCCL or PyTorch variable", s.Name, where),
			Detail: "Neither NCCL nor PyTorch reads this name, so it has no effect.", Guide: "env-reference",
			Evidence: map[string]any{"name": s.Name}}
		rm.reason = "neither NCCL nor PyTorch reads this name (a network plugin might: keep it if yours does)"
		if c := envvars.Closest(s.Name); c != "" {
			f.Title += "; did you mean " + c + "?"
			f.Evidence["did_you_mean"] = c
			rm.reason += "; if you meant " + c + ", set that instead"
		}
	case !known:
		return nil
	case v.Status == envvars.Nonexistent:
		f = checks.Finding{Severity: checks.Warn, Title: fmt.Sprintf("%s%s does not exist: setting it does nothing", s.Name, where),
			Detail: "Neither NCCL nor PyTorch reads it (" + v.Meaning + "). Instead: " + v.Advice + ". Source: " + v.Source + ".", Guide: "env-reference",
			Evidence: map[string]any{"name": s.Name}}
		rm.reason = "it does not exist, setting it does nothing; instead: " + v.Advice
		if s.Name == "NCCL_TIMEOUT" {
			rm.code = timeoutCode(s.Value)
		}
	case v.Status == envvars.Removed && v.Generated:
		// Read by older NCCL releases only: it still works with one of
		// them, so ncclwiz says so and offers no removal.
		return []checks.Finding{{Severity: checks.Info, Title: fmt.Sprintf("%s%s is read only by older NCCL releases", s.Name, where),
			Detail: v.Advice + ". (" + v.Source + ")", Guide: "env-reference", Evidence: map[string]any{"name": s.Name}}}
	case v.Status == envvars.Removed:
		f = checks.Finding{Severity: checks.Warn, Title: fmt.Sprintf("%s%s was removed from NCCL", s.Name, where),
			Detail: v.Advice + ". (" + v.Source + ")", Guide: "env-reference", Evidence: map[string]any{"name": s.Name}}
		rm.reason = "no longer read: " + v.Advice
	case v.Status == envvars.Deprecated:
		f = checks.Finding{Severity: checks.Info, Title: fmt.Sprintf("%s%s is deprecated", s.Name, where), Guide: "env-deprecated",
			Evidence: map[string]any{"name": s.Name}}
		rm.reason = "deprecated"
		if v.ReplacedBy != "" {
			f.Title += "; use " + v.ReplacedBy
			f.Evidence["replaced_by"] = v.ReplacedBy
			f.Detail = fmt.Sprintf("Rename it to %s. (%s)", v.ReplacedBy, v.Source)
			rm.reason = "renamed to " + v.ReplacedBy
			// The new name gets the old value, unless it is set already
			// (contradictions() reports a disagreement) or the value is not
			// one it accepts.
			if _, set := effective(ss, v.ReplacedBy); !set && len(judgeValue(Setting{Name: v.ReplacedBy, Value: s.Value})) == 0 {
				rm.rename, rm.value = v.ReplacedBy, strings.TrimSpace(s.Value)
			}
		} else {
			f.Detail = strings.TrimSpace(v.Advice + " (" + v.Source + ")")
			rm.reason = strings.TrimSpace("deprecated; " + v.Advice)
		}
		// An NCCL rename means the old name is no longer read at all.
		if v.Owner == "nccl" && v.ReplacedBy != "" {
			f.Severity = checks.Warn
		}
	default:
		return nil
	}
	rm.attach(&f, s, setIn)
	return []checks.Finding{f}
}

var enumValues = map[string][]string{
	"NCCL_DEBUG":              {"VERSION", "WARN", "INFO", "TRACE", "ABORT"},
	"NCCL_P2P_LEVEL":          {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3", "4", "5"},
	"NCCL_NET_GDR_LEVEL":      {"LOC", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3", "4", "5"},
	"NCCL_SOCKET_FAMILY":      {"AF_INET", "AF_INET6"},
	"TORCH_DISTRIBUTED_DEBUG": {"OFF", "INFO", "DETAIL"},
}

var boolish = []string{"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_CUMEM_ENABLE", "NCCL_CUMEM_HOST_ENABLE",
	"NCCL_P2P_DIRECT_DISABLE", "TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_DESYNC_DEBUG",
	"TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_ENABLE_TIMING", "TORCH_NCCL_NAN_CHECK"}

var integers = []string{"NCCL_BUFFSIZE", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "NCCL_SOCKET_RETRY_CNT", "NCCL_SOCKET_RETRY_SLEEP_MSEC",
	"TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_NVLS_ENABLE", "NCCL_IB_GID_INDEX"}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func judgeValue(s Setting) []checks.Finding {
	val := strings.TrimSpace(s.Value)
	bad := func(why string) []checks.Finding {
		return []checks.Finding{{Severity: checks.Warn, Title: fmt.Sprintf("%s=%s is not a valid value", s.Name, textsafe.RedactEnv(s.Name, s.Value)),
			Detail: why, Guide: "env-reference", Evidence: map[string]any{"name": s.Name, "value": textsafe.RedactEnv(s.Name, s.Value)}}}
	}
	if vals, ok := enumValues[s.Name]; ok && val != "" && !contains(vals, strings.ToUpper(val)) {
		return bad("Accepted values: " + strings.Join(vals, ", ") + ".")
	}
	if contains(boolish, s.Name) && val != "" && val != "0" && val != "1" {
		return bad("Use 0 or 1; NCCL and PyTorch parse these as integers.")
	}
	if contains(integers, s.Name) && val != "" {
		if _, err := strconv.ParseInt(val, 0, 64); err != nil {
			return bad("An integer is expected.")
		}
	}
	switch s.Name {
	case "NCCL_P2P_LEVEL":
		if strings.EqualFold(val, "LOC") || val == "0" {
			return []checks.Finding{{Severity: checks.Warn, Title: "NCCL_P2P_LEVEL=LOC turns GPU peer-to-peer off everywhere",
				Detail: "LOC forbids P2P even over NVLink, so NCCL falls back to shared memory through the CPU; one A100 NVSwitch box went back to ~220 GB/s bus bandwidth after unsetting it (NVIDIA/nccl-tests#228). Unset it unless you are debugging a P2P hang.",
				Guide:  "p2p-acs-iommu"}}
		}
	case "NCCL_IB_GID_INDEX":
		return []checks.Finding{{Severity: checks.Info, Title: "NCCL_IB_GID_INDEX is set",
			Detail: "NCCL 2.21 and later pick the RoCE GID automatically; a fixed index copied from another machine can break RoCE (NCCL networking troubleshooting).",
			Guide:  "ib-roce"}}
	case "NCCL_DEBUG":
		if strings.EqualFold(val, "TRACE") {
			return []checks.Finding{{Severity: checks.Info, Title: "NCCL_DEBUG=TRACE slows every collective",
				Detail: "TRACE logs each operation; use INFO for diagnosis and unset it for production runs.", Guide: "reading-nccl-debug"}}
		}
	}
	return nil
}

func contradictions(ss []Setting, setIn map[string][]string) []checks.Finding {
	get := func(n string) string { v, _ := effective(ss, n); return strings.TrimSpace(v) }
	var fs []checks.Finding
	if get("NCCL_P2P_DISABLE") == "1" && get("NCCL_SHM_DISABLE") == "1" {
		fs = append(fs, checks.Finding{Severity: checks.Warn, Title: "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 together force GPUs on one node onto the network",
			Detail: "With both intra-node transports off, ranks on the same machine talk through sockets or IB loopback — often 10-100x slower. Keep at most one of them, and only as a diagnosed workaround.",
			Guide:  "nccl-intro"})
	}
	if get("NCCL_P2P_DISABLE") == "1" && get("NCCL_P2P_LEVEL") != "" {
		fs = append(fs, checks.Finding{Severity: checks.Info, Title: "NCCL_P2P_LEVEL is ignored because NCCL_P2P_DISABLE=1",
			Detail: "P2P is off entirely; the level setting has no effect.", Guide: "env-reference"})
	}
	if get("NCCL_IB_DISABLE") == "1" && get("NCCL_IB_HCA") != "" {
		fs = append(fs, checks.Finding{Severity: checks.Info, Title: "NCCL_IB_HCA is ignored because NCCL_IB_DISABLE=1",
			Detail: "InfiniBand/RoCE is off, so the HCA selection has no effect.", Guide: "ib-roce"})
	}
	for _, pair := range [][2]string{
		{"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"},
		{"NCCL_BLOCKING_WAIT", "TORCH_NCCL_BLOCKING_WAIT"},
		{"NCCL_DESYNC_DEBUG", "TORCH_NCCL_DESYNC_DEBUG"},
	} {
		o, n := get(pair[0]), get(pair[1])
		if o != "" && n != "" && o != n {
			f := checks.Finding{Severity: checks.Warn, Title: fmt.Sprintf("%s=%s and %s=%s disagree", pair[0], o, pair[1], n),
				Detail: "PyTorch reads the TORCH_ name first and only falls back to the old one; remove the old name to avoid confusion.", Guide: "env-deprecated"}
			old := Setting{Name: pair[0], Source: "environment"}
			for _, s := range ss {
				if s.Name == pair[0] && !s.Shadowed {
					old = s
				}
			}
			removal{name: pair[0], reason: fmt.Sprintf("%s=%s is what PyTorch uses; the old name only confuses", pair[1], n)}.attach(&f, old, setIn)
			fs = append(fs, f)
		}
	}
	if get("TORCH_NCCL_BLOCKING_WAIT") == "1" && get("TORCH_NCCL_ASYNC_ERROR_HANDLING") != "" {
		fs = append(fs, checks.Finding{Severity: checks.Info, Title: "TORCH_NCCL_BLOCKING_WAIT=1 together with TORCH_NCCL_ASYNC_ERROR_HANDLING",
			Detail: "With blocking wait, timeouts are raised from wait() in the training thread; recent PyTorch releases do not start the watchdog thread then, so the async error handling mode has little effect.",
			Guide:  "pytorch-timeouts"})
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Severity.Rank() < fs[j].Severity.Rank() })
	return fs
}

// shellName reports whether name is a shell identifier: [A-Za-z_][A-Za-z0-9_]*.
func shellName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return name != ""
}
