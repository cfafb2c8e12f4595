//go:build race

package blocking

// raceEnabled: the race detector allocates on its own account, and makes
// sync.Pool drop what it holds at random, so allocation counts are not
// asserted under it.
const raceEnabled = true
