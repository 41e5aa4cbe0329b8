package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// SchemaVersion is the "schema" of `ncclwiz cluster check --json`
// (docs/cluster.schema.json). Adding fields is compatible; removing or
// changing one bumps it.
const SchemaVersion = 1

// Run describes how the nodes were reached, for the report's header.
type Run struct {
	Engine      string    // ssh, pdsh, slurm, json
	Binary      string    // the ncclwiz path used on the nodes
	GeneratedAt time.Time // when the aggregation was made
	Version     string    // this ncclwiz
	Notes       []string  // engine choices said out loud (pdsh missing, copies over ssh …)
}

// JSONDoc is the document `ncclwiz cluster check --json` prints.
type JSONDoc struct {
	Schema      int        `json:"schema"`
	Tool        string     `json:"tool"`
	Kind        string     `json:"kind"`
	Version     string     `json:"version"`
	GeneratedAt string     `json:"generated_at"`
	Engine      string     `json:"engine"`
	Binary      string     `json:"binary,omitempty"`
	Notes       []string   `json:"notes"`
	Summary     Summary    `json:"summary"`
	Nodes       []NodeRow  `json:"nodes"`
	Facts       []FactRow  `json:"facts"`
	Suspects    []Suspect  `json:"suspects"`
	Mesh        []MeshPair `json:"mesh,omitempty"`
}

// Doc builds the JSON document; every string from a node is sanitised
// (node reports were sanitised where they were made, but a --from-json
// file can hold anything).
func Doc(run Run, res Result) JSONDoc {
	d := JSONDoc{Schema: SchemaVersion, Tool: "ncclwiz", Kind: "cluster-check", Version: run.Version,
		GeneratedAt: run.GeneratedAt.UTC().Format(time.RFC3339), Engine: run.Engine, Binary: textsafe.Clean(run.Binary),
		Notes: cleanAll(run.Notes), Summary: res.Summary, Nodes: make([]NodeRow, len(res.Nodes)),
		Facts: make([]FactRow, len(res.Facts)), Suspects: make([]Suspect, len(res.Suspects))}
	for i, n := range res.Nodes {
		n.Name, n.Error, n.Reason = textsafe.Clean(n.Name), textsafe.Clean(n.Error), textsafe.Clean(n.Reason)
		n.Differs = cleanAll(n.Differs)
		if n.Facts != nil {
			fs := make(map[string]string, len(n.Facts))
			for k, v := range n.Facts {
				fs[textsafe.Clean(k)] = textsafe.Clean(v)
			}
			n.Facts = fs
		}
		d.Nodes[i] = n
	}
	for i, f := range res.Facts {
		vs := make(map[string][]string, len(f.Values))
		for v, ns := range f.Values {
			vs[textsafe.Clean(v)] = cleanAll(ns)
		}
		f.Values, f.Majority, f.Label, f.Key = vs, textsafe.Clean(f.Majority), textsafe.Clean(f.Label), textsafe.Clean(f.Key)
		d.Facts[i] = f
	}
	for _, p := range res.Mesh {
		p.From, p.To, p.Addr, p.Reason, p.Error = textsafe.Clean(p.From), textsafe.Clean(p.To), textsafe.Clean(p.Addr), textsafe.Clean(p.Reason), textsafe.Clean(p.Error)
		d.Mesh = append(d.Mesh, p)
	}
	for i, s := range res.Suspects {
		s.Node, s.Value, s.Majority, s.Fact, s.Label = textsafe.Clean(s.Node), textsafe.Clean(s.Value), textsafe.Clean(s.Majority), textsafe.Clean(s.Fact), textsafe.Clean(s.Label)
		d.Suspects[i] = s
	}
	return d
}

// WriteJSON writes the versioned JSON document.
func WriteJSON(w io.Writer, run Run, res Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(Doc(run, res)); err != nil {
		return fmt.Errorf("write cluster json: %w", err)
	}
	return nil
}

// PlainOptions tune the plain report.
type PlainOptions struct {
	// AllFacts shows every fact column, not only those that differ.
	AllFacts bool
	// MaxRows bounds the node table (0: all); the suspects list is never cut.
	MaxRows int
}

// WritePlain writes the table (nodes × facts that differ, most suspicious
// first), the facts every node agrees on, and the suspects with guides.
func WritePlain(out termio.Output, run Run, res Result, opts PlainOptions) error {
	doc := Doc(run, res)
	bold := lipgloss.NewStyle().Bold(true)
	bad := lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true)
	dim := lipgloss.NewStyle().Foreground(lipgloss.Color("245"))
	// Without colour the odd value is marked with * so it survives a
	// pipe, a log file or a screen reader.
	hl := func(s string) string {
		if out.Color() {
			return bad.Render(s)
		}
		return "*" + s
	}
	var b strings.Builder
	s := doc.Summary
	b.WriteString(bold.Render(fmt.Sprintf("ncclwiz cluster check · %s over %s · %d checked, %d not reachable, %s",
		units.Count(s.Nodes, "node"), doc.Engine, s.Checked, s.Unreachable, units.Count(s.Disagreements, "fact differs", "facts differ"))) + "\n")
	for _, n := range doc.Notes {
		b.WriteString(dim.Render("  "+n) + "\n")
	}
	b.WriteString("\n")

	var cols []FactRow
	for _, f := range doc.Facts {
		if !f.Agree || opts.AllFacts {
			cols = append(cols, f)
		}
	}
	header := []string{"NODE", "STATUS"}
	for _, f := range cols {
		header = append(header, f.Label)
	}
	header = append(header, "CLOCK", "OWN CHECK")
	table := [][]cell{}
	rows := doc.Nodes
	cut := 0
	if opts.MaxRows > 0 && len(rows) > opts.MaxRows {
		cut = len(rows) - opts.MaxRows
		rows = rows[:opts.MaxRows]
	}
	for _, n := range rows {
		st := string(n.Status)
		if n.Status != StatusOK && n.Reason != string(n.Status) {
			st += " (" + n.Reason + ")"
		}
		line := []cell{{text: n.Name}, {text: st, odd: n.Status != StatusOK}}
		if n.Status != StatusOK {
			line = append(line, cell{text: firstLine(n.Error), span: true})
			table = append(table, line)
			continue
		}
		differs := map[string]bool{}
		for _, k := range n.Differs {
			differs[k] = true
		}
		for _, f := range cols {
			v, ok := n.Facts[f.Key]
			if !ok {
				v = unsetOrUnknown(f.FactDef)
			}
			line = append(line, cell{text: v, odd: differs[f.Key]})
		}
		clock := "-"
		if n.ClockMS != nil {
			clock = fmt.Sprintf("%+.1fs", *n.ClockMS/1000)
			if n.ClockErrMS != nil && *n.ClockErrMS >= 50 {
				clock += fmt.Sprintf(" ±%.1f", *n.ClockErrMS/1000)
			}
		}
		own := "ok"
		if n.Problems > 0 {
			own = units.Count(n.Problems, "problem")
		}
		line = append(line, cell{text: clock, odd: differs["clock"]}, cell{text: own})
		table = append(table, line)
	}
	writeTable(&b, header, table, hl, bold)
	if cut > 0 {
		b.WriteString(dim.Render(fmt.Sprintf("… %d more nodes, all less suspicious (--json lists every node)", cut)) + "\n")
	}

	var agree []string
	for _, f := range doc.Facts {
		if f.Agree {
			for v := range f.Values {
				if v != Unknown { // no node reported it: nothing to agree on
					agree = append(agree, f.Label+" "+v)
				}
			}
		}
	}
	if len(agree) > 0 && !opts.AllFacts {
		b.WriteString("\n" + bold.Render("Same on every checked node:") + " " + strings.Join(agree, " · ") + "\n")
	}

	b.WriteString("\n")
	if len(doc.Suspects) == 0 && s.Unreachable == 0 {
		b.WriteString("Every checked node agrees on every fact.\n")
	} else {
		b.WriteString(bold.Render("Suspects, most suspicious first:") + "\n")
	}
	cross := "X"
	if out.Unicode {
		cross = "✗"
	}
	if out.Color() {
		cross = bad.Render(cross)
	}
	for _, n := range doc.Nodes {
		if n.Status != StatusOK {
			fmt.Fprintf(&b, "  %s %s: %s — %s\n", cross, n.Name, reasonText(n.Reason), firstLine(n.Error))
		}
	}
	for _, sp := range doc.Suspects {
		if sp.Ambiguous {
			fmt.Fprintf(&b, "  ! %s: %s = %s (no majority: compare the nodes) → ncclwiz guides %s\n", sp.Node, sp.Label, hl(sp.Value), sp.Guide)
			continue
		}
		fmt.Fprintf(&b, "  ! %s: %s = %s, the other nodes %s → ncclwiz guides %s\n", sp.Node, sp.Label, hl(sp.Value), sp.Majority, sp.Guide)
	}
	if doc.Mesh != nil {
		writeMesh(&b, doc.Mesh, hl, bold)
	}
	if s.NodeProblems > 0 {
		var ns []string
		for _, n := range doc.Nodes {
			if n.Problems > 0 {
				ns = append(ns, n.Name)
			}
		}
		sort.Strings(ns)
		fmt.Fprintf(&b, "\n%s (run `ncclwiz check` there): %s\n", units.Count(len(ns), "node reports problems of its own", "nodes report problems of their own"), abbreviate(ns, 12))
	}
	if s.ExitCode != 0 {
		// The other half of a multi-node diagnosis: the job's own logs.
		b.WriteString("\n" + dim.Render("Logs of the failed job from several nodes: ncclwiz explain node1.log node2.log … names the first rank that failed.") + "\n")
	}
	_, err := io.WriteString(out.Writer(), b.String())
	return err
}

// writeMesh prints the failed pairs of --mesh ("n3 cannot reach n7 at
// 10.0.0.7:41234 (timeout)") and the count of the others.
func writeMesh(b *strings.Builder, pairs []MeshPair, hl func(string) string, bold lipgloss.Style) {
	failed := 0
	for _, p := range pairs {
		if !p.OK {
			failed++
		}
	}
	fmt.Fprintf(b, "\n%s %d of %d connections on NCCL's interfaces failed\n", bold.Render("Reachability (--mesh):"), failed, len(pairs))
	for _, p := range pairs {
		if !p.OK {
			fmt.Fprintf(b, "  %s cannot reach %s at %s (%s) → ncclwiz guides socket-connect\n", p.From, p.To, p.Addr, hl(p.Reason))
		}
	}
}

// reasonText is what a reason means for the user.
func reasonText(r string) string {
	switch r {
	case "dns":
		return "the name does not resolve (DNS)"
	case "refused":
		return "connection refused (sshd down or firewalled)"
	case "auth":
		return "ssh authentication failed (key not accepted)"
	case "host-key":
		return "ssh host key not accepted"
	case "no-route":
		return "no route to the node"
	case "timeout":
		return "no answer within the timeout (node hung or a firewall drops packets)"
	case "remote-error":
		return "ncclwiz failed on the node"
	case "bad-report":
		return "the node's report could not be read"
	}
	return r
}

type cell struct {
	text string
	odd  bool
	span bool // the rest of the line (an unreachable node's error)
}

func writeTable(b *strings.Builder, header []string, rows [][]cell, hl func(string) string, bold lipgloss.Style) {
	w := make([]int, len(header))
	for i, h := range header {
		w[i] = lipgloss.Width(h)
	}
	for _, r := range rows {
		for i, c := range r {
			if !c.span && i < len(w) {
				w[i] = max(w[i], lipgloss.Width(c.text)+1)
			}
		}
	}
	for i, h := range header {
		b.WriteString(bold.Render(h) + strings.Repeat(" ", w[i]-lipgloss.Width(h)+2))
	}
	b.WriteString("\n")
	for _, r := range rows {
		for i, c := range r {
			t := c.text
			if c.odd {
				t = hl(t)
			}
			pad := 1
			if !c.span && i < len(w) {
				pad = w[i] - lipgloss.Width(t) + 2
			}
			b.WriteString(t + strings.Repeat(" ", max(pad, 1)))
		}
		b.WriteString("\n")
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func abbreviate(ns []string, n int) string {
	if len(ns) <= n {
		return strings.Join(ns, ", ")
	}
	return strings.Join(ns[:n], ", ") + fmt.Sprintf(" … (%d more)", len(ns)-n)
}

func cleanAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = textsafe.Clean(s)
	}
	return out
}
