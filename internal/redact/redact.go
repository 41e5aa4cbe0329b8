// Package redact replaces identifying details in text that leaves the
// machine (bug reports): host names, IP addresses, user names and home
// paths get stable pseudonyms (node-A, 10.x → ip-1, user-1), and secrets are
// removed. The pseudonym map can be written next to the report so the
// author can reverse it locally; it is never part of the report.
package redact

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strings"

	"github.com/ncclwiz/ncclwiz/internal/textsafe"
)

// Redactor holds the pseudonyms handed out so far. It is not safe for
// concurrent use.
type Redactor struct {
	hosts   map[string]string
	users   map[string]string
	ips     map[string]string
	homes   map[string]string
	ordered []string // replacement keys, longest first, rebuilt on change
}

// New returns an empty Redactor.
func New() *Redactor {
	return &Redactor{hosts: map[string]string{}, users: map[string]string{}, ips: map[string]string{}, homes: map[string]string{}}
}

// AddHost registers a host name (and its short form) to pseudonymise.
func (r *Redactor) AddHost(name string) {
	name = strings.TrimSpace(name)
	if name == "" || name == "localhost" {
		return
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return // addresses are handled by the IP pass
	}
	if _, ok := r.hosts[name]; !ok {
		r.hosts[name] = "node-" + letters(len(r.hosts))
		r.ordered = nil
	}
	if short, _, ok := strings.Cut(name, "."); ok && len(short) >= 3 {
		if _, ok := r.hosts[short]; !ok {
			r.hosts[short] = r.hosts[name]
			r.ordered = nil
		}
	}
}

// AddUser registers a user name to pseudonymise. Very short or generic names
// are skipped because replacing them would mangle ordinary words.
func (r *Redactor) AddUser(name string) {
	if len(name) < 3 || name == "root" || name == "user" {
		return
	}
	if _, ok := r.users[name]; !ok {
		r.users[name] = fmt.Sprintf("user-%d", len(r.users)+1)
		r.ordered = nil
	}
}

// AddHome registers a home directory, replaced by "~".
func (r *Redactor) AddHome(path string) {
	path = strings.TrimRight(path, "/")
	if len(path) < 2 || path == "/root" {
		return
	}
	r.homes[path] = "~"
	r.ordered = nil
}

var ipv4 = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b`)

// ipv6 finds candidates (two or more colons, hex and dots, an optional
// %zone); netip.ParseAddr decides, so times (12:34:56) and MAC addresses
// are left alone.
var ipv6 = regexp.MustCompile(`[0-9A-Fa-f]*:[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(?:%[A-Za-z0-9_.\-]+)?`)

// Text returns s with secrets removed and every registered name, every IP
// address (except loopback, unspecified, multicast and IPv4 link-local)
// replaced. IPv6 link-local addresses (fe80::/10) are replaced too: most
// embed the interface's MAC address.
func (r *Redactor) Text(s string) string {
	s = textsafe.RedactText(s)
	s = r.replaceIPs(s)
	if r.ordered == nil {
		for k := range r.hosts {
			r.ordered = append(r.ordered, k)
		}
		for k := range r.users {
			r.ordered = append(r.ordered, k)
		}
		for k := range r.homes {
			r.ordered = append(r.ordered, k)
		}
		sort.Slice(r.ordered, func(i, j int) bool { return len(r.ordered[i]) > len(r.ordered[j]) })
	}
	for _, k := range r.ordered {
		if !strings.Contains(s, k) {
			continue
		}
		v := r.hosts[k]
		if v == "" {
			v = r.homes[k]
		}
		if v == "" {
			v = r.users[k]
		}
		s = replaceWord(s, k, v)
	}
	return s
}

// replaceWord replaces old with new where old is not part of a longer
// identifier (so user "ann" does not hit "channel").
func replaceWord(s, old, repl string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		before := i == 0 || !isWordByte(s[i-1])
		after := i+len(old) == len(s) || !isWordByte(s[i+len(old)]) || strings.HasPrefix(old, "/")
		b.WriteString(s[:i])
		if before && after {
			b.WriteString(repl)
		} else {
			b.WriteString(old)
		}
		s = s[i+len(old):]
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func (r *Redactor) replaceIPs(s string) string {
	pseudonym := func(a netip.Addr) string {
		if p, ok := r.ips[a.String()]; ok {
			return p
		}
		p := fmt.Sprintf("ip-%d", len(r.ips)+1)
		r.ips[a.String()] = p
		return p
	}
	s = ipv4.ReplaceAllStringFunc(s, func(m string) string {
		a, err := netip.ParseAddr(m)
		if err != nil || a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsMulticast() {
			return m
		}
		return pseudonym(a)
	})
	var b strings.Builder
	last := 0
	for _, loc := range ipv6.FindAllStringIndex(s, -1) {
		if loc[1] < len(s) && isWordByte(s[loc[1]]) {
			continue // part of a longer word
		}
		start, a, zone, ok := v6At(s, loc[0], loc[1])
		if !ok {
			continue
		}
		repl := pseudonym(a)
		if zone != "" {
			repl += "%" + zone
		}
		b.WriteString(s[last:start])
		b.WriteString(repl)
		last = loc[1]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// v6At finds the address that ends at end: the candidate s[from:end] or,
// when that is glued to a word ("eth0:fe80::1"), what follows one of its
// single colons. Loopback, unspecified and multicast addresses are kept.
func v6At(s string, from, end int) (int, netip.Addr, string, bool) {
	for start := from; start < end; start++ {
		if start > from && (s[start-1] != ':' || s[start] == ':' || (start >= 2 && s[start-2] == ':')) {
			continue
		}
		if start == from && start > 0 && isWordByte(s[start-1]) {
			continue
		}
		addr, zone, _ := strings.Cut(s[start:end], "%")
		a, err := netip.ParseAddr(addr)
		if err != nil || !a.Is6() {
			continue
		}
		if u := a.Unmap(); u.IsLoopback() || u.IsUnspecified() || u.IsMulticast() {
			return 0, netip.Addr{}, "", false
		}
		return start, a, zone, true
	}
	return 0, netip.Addr{}, "", false
}

// Mapping returns pseudonym → original, for the author's eyes only.
func (r *Redactor) Mapping() map[string]string {
	m := map[string]string{}
	for k, v := range r.hosts {
		if prev, ok := m[v]; !ok || len(k) > len(prev) {
			m[v] = k
		}
	}
	for k, v := range r.users {
		m[v] = k
	}
	for k, v := range r.ips {
		m[v] = k
	}
	return m
}

func letters(i int) string {
	s := ""
	for {
		s = string(rune('A'+i%26)) + s
		i = i/26 - 1
		if i < 0 {
			return s
		}
	}
}
