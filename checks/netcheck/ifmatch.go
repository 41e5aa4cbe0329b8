package netcheck

import (
	"strconv"
	"strings"
)

// NCCL reads NCCL_SOCKET_IFNAME and NCCL_IB_HCA with one small grammar
// (src/misc/utils.cc parseStringList and matchIfList, src/os/linux.cc
// ncclOsFindInterfaces, src/transport/net_ib/init.cc): an optional "^"
// (exclude), then an optional "=" (exact names; without it every entry is a
// prefix), then comma-separated entries of the form name[:port[:rail[:plane]]].
// The code below reproduces it so ncclwiz can say what NCCL will select.

// Limits of NCCL's parsed lists (MAX_IFS for sockets, MAX_IB_DEVS for HCAs).
const (
	maxSocketIfs = 16
	maxIBDevs    = 32
)

// ifEntry is one list entry.
type ifEntry struct {
	Prefix string
	Port   int // -1 when absent
}

// IfList is a parsed NCCL interface or HCA list.
type IfList struct {
	Raw     string
	Exclude bool // leading ^
	Exact   bool // = after the optional ^
	Entries []ifEntry
}

// ParseIfList parses a value the way NCCL does. Entries beyond max are
// dropped, as NCCL drops them; empty entries are skipped; spaces are kept
// (NCCL does not trim them, so " eth1" matches nothing).
func ParseIfList(v string, max int) IfList {
	l := IfList{Raw: v}
	if strings.HasPrefix(v, "^") {
		l.Exclude = true
		v = v[1:]
	}
	if strings.HasPrefix(v, "=") {
		l.Exact = true
		v = v[1:]
	}
	for _, e := range strings.Split(v, ",") {
		if len(l.Entries) >= max {
			break
		}
		name, rest, _ := strings.Cut(e, ":")
		if name == "" {
			continue
		}
		port := -1
		if rest != "" {
			p, _, _ := strings.Cut(rest, ":")
			if p != "" {
				port = atoi(p)
			}
		}
		l.Entries = append(l.Entries, ifEntry{Prefix: name, Port: port})
	}
	return l
}

// atoi mimics C atoi: leading digits (with an optional sign), else 0.
func atoi(s string) int {
	s = strings.TrimLeft(s, " \t")
	end := 0
	if end < len(s) && (s[end] == '-' || s[end] == '+') {
		end++
	}
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil {
		return 0
	}
	return n
}

// entryMatches is NCCL's matchIf + matchPort for one entry.
func (l IfList) entryMatches(e ifEntry, name string, port int) bool {
	var nameOK bool
	if l.Exact {
		nameOK = name == e.Prefix
	} else {
		nameOK = strings.HasPrefix(name, e.Prefix)
	}
	return nameOK && (port == -1 || e.Port == -1 || port == e.Port)
}

// Selects reports whether NCCL would keep interface (or HCA port) name.
// port is -1 for socket interfaces.
func (l IfList) Selects(name string, port int) bool {
	in := len(l.Entries) == 0 // NCCL: an empty list matches everything
	for _, e := range l.Entries {
		if l.entryMatches(e, name, port) {
			in = true
			break
		}
	}
	return in != l.Exclude
}

// Unmatched returns the entries that match none of names (for "ens34 does
// not exist here").
func (l IfList) Unmatched(names []string) []string {
	var out []string
	for _, e := range l.Entries {
		hit := false
		for _, n := range names {
			if l.entryMatches(e, n, -1) {
				hit = true
				break
			}
		}
		if !hit {
			out = append(out, e.Prefix)
		}
	}
	return out
}

// Syntax returns problems with how the value is written that NCCL silently
// accepts: spaces inside entries, "=^" instead of "^=", and a value of one
// character, which NCCL ignores (it only reads values longer than one byte).
func (l IfList) Syntax() []string {
	var out []string
	if len(l.Raw) == 1 {
		out = append(out, "a one-character value is ignored by NCCL (it only honours values longer than one character), so automatic selection applies")
	}
	for _, e := range l.Entries {
		if strings.TrimSpace(e.Prefix) != e.Prefix {
			out = append(out, "entry "+strconv.Quote(e.Prefix)+" contains spaces; NCCL does not trim them, so it matches no interface")
		}
		if strings.HasPrefix(e.Prefix, "^") || strings.HasPrefix(e.Prefix, "=") {
			out = append(out, "entry "+strconv.Quote(e.Prefix)+" starts with "+e.Prefix[:1]+"; NCCL reads ^ and = only at the start of the whole value, in the order ^=")
		}
	}
	return out
}

// Canonical renders the list back in NCCL's syntax.
func (l IfList) Canonical() string {
	var b strings.Builder
	if l.Exclude {
		b.WriteByte('^')
	}
	if l.Exact {
		b.WriteByte('=')
	}
	// An entry that itself starts with ^ or = would be read as a flag;
	// NCCL skips empty entries, so a leading comma keeps it an entry.
	if len(l.Entries) > 0 && strings.ContainsAny(l.Entries[0].Prefix[:1], "^=") {
		b.WriteByte(',')
	}
	for i, e := range l.Entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.Prefix)
		if e.Port >= 0 {
			b.WriteString(":" + strconv.Itoa(e.Port))
		}
	}
	return b.String()
}
