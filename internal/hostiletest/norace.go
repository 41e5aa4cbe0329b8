//go:build !race

package hostiletest

// Race is true in a -race build (see race.go).
const Race = false
