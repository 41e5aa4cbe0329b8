// Package polltest waits in tests for a condition on real processes or
// files, with a bound rather than a fixed sleep (the bound is a limit,
// never a timing assertion).
package polltest

import "time"

// Until polls cond every 20ms until it holds (true) or limit has passed
// (false).
func Until(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
