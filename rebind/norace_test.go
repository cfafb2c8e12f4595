//go:build !race

package rebind

const raceEnabled = false
