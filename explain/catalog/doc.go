package catalog

import (
	"fmt"
	"sort"
	"strings"
)

// Stats sums up the catalogue.
type Stats struct {
	Messages      int      // every message
	NCCLFormats   int      // NCCL WARN format strings
	NCCLErrStr    int      // ncclGetErrorString texts
	NCCLTags      int      // release tags the NCCL rows were read from (the most any row has)
	NCCLMinors    int      // NCCL minor releases covered
	OtherMessages int      // messages of every other source
	Sources       []string // every source
	Causes        int      // diagnoses the catalogue names beyond the guides'
	Subsystems    int      // distinct subsystems NCCL messages are placed in
}

// Stats counts the catalogue.
func (c *Catalog) Stats() Stats {
	st := Stats{Messages: len(c.Messages), Causes: len(c.Causes)}
	srcs := map[string]bool{}
	subs := map[string]bool{}
	for _, m := range c.Messages {
		srcs[m.Source] = true
		switch {
		case m.IsNCCL() && m.Kind == "errstr":
			st.NCCLErrStr++
		case m.IsNCCL():
			st.NCCLFormats++
		default:
			st.OtherMessages++
		}
		if m.IsNCCL() {
			st.NCCLTags = max(st.NCCLTags, m.Tags)
			st.NCCLMinors = max(st.NCCLMinors, m.Minors)
		}
		if m.Subsystem != nil {
			subs[m.Subsystem.Name] = true
		}
	}
	for s := range srcs {
		st.Sources = append(st.Sources, s)
	}
	sort.Strings(st.Sources)
	st.Subsystems = len(subs)
	return st
}

// DocTable renders the catalogue as the markdown of docs/explain-catalog.md.
func DocTable(c *Catalog) string {
	st := c.Stats()
	var b strings.Builder
	b.WriteString("# The explainer's message catalogue\n\n")
	b.WriteString("Generated from `explain/catalog` (`go test ./explain/catalog -run TestDocTable -update`); do not edit.\n")
	b.WriteString("NCCL's rows are read from NCCL's sources, every release tag from 2.4 to 2.30, by\n")
	b.WriteString("`explain/catalog/internal/gen`; the other rows, the rules that give NCCL's messages their\n")
	b.WriteString("diagnosis and the causes are written in `explain/catalog/catalog.yaml`.\n\n")
	fmt.Fprintf(&b, "%d messages: %d NCCL WARN formats and %d `ncclGetErrorString` texts over %d NCCL minor releases (the most-printed read from %d release tags), and %d messages of %d other sources (%s). ",
		st.Messages, st.NCCLFormats, st.NCCLErrStr, st.NCCLMinors, st.NCCLTags, st.OtherMessages, len(st.Sources)-1, strings.Join(others(st.Sources), ", "))
	b.WriteString("A diagnosis is a cause (a guide's signature id or one of the catalogue's causes), `benign` for a warning healthy jobs print, or deliberately the NCCL subsystem the message's source file belongs to. ")
	b.WriteString("A message is found even when its line lost its prefix, was wrapped, cut or abridged: the explainer matches the format's literal text, not the prefix around it.\n\n")

	b.WriteString("## Causes the catalogue names\n\n| id | title | role | guide |\n| --- | --- | --- | --- |\n")
	var ids []string
	for id := range c.Causes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		cs := c.Causes[id]
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", id, cell(cs.Title), cs.Role, cs.Guide)
	}

	b.WriteString("\n## Messages of PyTorch, gloo, launchers and frameworks\n\n| message | source | file | releases | diagnosis |\n| --- | --- | --- | --- | --- |\n")
	for _, m := range c.Messages {
		if m.IsNCCL() {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", code(strings.Join(m.Formats(), " / ")), m.Source, cell(m.File), cell(m.Releases), diag(m))
	}

	b.WriteString("\n## CUDA errors\n\n| code | name | text | diagnosis as a payload |\n| --- | --- | --- | --- |\n")
	for _, e := range c.Cuda {
		d := e.Cause
		if d == "" {
			d = "(the wrapper's; explained)"
		} else {
			d = "`" + d + "`"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", e.Code, e.Name, cell(e.Text), d)
	}

	b.WriteString("\n## Diagnoses by the text a message printed\n\nWhatever NCCL message prints them (a CUDA error's name inside `Cuda failure '%s'`, a call's name inside `Call to %s failed`), these texts name the diagnosis:\n\n| text | in files | diagnosis |\n| --- | --- | --- |\n")
	for _, r := range c.Rules {
		if r.Value != "" && r.Format == "" {
			fmt.Fprintf(&b, "| %s | %s | `%s` |\n", code(r.Value), cell(orAny(r.File)), r.Cause)
		}
	}

	b.WriteString("\n## NCCL's messages\n\n| message | files | releases | diagnosis |\n| --- | --- | --- | --- |\n")
	for _, m := range c.Messages {
		if !m.IsNCCL() {
			continue
		}
		f := m.Format
		if m.Kind == "errstr" {
			f = "ncclGetErrorString: " + f
		}
		fmt.Fprintf(&b, "| %s | %s | %s (%d minors) | %s |\n", code(f), cell(strings.ReplaceAll(m.File, ",", ", ")), m.Releases, m.Minors, diag(m))
	}
	return b.String()
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

func others(srcs []string) []string {
	var out []string
	for _, s := range srcs {
		if s != "nccl" {
			out = append(out, s)
		}
	}
	return out
}

func diag(m *Message) string {
	s := "`" + m.Cause + "`"
	if m.Cause == "" && m.Subsystem != nil {
		s = "subsystem: " + m.Subsystem.Name
	}
	var vs []string
	for _, v := range m.values {
		// Rules on every message (a CUDA error's text) are listed once.
		if v.Format == "" {
			continue
		}
		where := ""
		if v.File != "" {
			where = " in " + v.File
		}
		vs = append(vs, fmt.Sprintf("`%s` when it says “%s”%s", v.Cause, v.Value, where))
	}
	if len(vs) > 0 {
		s += "; " + strings.Join(dedupe(vs), "; ")
	}
	return cell(s)
}

func dedupe(l []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range l {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// cell escapes a markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// code renders a format as inline code in a cell.
func code(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	if strings.Contains(s, "`") {
		return "``" + s + "``"
	}
	return "`" + s + "`"
}
