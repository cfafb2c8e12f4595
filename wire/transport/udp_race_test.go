//go:build race

package transport

// raceEnabled: the race detector allocates on its own account and slows
// every test down, so allocation counts are not asserted under it and the
// spoof test forges fewer answers.
const raceEnabled = true
