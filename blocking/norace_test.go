//go:build !race

package blocking

const raceEnabled = false
