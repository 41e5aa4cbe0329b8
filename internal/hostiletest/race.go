//go:build race

package hostiletest

// Race is true in a -race build. The attack suites test syscalls and
// processes, not goroutines, and CI runs them in the plain pass: under
// the race detector they only double its time.
const Race = true
