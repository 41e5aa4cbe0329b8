//go:build !race

package realjob

const race = false
