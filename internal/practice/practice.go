// Package practice names what is exported from a practice scenario (a
// simulated server): scripts and snippets carry Marker so that neither a
// person nor a grep can mistake them for this machine's.
package practice

// Marker is the line (without its comment sign) that marks a script or
// snippet exported from the scenario name.
func Marker(name string) string {
	return "ncclwiz-practice-scenario: " + name + " (simulated server; not for this machine)"
}
