// Package remote reaches the nodes of a job with the engines users
// already have — ssh, pdsh, Slurm's srun — gets ncclwiz there (the same
// path on a shared filesystem, else a verified private copy that is
// removed), runs `ncclwiz check --json` and returns one cluster.Node per
// node. It never runs a daemon or a transport of its own.
package remote

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/shellquote"
	"github.com/ncclwiz/ncclwiz/report"
)

// Markers delimit what the probe prints, so a chatty login script cannot
// be mistaken for an answer.
const (
	markDate    = "@@ncclwiz-date@@"
	markVersion = "@@ncclwiz-version@@"
	markSum     = "@@ncclwiz-sum@@"
	markMissing = "@@ncclwiz-missing@@"
	markArch    = "@@ncclwiz-arch@@"
	markLibc    = "@@ncclwiz-libc@@"
)

// Exit codes of the copy script (remote side) that are not ncclwiz's own.
const (
	exitCopyFailed = 97
	exitNoSum      = 96
	exitBadSum     = 98
)

// wrap runs script with sh whatever the user's login shell is (ssh hands
// the command to it as one string).
func wrap(script string) string { return "sh -c " + shellquote.Quote(script) }

// probeScript prints the node's clock, architecture and C library, and
// whether ncclwiz is at path, with its version and checksum.
func probeScript(path string) string {
	return fmt.Sprintf(`echo %s $(date +%%s.%%N)
echo %s $(uname -m)
echo %s $( (getconf GNU_LIBC_VERSION || ldd --version) 2>&1 | head -n 1)
P=%s
if [ -x "$P" ]; then
  echo %s $("$P" version 2>&1 | head -n 1)
  echo %s $(sha256sum "$P" 2>/dev/null | cut -d ' ' -f 1)
else
  echo %s
fi`, markDate, markArch, markLibc, shellquote.Quote(path), markVersion, markSum, markMissing)
}

// clockScript prints only the clock: over an open ControlMaster the
// round trip is short, so the offset is tight.
func clockScript() string { return "echo " + markDate + " $(date +%s.%N)" }

// checkCmd is the ncclwiz command line of the check on each node.
func checkCmd(extra []string) []string {
	return append([]string{"check", "--json", "--no-color"}, extra...)
}

// timeoutPrefix bounds the check on the node too, so a check stuck on a
// hung NFS mount dies there even when our ssh is gone.
func timeoutPrefix(d time.Duration) string {
	secs := int(d.Seconds())
	if secs < 1 {
		secs = 1
	}
	return fmt.Sprintf(`T=; if command -v timeout >/dev/null 2>&1; then T="timeout -k 5 %d"; fi; `, secs)
}

// sharedScript runs ncclwiz (args) from the shared path.
func sharedScript(path string, args []string, d time.Duration) string {
	return timeoutPrefix(d) + "exec $T " + shellquote.Quote(path) + " " + shellquote.Join(args)
}

// copyScript receives the binary on stdin into a private temp directory,
// verifies its checksum, runs it and removes the directory on any exit.
func copyScript(sum string, args []string, d time.Duration) string {
	return copySizedScript(sum, 0, args, d)
}

// copySizedScript is copyScript reading exactly size bytes of stdin (all
// of it when size is 0), so what follows stays for ncclwiz: mesh-listen's
// lifeline, which ends a copied listener when our ssh session closes.
func copySizedScript(sum string, size int, args []string, d time.Duration) string {
	read := "cat"
	if size > 0 {
		read = "head -c " + strconv.Itoa(size)
	}
	return fmt.Sprintf(`umask 077
d=$(mktemp -d "${TMPDIR:-/tmp}/ncclwiz.XXXXXX") || { echo "mktemp failed on the node" >&2; exit %[1]d; }
trap 'rm -rf "$d"' EXIT
trap 'exit 143' HUP INT TERM
%[7]s > "$d/ncclwiz" || { echo "copy to $d failed" >&2; exit %[1]d; }
command -v sha256sum >/dev/null 2>&1 || { echo "no sha256sum on the node: an unverified copy is not run" >&2; exit %[2]d; }
s=$(sha256sum "$d/ncclwiz" | cut -d ' ' -f 1)
[ "$s" = %[3]s ] || { echo "checksum mismatch after copy: $s" >&2; exit %[4]d; }
chmod 700 "$d/ncclwiz"
%[5]s$T "$d/ncclwiz" %[6]s`, exitCopyFailed, exitNoSum, shellquote.Quote(sum), exitBadSum, timeoutPrefix(d), shellquote.Join(args), read)
}

// probe is what the probe learned about one node.
type probe struct {
	clock   *time.Time
	present bool
	version string
	sum     string
	machine string // uname -m
	libc    string // "glibc 2.31", or ldd's first line
}

var glibcLine = regexp.MustCompile(`(?i)\b(?:glibc|gnu libc)\b.*?(\d+\.\d+)|^ldd \(.*\) (\d+\.\d+)`)

// glibcVersion is the node's glibc version ("2.31"), "" when unknown.
func (p probe) glibcVersion() string {
	m := glibcLine.FindStringSubmatch(p.libc)
	if m == nil {
		return ""
	}
	if m[1] != "" {
		return m[1]
	}
	return m[2]
}

func parseProbe(out []byte) probe {
	var p probe
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, markDate):
			if t, ok := parseEpoch(strings.TrimSpace(strings.TrimPrefix(line, markDate))); ok {
				p.clock = &t
			}
		case strings.HasPrefix(line, markVersion):
			p.present = true
			p.version = strings.TrimSpace(strings.TrimPrefix(line, markVersion))
		case strings.HasPrefix(line, markSum):
			p.sum = strings.TrimSpace(strings.TrimPrefix(line, markSum))
		case line == markMissing:
			p.present = false
		case strings.HasPrefix(line, markArch):
			p.machine = strings.TrimSpace(strings.TrimPrefix(line, markArch))
		case strings.HasPrefix(line, markLibc):
			p.libc = strings.TrimSpace(strings.TrimPrefix(line, markLibc))
		}
	}
	return p
}

// parseEpoch reads `date +%s.%N`; a date without %N support prints
// "1700000000.N" or "1700000000.%N", which still gives whole seconds.
func parseEpoch(s string) (time.Time, bool) {
	secS, fracS, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(secS, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var nsec int64
	if len(fracS) > 0 && len(fracS) <= 9 {
		if n, err := strconv.ParseInt(fracS, 10, 64); err == nil {
			for i := len(fracS); i < 9; i++ {
				n *= 10
			}
			nsec = n
		}
	}
	return time.Unix(sec, nsec), true
}

// clockOffset is the node's clock minus the midpoint of our round trip;
// the error bound is half the round trip.
func clockOffset(remote, sent, received time.Time) (time.Duration, time.Duration) {
	rtt := received.Sub(sent)
	mid := sent.Add(rtt / 2)
	return remote.Sub(mid), rtt / 2
}

// parseReport reads a check report from a node's output. Anything a login
// script printed before the JSON is skipped.
func parseReport(out []byte) (*report.JSONReport, error) {
	i := bytes.Index(out, []byte("{"))
	if i < 0 {
		return nil, fmt.Errorf("no JSON report in the node's output")
	}
	var r report.JSONReport
	dec := json.NewDecoder(bytes.NewReader(out[i:]))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("read the node's report: %w", err)
	}
	if r.Tool != "ncclwiz" || r.Schema != report.SchemaVersion {
		return nil, fmt.Errorf("not an ncclwiz schema-%d report (tool %q, schema %d)", report.SchemaVersion, r.Tool, r.Schema)
	}
	return &r, nil
}

// trace writes a command line to o.Debug (--debug), as a shell would take
// it; the script a node runs is one argument.
func (o Options) trace(name string, args []string) {
	if o.Debug == nil {
		return
	}
	fmt.Fprintf(o.Debug, "+ %s\n", shellquote.Join(append([]string{name}, args...)))
}

// FileSum is the sha256 of a file, hex.
func FileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("checksum %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("checksum %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// limitedBuffer keeps at most max bytes: a thousand nodes' output must
// not exhaust memory if one node floods.
type limitedBuffer struct {
	buf bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) > room {
			l.buf.Write(p[:room])
		} else {
			l.buf.Write(p)
		}
	}
	return len(p), nil
}

func (l *limitedBuffer) Bytes() []byte { return l.buf.Bytes() }
