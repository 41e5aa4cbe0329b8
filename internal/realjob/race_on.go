//go:build race

package realjob

// race: this test binary was built with the race detector.
const race = true
