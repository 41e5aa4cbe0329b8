package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"os/user"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/checks"
	"github.com/ncclwiz/ncclwiz/checks/all"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/redact"
	"github.com/ncclwiz/ncclwiz/internal/safefile"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
	"github.com/ncclwiz/ncclwiz/report"
)

type reportFlags struct {
	out      string
	noRedact bool
}

func newReportCmd(a *App) *cobra.Command {
	var f reportFlags
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Write a redacted markdown report to attach to a bug or hand to an admin",
		Long: `Runs every check (the same as ncclwiz check) and writes a markdown report
with the problems first, every check's result, and the JSON report at the end.

Host names, IP addresses, your user name and home directory are replaced by
stable pseudonyms (node-A, ip-1, user-1, ~) and secrets are removed, on by
default. With -o FILE the pseudonym key is written to FILE.map.json (mode
0600) so you can reverse it locally; never share that file. An existing
FILE or key is replaced by a new file (never written through); a symlink
at either name is refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Ctrl-C stops the checks; nothing is written then.
			ctx, stop := signal.NotifyContext(cmdContext(cmd), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runReport(ctx, a, f)
		},
	}
	cmd.Flags().StringVarP(&f.out, "output", "o", "", "write the report to FILE instead of stdout")
	cmd.Flags().BoolVar(&f.noRedact, "no-redact", false, "keep host names, IPs and user names (secrets are still removed)")
	return cmd
}

func runReport(ctx context.Context, a *App, f reportFlags) error {
	reg, err := all.Registry()
	if err != nil {
		return fmt.Errorf("build check registry: %w", err)
	}
	h, err := a.Host()
	if err != nil {
		return err
	}
	results := checks.Run(ctx, h, reg.All(), checks.Options{})
	if ctx.Err() != nil {
		return errors.New("report: interrupted; no report was written")
	}
	doc, err := renderMarkdownReport(h, results, a.VersionString())
	if err != nil {
		return err
	}
	r := redact.New()
	if !f.noRedact {
		registerIdentity(r, h)
		doc = r.Text(doc)
	} else {
		doc = textsafe.RedactText(doc)
	}
	// Lines read from the machine (the kernel release, say) are in the
	// markdown too: no escape reaches the terminal or the file.
	doc = textsafe.SanitizeMultiline(doc)
	if f.out == "" {
		_, err := fmt.Fprint(a.Stdout, doc)
		return err
	}
	return writeReportFiles(a, f.out, doc, r.Mapping(), !f.noRedact)
}

// writeReportFiles writes the report and, when names were replaced, the
// pseudonym key next to it. Both names are checked before anything is
// written: a symlink at either is refused, never followed. An existing
// regular file is replaced by a new file (temp file + rename), never
// written through, so the key is 0600 even where an old world-readable
// key was.
func writeReportFiles(a *App, out, doc string, m map[string]string, withKey bool) error {
	key := out + ".map.json"
	withKey = withKey && len(m) > 0
	if err := safefile.Check(out); err != nil {
		return usageError{fmt.Errorf("report: %w", err)}
	}
	if withKey {
		if err := safefile.Check(key); err != nil {
			// Not "key: PATH": errors pass the secret redactor, which
			// hides whatever follows "key:".
			return usageError{fmt.Errorf("report: the pseudonym map %w", err)}
		}
	}
	if err := safefile.Write(out, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	msg := "wrote " + out
	if withKey {
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return fmt.Errorf("report: encode the pseudonym map: %w", err)
		}
		if err := safefile.Write(key, append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("report: write the pseudonym map %w", err)
		}
		msg += fmt.Sprintf(" (%d names replaced; key in %s — keep it private)", len(m), key)
	}
	fmt.Fprintln(a.Stderr, textsafe.Sanitize(msg))
	return nil
}

// registerIdentity tells the redactor which names identify this machine
// and user.
func registerIdentity(r *redact.Redactor, h *host.Host) {
	r.AddHost(h.Name)
	if h.Kind == "local" {
		if hn, err := os.Hostname(); err == nil {
			r.AddHost(hn)
		}
		if u, err := user.Current(); err == nil {
			r.AddUser(u.Username)
			r.AddHome(u.HomeDir)
		}
	}
	if h.Home != "" {
		r.AddHome(h.Home)
	}
	for _, k := range []string{"USER", "LOGNAME", "SLURM_JOB_USER"} {
		r.AddUser(h.Getenv(k))
	}
	for _, k := range []string{"MASTER_ADDR", "SLURM_NODELIST", "SLURMD_NODENAME", "HOSTNAME"} {
		if v := h.Getenv(k); v != "" {
			r.AddHost(v)
		}
	}
}

func renderMarkdownReport(h *host.Host, rs []checks.Result, version string) (string, error) {
	doc := report.Build(h, rs, version)
	var b strings.Builder
	fmt.Fprintf(&b, "# ncclwiz report\n\n")
	fmt.Fprintf(&b, "- ncclwiz %s, %s\n", version, doc.GeneratedAt)
	fmt.Fprintf(&b, "- host: %s (%s)%s, uid %d\n", doc.Host.Name, doc.Host.Kind, map[bool]string{true: " SIMULATED", false: ""}[doc.Host.Simulated], doc.Host.UID)
	if rel, err := h.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		fmt.Fprintf(&b, "- kernel: %s\n", strings.TrimSpace(string(rel)))
	}
	s := doc.Summary
	fmt.Fprintf(&b, "- summary: %s, %s, %d skipped, exit code %d\n\n", units.Count(s.Errors, "error"), units.Count(s.Warnings, "warning"), s.Skipped, s.ExitCode)

	var problems, skipped []checks.Finding
	for _, fd := range doc.Findings {
		switch {
		case fd.Severity.IsProblem():
			problems = append(problems, fd)
		case fd.Severity == checks.Skipped:
			skipped = append(skipped, fd)
		}
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Severity.Rank() < problems[j].Severity.Rank() })
	b.WriteString("## Problems\n\n")
	if len(problems) == 0 {
		b.WriteString("None found.\n\n")
	}
	for _, fd := range problems {
		fmt.Fprintf(&b, "### [%s] %s — %s\n\n", fd.Severity, fd.Check, fd.Title)
		if fd.Detail != "" {
			b.WriteString(fd.Detail + "\n\n")
		}
		if len(fd.Evidence) > 0 {
			ev, err := json.MarshalIndent(fd.Evidence, "", "  ")
			if err != nil {
				return "", fmt.Errorf("encode evidence: %w", err)
			}
			b.WriteString("```json\n" + string(ev) + "\n```\n\n")
		}
		if fd.Guide != "" {
			fmt.Fprintf(&b, "Guide: `ncclwiz guides %s`", fd.Guide)
			if len(fd.Fixes) > 0 {
				b.WriteString(" · ")
			}
		}
		if len(fd.Fixes) > 0 {
			fmt.Fprintf(&b, "Fixes: `%s`", strings.Join(fd.Fixes, "`, `"))
		}
		if fd.Guide != "" || len(fd.Fixes) > 0 {
			b.WriteString("\n\n")
		}
	}
	if len(skipped) > 0 {
		b.WriteString("## Not checked\n\n")
		for _, fd := range skipped {
			fmt.Fprintf(&b, "- %s: %s", fd.Check, fd.Title)
			if fd.Detail != "" {
				b.WriteString(" — " + strings.ReplaceAll(fd.Detail, "\n", " "))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	b.WriteString("## All checks\n\n| check | status | result |\n| --- | --- | --- |\n")
	for _, res := range rs {
		head := res.Findings[0].Title
		for _, fd := range res.Findings {
			if fd.Severity == res.Worst() {
				head = fd.Title
				break
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", res.ID, res.Worst(), strings.ReplaceAll(textsafe.Clean(head), "|", `\|`))
	}
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return "", fmt.Errorf("encode report: %w", err)
	}
	b.WriteString("\n## JSON\n\n```json\n" + js.String() + "```\n")
	return b.String(), nil
}
