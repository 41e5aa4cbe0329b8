//go:build race

package explain

// raceEnabled skips the memory tests under the race detector: they check
// allocation and RSS bounds, not concurrency, and run ten times slower.
const raceEnabled = true
